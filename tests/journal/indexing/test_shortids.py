"""Short ids: each names its own entry alone among those the reader may see, and is the shortest start that does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import AmbiguousEntryIdError, EntryNotFoundError, Journal


def _note(entry_id: str, hours: int, agent: str = "motoko") -> dict[str, Any]:
    return {"id": entry_id, "kind": "note", "agent": agent, "ts": f"2019-09-01T{hours % 24:02d}:30:00Z", "theme": "t", "voice": "v"}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.text("ab-1", min_size=1, max_size=12).filter(lambda text: text[0] != "-"), min_size=1, max_size=12, unique=True))
def test_every_short_id_resolves_to_its_entry_and_one_character_less_would_not(tmp_path_factory: pytest.TempPathFactory,
                                                                               ids: list[str]) -> None:
    """Ids made of few letters share long starts: each short id is at least 8 characters (or the whole id), takes back
    to its own entry, and is the shortest such start."""
    with Journal(tmp_path_factory.mktemp("j")) as journal:
        for hours, entry_id in enumerate(ids):
            journal.append(_note(entry_id, hours))
        short = journal.short_ids(ids)
        for entry_id in ids:
            cut = short[entry_id]
            assert entry_id.startswith(cut) and len(cut) >= min(8, len(entry_id))
            assert journal.resolve_id(cut) == entry_id
            if len(cut) > min(8, len(entry_id)):  # one character less names no entry, or another one
                try:
                    other: str | None = journal.resolve_id(cut[:-1])
                except (AmbiguousEntryIdError, EntryNotFoundError):
                    other = None
                assert other != entry_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.lists(
        st.tuples(
            # Starts of 0 to 9 characters that many ids share: ids beside each other share more or fewer than seven.
            st.builds(str.__add__, st.sampled_from(["", "ab1", "ab1ab1a", "ab1ab1ab", "ab1ab1ab1"]), st.text("ab1", min_size=1, max_size=3)),
            st.sampled_from(["motoko", "batou", "saito"]),
        ),
        min_size=1,
        max_size=14,
        unique_by=lambda note: note[0],
    )
)
def test_short_ids_scoped_to_an_agent_are_those_its_own_ids_alone_give(
    tmp_path_factory: pytest.TempPathFactory, notes: list[tuple[str, str]]
) -> None:
    """Scoped, an id is cut among its agent's ids alone, whatever the other agents' ids beside it share with it (the journal's
    neighbours settle most ids; those sharing more than seven characters with one are cut among the agent's own)."""
    from journal.indexing import shortids

    with Journal(tmp_path_factory.mktemp("j")) as journal:
        for hours, (entry_id, agent) in enumerate(notes):
            journal.append(_note(entry_id, hours, agent))
        index = journal._keeper.index
        for agent in ("motoko", "batou", "saito"):
            own = sorted(entry_id for entry_id, owner in notes if owner == agent)
            expected = {}
            for entry_id in own:  # the agent's ids alone, in id order: the two beside each share the most of its start
                at = own.index(entry_id)
                beside = [own[at - 1] if at else None, own[at + 1] if at + 1 < len(own) else None]
                size = max(shortids._shared_start(entry_id, other) for other in beside) + 1
                expected[entry_id] = entry_id[: max(size, shortids.MIN_SHORT_ID)]
            assert shortids.short_ids(index, own, agent) == expected
