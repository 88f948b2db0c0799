"""Simulation that cannot touch real work: real backends need --real-backends, simulated and real entries never mix unasked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from journal import Journal
from runner.errors import MixedJournalError, RealBackendsRefusedError
from runner.settings.config import load_config
from tests._support import entry_files, ghostrunner, script, write_config

#: A command backend that appends a line to calls.log for each request.
RECORDING = """
import json, sys
request = json.load(sys.stdin)
with open({log!r}, "a") as calls:
    calls.write(request["client_key"] + "\\n")
print(json.dumps({{"theme": "the day", "voice": "A quiet day at the desk."}}))
"""


def _real_agent(tmp_path: Path, name: str = "batou", routines: str = '["pulse-4h", "evening", "digest"]') -> str:
    argv = script(tmp_path, "record.py", RECORDING.format(log=str(tmp_path / "calls.log")))
    return f"""
[agents.{name}]
routines = {routines}
backend = {{ type = "command", command = {json.dumps(argv)} }}
"""


SIMULATED = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening", "digest"]
"""


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("command", ["simulate", "demo"])
def test_a_real_backend_is_refused_without_the_flag_and_the_calls_are_counted(tmp_path: Path, command: str) -> None:
    """simulate and demo of an agent on a command backend exit 2 naming the calls they would make, call nothing and create no journal."""
    path = write_config(tmp_path, _real_agent(tmp_path))
    args = [command, "--agent", "batou", "--days", "7", "--start", "2026-08-03", "--config", str(path)]
    refused = ghostrunner(*args, cwd=tmp_path)
    # 7 days: 42 pulses and 7 evenings ask the backend; the digest asks none.
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (f"ghostrunner: error: {command} would make up to 49 (batou: 49 on command) backend calls, one per slot; "
                              'pass --real-backends to make them, or simulate agents on backend = "simulated"\n')
    assert _calls(tmp_path) == [] and not (tmp_path / "journal").exists()
    allowed = ghostrunner(*args, "--real-backends", cwd=tmp_path, timeout=300)
    assert allowed.returncode == 0, allowed.stderr
    [announced] = [json.loads(line) for line in allowed.stderr.splitlines() if "simulate.backend_calls" in line]  # a JSON log line
    assert (announced["level"], announced["command"], announced["calls"]) == ("warning", command, {"batou": 49})
    assert announced["message"] == "up to 49 (batou: 49 on command), one per slot"
    assert all(json.loads(line) for line in allowed.stderr.splitlines())  # nothing else that status would count as malformed
    assert len(_calls(tmp_path)) == 49


def test_the_python_api_refuses_real_backends_too(tmp_path: Path) -> None:
    """runner.run.simulate.simulate refuses a real backend unless real_backends=True, before any call."""
    from runner.run.simulate import simulate, simulation_window

    config = load_config(write_config(tmp_path, _real_agent(tmp_path, routines='["evening"]')))
    start, end = simulation_window(3, config.timezone, None)
    with pytest.raises(RealBackendsRefusedError, match=r"simulate would make up to 3 \(batou: 3 on command\) backend calls") as caught:
        simulate(config, ["batou"], start, end)
    assert caught.value.calls == {"batou": 3} and caught.value.exit_code == 2
    assert _calls(tmp_path) == []


