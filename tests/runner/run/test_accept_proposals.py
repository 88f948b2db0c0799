"""An agent's ``accept_proposals``: "auto" accepts the proposals its run's entry makes above the stricter threshold; "never" leaves them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from journal import Journal
from journal.indexing import AUTO_ACCEPT_THRESHOLD
from runner.errors import ConfigError
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, ghostrunner, script, write_config
from tests.journal._proposal_entries import AGAIN, NEW, OLD, OTHER

_HELPER = """
import json, sys
sys.stdin.read()
print(json.dumps({{"voice": {voice!r}, "theme": "studio", "tags": ["studio"]}}))
"""


def _run(tmp_path: Path, accept: str) -> tuple[str, str, str]:
    """The older entry, an unlike one on the same tag, and the run's entry that updates the older: their ids."""
    with Journal(tmp_path / "journal") as journal:
        old = journal.append(
            {"kind": "note", "agent": "motoko", "theme": "studio", "tags": ["studio"], "voice": NEW, "ts": "2026-01-10T09:00:00Z"}
        )
        other = journal.append(
            {"kind": "note", "agent": "motoko", "theme": "studio", "tags": ["studio"], "voice": OTHER, "ts": "2026-02-10T09:00:00Z"}
        )
    argv = script(tmp_path, "helper.py", _HELPER.format(voice=AGAIN))
    line = "" if accept == "default" else f'accept_proposals = "{accept}"\n'
    path = write_config(
        tmp_path, f'[agents.motoko]\nroutines = ["evening"]\n{line}backend = {{ type = "command", command = {json.dumps(argv)} }}\n'
    )
    for _ in range(2):  # the slot run again: a duplicate, which accepts nothing twice
        result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    return old.id, other.id, json.loads(result.stdout)["entry_id"]


def test_auto_accepts_the_run_s_proposals_above_the_stricter_threshold_once(tmp_path: Path) -> None:
    old, _, new = _run(tmp_path, "auto")
    with Journal(tmp_path / "journal") as journal:
        (correction,) = [entry for entry in journal.list(agent="motoko") if entry.supersedes]
        assert (correction.supersedes, correction.continuity_refs, correction.origin) == ((old,), (new,), "agent")
        assert all(proposal.score < AUTO_ACCEPT_THRESHOLD for proposal in journal.proposals(newer=new))
        assert len(journal.list(agent="motoko")) == 4  # two before, the run's entry, one correction: the second run added none
        top = journal.search("where is the studio", agent="motoko")
        ids = [hit.entry_id for hit in top]
        assert ids.index(correction.id) < ids.index(old)


@pytest.mark.parametrize("accept", ["default", "never"])
def test_never_and_the_default_leave_the_proposal_pending(tmp_path: Path, accept: str) -> None:
    old, _, new = _run(tmp_path, accept)
    with Journal(tmp_path / "journal") as journal:
        assert not any(entry.supersedes for entry in journal.list(agent="motoko"))
        assert any(p.older == old and p.score >= AUTO_ACCEPT_THRESHOLD for p in journal.proposals(newer=new))


@pytest.mark.parametrize("value", ['"always"', "true"])
def test_a_bad_accept_proposals_is_refused_naming_its_key(tmp_path: Path, value: str) -> None:
    path = write_config(tmp_path, SIMPLE_AGENT + f"accept_proposals = {value}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: agents.motoko.accept_proposals: expected one of 'never', 'auto'")):
        load_config(path)


_DECIDING = """
import json, sys
sys.stdin.read()
print(json.dumps({{"voice": "Rested; nothing new about the studio.", "theme": "rest", "proposals": {decisions}}}))
"""


def test_a_reply_accepts_and_rejects_proposals_by_the_ids_its_context_shows(tmp_path: Path) -> None:
    with Journal(tmp_path / "journal") as journal:
        one, two, three = (
            journal.append({"kind": "note", "agent": "motoko", "theme": "studio", "tags": ["studio"], "voice": voice, "ts": ts})
            for voice, ts in ((OLD, "2026-01-10T09:00:00Z"), (NEW, "2026-04-20T09:00:00Z"), (AGAIN, "2026-05-01T09:00:00Z"))
        )
        theirs = journal.append({"kind": "note", "agent": "batou", "theme": "studio", "tags": ["studio"], "voice": OLD})
        pending = {(p.older, p.newer) for p in journal.proposals()}
    assert {(one.id, two.id), (two.id, three.id)} <= pending
    decisions = [
        {"older": one.id[:8], "newer": two.id[:8], "decision": "accept"},  # the short ids a context's mark shows
        {"older": two.id, "newer": three.id, "decision": "reject"},
        {"older": theirs.id, "newer": three.id, "decision": "accept"},  # another agent's entry: unknown here, logged and skipped
        {"older": three.id, "newer": one.id, "decision": "accept"},  # never proposed: skipped
    ]
    argv = script(tmp_path, "helper.py", _DECIDING.format(decisions=repr(decisions)))
    path = write_config(
        tmp_path, f'[agents.motoko]\nroutines = ["evening"]\nbackend = {{ type = "command", command = {json.dumps(argv)} }}\n'
    )
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcome"] == "appended"
    with Journal(tmp_path / "journal") as journal:
        decided = {
            (entry.meta["proposal"]["decision"], entry.meta["proposal"]["older"], entry.meta["proposal"]["newer"], entry.origin)
            for entry in journal.list()
            if "proposal" in entry.meta
        }
        assert decided == {("accepted", one.id, two.id, "agent"), ("rejected", two.id, three.id, "agent")}
        assert (two.id, three.id) not in {(p.older, p.newer) for p in journal.proposals()}


def test_a_reply_whose_proposals_are_malformed_fails_naming_the_field(tmp_path: Path) -> None:
    argv = script(tmp_path, "helper.py", _DECIDING.format(decisions=repr([{"older": "a", "newer": "b", "decision": "maybe"}])))
    path = write_config(
        tmp_path, f'[agents.motoko]\nroutines = ["evening"]\nbackend = {{ type = "command", command = {json.dumps(argv)}, attempts = 1 }}\n'
    )
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode != 0
    assert "'proposals[0]' must be {older, newer, decision: 'accept' or 'reject'}" in json.loads(result.stdout)["error"]
