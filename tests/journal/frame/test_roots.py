"""The one rule for where a journal is when no root is given (journal.frame.roots), as data: environments in, places out."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from journal.frame import JournalPlace, PlaceError, journal_place


@pytest.mark.parametrize(("agent", "environ", "expected"), [
    ("motoko", {"GHOSTJOURNAL_ROOT": "/srv/journal", "STATE_DIRECTORY": "/var/lib/g", "XDG_STATE_HOME": "/x", "HOME": "/home/u"},
     JournalPlace(Path("/srv/journal"), "$GHOSTJOURNAL_ROOT")),
    (None, {"GHOSTJOURNAL_ROOT": "/srv/journal"}, JournalPlace(Path("/srv/journal"), "$GHOSTJOURNAL_ROOT")),
    ("motoko", {"STATE_DIRECTORY": "/var/lib/a:/var/lib/b", "XDG_STATE_HOME": "/x", "HOME": "/home/u"},
     JournalPlace(Path("/var/lib/a/motoko"), "the journal of agent 'motoko' in $STATE_DIRECTORY")),
    ("motoko", {"XDG_STATE_HOME": "/x", "HOME": "/home/u"},
     JournalPlace(Path("/x/ghostjournal/motoko"), "the journal of agent 'motoko' in $XDG_STATE_HOME/ghostjournal")),
    ("motoko", {"XDG_STATE_HOME": "relative", "HOME": "/home/u"},
     JournalPlace(Path("/home/u/.local/state/ghostjournal/motoko"), "the journal of agent 'motoko' in ~/.local/state/ghostjournal")),
    ("motoko", {"HOME": "."}, None),
    (None, {"XDG_STATE_HOME": "/x", "HOME": "/home/u"}, None),
], ids=["variable-first", "variable-without-agent", "systemd", "xdg", "xdg-relative-ignored", "no-state-directory", "no-agent"])
def test_the_variable_then_the_agents_journal_in_the_state_directory(agent: str | None, environ: dict[str, str], expected: JournalPlace | None) -> None:
    """$GHOSTJOURNAL_ROOT wins; else an agent's journal is AGENT in $STATE_DIRECTORY, $XDG_STATE_HOME/ghostjournal or ~/.local/state/ghostjournal; else none."""
    assert journal_place(agent, environ) == expected


def test_a_relative_variable_is_made_absolute_where_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative $GHOSTJOURNAL_ROOT is the working directory's, made absolute so that a process started elsewhere opens the same journal."""
    monkeypatch.chdir(tmp_path)
    place = journal_place("motoko", {"GHOSTJOURNAL_ROOT": "journal"})
    assert place is not None and place.root == tmp_path / "journal" and os.path.isabs(place.root)


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_a_blank_variable_is_an_error_never_a_default(value: str) -> None:
    """Set but blank, $GHOSTJOURNAL_ROOT names nothing: neither the current directory nor the state directory is taken for it."""
    with pytest.raises(PlaceError, match=re.escape(f"$GHOSTJOURNAL_ROOT: expected a journal directory, got {value!r}; an empty value is not the current")):
        journal_place("motoko", {"GHOSTJOURNAL_ROOT": value, "XDG_STATE_HOME": "/x"})


@pytest.mark.parametrize("agent", ["", "..", ".hidden", "a/b", "../motoko", "motoko/..", "x" * 65, "tab\there"])
def test_a_name_that_is_no_agents_never_becomes_a_path(agent: str) -> None:
    """Only a valid agent name (one path component, never . or ..) is joined to the state directory."""
    with pytest.raises(PlaceError, match=r"^--agent: expected an agent name of 1-64 letters"):
        journal_place(agent, {"XDG_STATE_HOME": "/x"})