def test_simulated_entries_are_marked_and_real_ones_never_are(tmp_path: Path) -> None:
    """Every entry of a simulated agent (digests too) has meta.simulated true; a real backend's entries never have it."""
    simulated = write_config(tmp_path / "sim", SIMULATED)
    assert ghostrunner("simulate", "--days", "7", "--start", "2026-08-03", "--config", str(simulated), cwd=tmp_path).returncode == 0
    with Journal(tmp_path / "sim" / "journal", create=False) as journal:
        marked = journal.list()
        assert {entry.kind for entry in marked} == {"pulse", "evening", "digest"}
        assert all(entry.meta["simulated"] is True for entry in marked)
        assert journal.has_entries(simulated=True) and not journal.has_entries(simulated=False)
    real = write_config(tmp_path / "real", _real_agent(tmp_path))
    done = ghostrunner("run", "evening", "--agent", "batou", "--at", "2026-08-03T21:00", "--config", str(real), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with Journal(tmp_path / "real" / "journal", create=False) as journal:
        [entry] = journal.list()
        assert "simulated" not in entry.meta and not entry.is_simulated
        assert journal.has_entries(simulated=False) and not journal.has_entries(simulated=True)


def test_has_entries_answers_the_same_after_the_index_is_rebuilt(tmp_path: Path) -> None:
    """The marker is read from the entry files: a rebuilt index knows which entries are simulated, per agent too."""
    with Journal(tmp_path / "j") as journal:
        journal.append({"kind": "note", "agent": "a", "theme": "t", "voice": "v", "meta": {"simulated": True}})
        journal.append({"kind": "note", "agent": "b", "theme": "t", "voice": "v", "meta": {"simulated": "yes"}})  # only true marks it
    shutil.rmtree(tmp_path / "j" / "index")
    with Journal(tmp_path / "j") as journal:
        answers = [journal.has_entries(simulated=s, agent=a) for s in (True, False) for a in (None, "a", "b", "c")]
    assert answers == [True, True, False, False, True, False, True, False]


def _shared(tmp_path: Path, *agents: str) -> Path:
    """A configuration whose agents all keep one journal, ./journal."""
    return write_config(tmp_path, "".join(agents))


def test_agents_of_both_sorts_may_share_a_journal(tmp_path: Path) -> None:
    """The check is per agent: a simulated and a real agent write side by side in one journal, each recalling only its own past."""
    path = _shared(tmp_path, SIMULATED, _real_agent(tmp_path))
    assert ghostrunner("simulate", "--agent", "motoko", "--days", "1", "--start", "2026-08-03", "--config", str(path), cwd=tmp_path).returncode == 0
    done = ghostrunner("run", "evening", "--agent", "batou", "--at", "2026-08-03T21:00", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["outcome"] == "appended", done.stderr


def test_a_real_run_into_a_journal_of_simulated_entries_fails_unless_mixing_is_asked_for(tmp_path: Path) -> None:
    """A real agent whose journal holds its simulated past (a demo under its name) fails its run: exit 1, nothing appended, no call."""
    simulated = _shared(tmp_path / "sim", SIMULATED + f"journal_root = {str(tmp_path / 'journal')!r}\n")  # motoko's demo, in that journal
    path = _shared(tmp_path, _real_agent(tmp_path, name="motoko"))
    assert ghostrunner("simulate", "--days", "2", "--start", "2026-08-03", "--config", str(simulated), cwd=tmp_path).returncode == 0
    before = entry_files(tmp_path / "journal")
    args = ("run", "evening", "--agent", "motoko", "--at", "2026-08-05T21:00", "--config", str(path))
    refused = ghostrunner(*args, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    result = json.loads(refused.stdout)
    assert result["outcome"] == "failed" and result["entry_id"] is None
    assert result["error"] == str(MixedJournalError("motoko", tmp_path / "journal", is_simulated=False))
    assert "holds simulated entries" in result["error"] and "mix_simulated = true" in result["error"]
    assert entry_files(tmp_path / "journal") == before and _calls(tmp_path) == []
    mixed = ghostrunner(*args, "--mix-simulated", cwd=tmp_path)
    assert mixed.returncode == 0 and json.loads(mixed.stdout)["outcome"] == "appended", mixed.stderr


@pytest.mark.parametrize("command", ["simulate", "demo"])
def test_a_simulation_into_a_journal_holding_real_entries_is_refused_before_it_writes(tmp_path: Path, command: str) -> None:
    """A note written by hand for motoko makes its past real: simulate and demo exit 4 with one line and leave the journal as it was."""
    path = _shared(tmp_path, SIMULATED)
    with Journal(tmp_path / "journal") as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "rent", "voice": "Paid the rent."})
    before = entry_files(tmp_path / "journal")
    args = [command, "--agent", "motoko", "--days", "7", "--start", "2026-08-03", "--config", str(path)]
    refused = ghostrunner(*args, cwd=tmp_path)
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr == f"ghostrunner: error: {MixedJournalError('motoko', tmp_path / 'journal', is_simulated=True)}\n"
    assert entry_files(tmp_path / "journal") == before
    assert ghostrunner(*args, "--mix-simulated", cwd=tmp_path).returncode == 0


def test_the_configuration_can_allow_mixing_for_one_agent(tmp_path: Path) -> None:
    """agents.NAME.mix_simulated = true lets that agent (under serve, too) write beside the other sort; a non-boolean is a config error."""
    path = _shared(tmp_path, SIMULATED + "mix_simulated = true\n")
    with Journal(tmp_path / "journal") as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "rent", "voice": "Paid the rent."})
    done = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-08-03T21:00", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["outcome"] == "appended", done.stderr
    bad = _shared(tmp_path / "bad", SIMULATED + 'mix_simulated = "yes"\n')
    refused = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(bad), cwd=tmp_path)
    assert refused.returncode == 78 and "agents.motoko.mix_simulated: expected true or false" in refused.stderr


def test_simulate_draws_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """On a terminal's stderr simulate redraws 'simulate: AGENT done/total runs'; piped, its stderr holds no progress at all."""
    import pty
    import select
    import subprocess

    path = _shared(tmp_path, SIMULATED)
    argv = [shutil.which("ghostrunner") or "ghostrunner", "simulate", "--days", "3", "--start", "2026-08-03", "--config", str(path)]
    leader, follower = pty.openpty()
    process = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        assert ready, "simulate wrote nothing to its terminal within 60 s"
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the last process holding the terminal has exited
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert process.wait(60) == 0
    assert process.stdout is not None and json.loads(process.stdout.read())["runs"] == 21
    process.stdout.close()
    assert b"simulate: motoko 21/21 runs (100%)" in drawn and drawn.endswith(b"\n")
    piped = ghostrunner(*argv[1:], cwd=tmp_path)
    assert piped.returncode == 0 and "runs (" not in piped.stderr and "\r" not in piped.stderr


def test_demo_of_another_agent_names_that_agent(tmp_path: Path) -> None:
    """demo --agent batou prints batou's journal and an explore command for batou, never motoko's."""
    path = write_config(tmp_path, SIMULATED.replace("motoko]", "batou]"))
    done = ghostrunner("demo", "--agent", "batou", "--days", "7", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"batou's journal: {tmp_path / 'journal'}"
    assert lines[-1].startswith(f"Explore it: ghostjournal --root {tmp_path / 'journal'} search ") and lines[-1].endswith(" --agent batou")
    assert "motoko's journal" not in done.stdout and "--agent motoko" not in done.stdout


def test_an_empty_week_prints_no_none(tmp_path: Path) -> None:
    """A demo whose last week holds nothing but skipped digests says so, instead of 'novelty: mean None, trend None'."""
    path = write_config(tmp_path, SIMULATED.replace('["pulse-4h", "evening", "digest"]', '["digest"]'))
    done = ghostrunner("demo", "--days", "7", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "None" not in done.stdout
    assert "  novelty: none recorded" in done.stdout and "  themes:  none" in done.stdout
    assert "(1 skipped)" in done.stdout



def test_with_several_agents_a_refused_journal_leaves_every_journal_unwritten(tmp_path: Path) -> None:
    """simulate of two agents, one of whose journals holds its real past, exits 4 before the other agent's journal is even made."""
    path = write_config(tmp_path, SIMULATED + SIMULATED.replace("motoko]", "batou]"), runner='journal_root = "./journals/{agent}"\n')
    text = path.read_text().replace('journal_root = "./journal"\n', "", 1)
    path.write_text(text)
    with Journal(tmp_path / "journals" / "motoko") as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "rent", "voice": "Paid the rent."})
    before = entry_files(tmp_path / "journals" / "motoko")
    refused = ghostrunner("simulate", "--days", "2", "--start", "2026-08-03", "--workers", "2", "--config", str(path), cwd=tmp_path)
    assert refused.returncode == 4 and "agent 'motoko' is simulated" in refused.stderr, refused.stderr
    assert not (tmp_path / "journals" / "batou").exists() and entry_files(tmp_path / "journals" / "motoko") == before
