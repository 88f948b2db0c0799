"""Defects found by attacking the merged fixes of issue 9, one regression test each.

Each test drives the real mechanism (a real HTTP server on 127.0.0.1, the
real engine and journal) and asserts the README's promise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from journal import Journal
from runner.backends import build_backend
from runner.run.engine import execute_run
from runner.schedule.notify import Notifier, WatchdogPinger
from runner.settings.config import load_config
from tests._support import NIGHTLY, SIMPLE_AGENT, entries, event_named, ghostrunner, reap, start_serve, write_config
from tests.attack._faults import Mounts, fill
from tests.attack._http import AT, GOOD, KEY, HostileServer, json_logging, openai_config


def _escaped(text: str) -> str:
    """*text* spelt with JSON \\u escapes only: the same string once parsed, other bytes on the wire."""
    return "".join(f"\\u{ord(char):04x}" for char in text)


def _raw(body: str) -> Callable[[HostileServer, BaseHTTPRequestHandler], None]:
    return lambda server, handler: server.respond(handler, body.encode())


def _inner(reply: str) -> str:
    """A chat-completions body whose message content is *reply* (JSON-encoded once)."""
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]})


#: Answers that hold the key only in JSON-escaped form, so the raw bytes never show it.
ESCAPED_KEY_ANSWERS = {
    # the reply's own JSON escapes it: parsed, the voice is the key
    "escaped-in-the-reply": _raw(_inner(f'{{"voice": "my key: {_escaped(KEY)}", "theme": "t"}}')),
    # the envelope escapes it: the content string holds it; the reply is valid
    "escaped-in-the-envelope": _raw(_inner(json.dumps({**GOOD, "voice": "my key: " + KEY})).replace(KEY, _escaped(KEY))),
    # the envelope escapes it and the reply is broken JSON, whose error quotes its start (the key cut at 80 characters)
    "escaped-in-broken-json": _raw(_inner("x" * (79 - len(KEY) + 1) + KEY + " not json").replace(KEY, _escaped(KEY))),
    # an unknown field named by the key, whose name the error quotes
    "escaped-field-name": _raw(_inner('{{"voice": "v", "theme": "t", "{}": 1}}'.format(_escaped("z" * 70 + KEY)))),
}


@pytest.mark.parametrize("mode", list(ESCAPED_KEY_ANSWERS))
def test_a_json_escaped_api_key_in_the_answer_reaches_no_entry_error_or_log(
    servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """README: "an answer containing the key is refused (so no entry holds it)"; JSON escapes must not smuggle it past."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    server = servers(ESCAPED_KEY_ANSWERS[mode])
    path = openai_config(tmp_path, server.url)
    buffer = json_logging()
    config = load_config(path)
    agent = config.agent("motoko")
    with Journal(agent.journal_root) as journal:
        result = execute_run(journal, agent=agent, routine=config.routines["evening"],
                             scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone), backend=build_backend(agent), tz=config.timezone)
    assert result.outcome == "failed" and "contains the API key" in (result.error or "")
    assert KEY[:12] not in json.dumps(result.to_dict()) and KEY[:12] not in buffer.getvalue()
    assert entries(tmp_path / "journal") == []


@pytest.mark.parametrize(("number", "name"), [(40, "SIGRTMIN+6"), (9, "SIGKILL")])
def test_a_helper_killed_by_a_real_time_signal_fails_with_one_line_naming_the_backend(tmp_path: Path, number: int, name: str) -> None:
    """Backend failures read as one line naming the backend; a real-time signal (no Signals member) was a bare ValueError."""
    path = write_config(tmp_path, f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = ["/bin/sh", "-c", "kill -s {number} $$"], timeout = "10s" }}
    """)
    config = load_config(path)
    agent = config.agent("motoko")
    with capture_logs() as logs, Journal(agent.journal_root) as journal:
        result = execute_run(journal, agent=agent, routine=config.routines["evening"],
                             scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone), backend=build_backend(agent), tz=config.timezone)
    assert result.outcome == "failed"
    assert result.error == f"command backend (agent motoko): '/bin/sh' exited with signal {name}: no message on stderr"
    assert not [line for line in logs if line["event"] == "run.error"]  # no traceback: the helper's death is no bug of ours


def _two_agents_config(tmp_path: Path) -> Path:
    """Two agents, each with a journal of its own (./journal-AGENT), for simulate's worker processes."""
    path = write_config(tmp_path, """
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["evening"]
    [agents.batou]
    persona = "motoko.toml"
    routines = ["evening"]
    """)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"./journal-{agent}"'), encoding="utf-8")
    return path


def test_simulate_in_worker_processes_fails_an_unusable_journals_runs_and_still_gives_the_summary(tmp_path: Path) -> None:
    """No traceback, and the other agent's runs stand. With --workers 2, a worker's journal error (not picklable) broke the pool."""
    path = _two_agents_config(tmp_path)
    (tmp_path / "journal-batou").write_text("a file where the journal should be", encoding="utf-8")
    result = ghostrunner("simulate", "--days", "1", "--start", "2026-01-01", "--workers", "2", "--config", str(path), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    summary = {agent["agent"]: agent for agent in json.loads(result.stdout)["agents"]}
    assert summary["motoko"]["outcomes"] == {"appended": 1}
    assert summary["batou"]["outcomes"] == {"failed": 1}
    [failure] = summary["batou"]["failures"]
    assert f"refused {str(tmp_path / 'journal-batou')!r}: not a directory" in failure
    assert (tmp_path / "journal-batou").read_text(encoding="utf-8") == "a file where the journal should be"


def test_simulate_reports_a_killed_worker_process_as_one_line(tmp_path: Path) -> None:
    """A simulate worker killed with SIGKILL (as the OOM killer does) is one error line and exit 1, not BrokenProcessPool's traceback."""
    path = _two_agents_config(tmp_path)
    started = subprocess.Popen([shutil.which("ghostrunner") or "ghostrunner", "simulate", "--days", "3650", "--start", "2000-01-01",
                                "--workers", "2", "--config", str(path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while len(workers) < 2 and started.poll() is None and time.monotonic() < deadline:
            workers = [int(pid) for pid in Path(f"/proc/{started.pid}/task/{started.pid}/children").read_text().split()]
        assert len(workers) == 2, "the simulation never started its two workers"
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = started.communicate(timeout=60)
    finally:
        if started.poll() is None:
            started.kill()
            started.communicate()
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("ghostrunner: error: a simulation worker process died before it finished")
    assert started.returncode == 1


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="mounting a tmpfs needs root (CI runs as root, and never skips)")
@pytest.mark.parametrize("fault", ["full", "readonly"])
def test_render_into_a_refusing_filesystem_is_its_exit_code_and_leaves_the_old_units(tmp_path: Path, mounts: Mounts, fault: str) -> None:
    """Render: units are written whole; a full (or read-only) --out is exit 74 (73), and the set rendered before stays as it was.

    Before, the disk filling after the first units exited 1 and left a mix of new and old units.
    """
    agents = "".join(f'\n[agents.a{n}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening", "digest"]\n' for n in range(4))
    path = write_config(tmp_path, agents)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"/var/lib/ghostrunner/{agent}"'), encoding="utf-8")
    out = mounts.tmpfs(size_kib=256)
    assert ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner").returncode == 0
    before = {unit.name: unit.read_bytes() for unit in out.iterdir()}
    path.write_text(path.read_text(encoding="utf-8").replace('"evening"', '"evening", "morning"') +
                    '\n[routines.morning]\nkind = "note"\nschedule = "0 7 * * *"\nslot = "day"\nquestion = "q"\nprompt = "p"\nwindow = "1d"\n',
                    encoding="utf-8")
    if fault == "full":
        fill(out, leave_pages=1)  # room for the first new unit, not for all
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(out)], check=True)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner")
    assert result.returncode == {"full": 74, "readonly": 73}[fault], result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("ghostrunner: error: ") and len(result.stderr.splitlines()) == 1
    assert {unit.name: unit.read_bytes() for unit in out.iterdir() if unit.name != "filler"} == before


@pytest.mark.parametrize(("value", "seconds"), [("2026-09-01T00:00Z", "2026-09-01T00:00:00Z"),
                                               ("2026-09-01T00:00+02:00", "2026-09-01T00:00:00+02:00"), ("2026-09-01", "2026-09-01T00:00:00Z")])
def test_a_since_without_seconds_is_accepted_by_the_cli_and_explained_by_the_library(tmp_path: Path, value: str, seconds: str) -> None:
    """The CLI reads '2026-09-01T00:00Z' (and a date, in the local zone) like the time with seconds; the library, which takes
    only ISO strings with seconds and a timezone, says that is what is missing: "must be an ISO 8601 time with a timezone" told nothing."""
    with Journal(tmp_path / "j") as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "v", "ts": "2026-09-01T00:00:00Z"})
        with pytest.raises(ValueError, match="with seconds and a timezone such as '2026-09-05T16:00:00Z'") as refused:
            journal.list(since=value)
        assert json.dumps(value) in str(refused.value)
    command = [shutil.which("ghostjournal") or "ghostjournal", "--root", str(tmp_path / "j"), "list", "--since"]
    env = {**os.environ, "TZ": "UTC"}
    short, full = (subprocess.run([*command, text], check=False, capture_output=True, text=True, timeout=60, env=env) for text in (value, seconds))
    assert (short.returncode, short.stderr) == (full.returncode, full.stderr) == (0, "")
    assert short.stdout == full.stdout


@pytest.mark.parametrize("key", ["persona", "lock_file"])
def test_a_path_too_long_for_the_filesystem_is_a_configuration_error(tmp_path: Path, key: str) -> None:
    """Every config error names the file and key, exit 78, no traceback: a 300-byte file name (ENAMETOOLONG) was a bare OSError."""
    long_name = "x" * 300  # NAME_MAX is 255 on Linux filesystems
    path = write_config(tmp_path, SIMPLE_AGENT, runner=f'lock_file = "./{long_name}"\n' if key == "lock_file" else "")
    if key == "persona":
        path.write_text(path.read_text(encoding="utf-8").replace('persona = "motoko.toml"', f'persona = "{long_name}"'), encoding="utf-8")
    result = ghostrunner("serve", "--config", str(path), cwd=tmp_path, timeout=30)
    assert result.returncode == 78 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ghostrunner: error: {path}: {'agents.motoko.persona' if key == 'persona' else 'runner.lock_file'}: expected ")


def test_serve_logs_one_run_finished_for_a_worker_killed_by_a_real_time_signal(tmp_path: Path) -> None:
    """Every run ends with exactly one run.finished: a worker killed by SIGRTMIN+6 made the job raise ValueError instead."""
    killer = tmp_path / "killer.py"
    killer.write_text("import os, sys\nsys.stdin.read()\nos.kill(os.getppid(), 40)\n", encoding="utf-8")  # 40 is SIGRTMIN+6 on Linux
    path = write_config(tmp_path, NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps([sys.executable, str(killer)])} }}
    """, runner='catchup_grace = "2d"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    try:
        finished = reader.wait(event_named("run.finished", agent="motoko"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        events = reader.drain()
    finally:
        reap(process)
    assert finished["outcome"] == "failed" and finished["error"] == "the worker was killed by signal SIGRTMIN+6 before reporting a result"
    assert not [event for event in events if "raised an exception" in str(event.get("event"))]


def test_render_into_an_out_path_too_long_for_the_filesystem_is_one_line(tmp_path: Path) -> None:
    """CLIs: one clear error line. An --out whose name is longer than NAME_MAX raised OSError while the first error was explained."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"/var/lib/ghostrunner/motoko"'), encoding="utf-8")
    out = tmp_path / ("u" * 300)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"ghostrunner: error: cannot write the units into {str(out)!r}: File name too long"


@pytest.mark.parametrize(("usec", "seconds"), [("\u00b2", None), ("\u0663", None), ("9" * 30, 86400.0), ("60000000", 60.0)])
def test_a_hostile_watchdog_usec_never_crashes_serve_or_its_watchdog(usec: str, seconds: float | None) -> None:
    """WATCHDOG_USEC='²' passed str.isdigit() and then failed int(): serve died with a traceback; a huge value
    killed the watchdog thread with OverflowError. Both are now read as no (or a day's) watchdog."""
    notifier = Notifier.from_environ({"WATCHDOG_USEC": usec})
    assert notifier.watchdog_seconds == seconds
    if seconds is not None:
        sent: list[str] = []
        pinger = WatchdogPinger(sent.append, seconds / 2)
        pinger.start()
        assert pinger._thread.is_alive()  # a wait of half a day is one the platform accepts
        pinger.stop()
        assert sent == ["WATCHDOG=1"]


@pytest.mark.parametrize("how", ["option", "blank-option", "blank-env"])
def test_an_empty_root_is_a_usage_error_not_the_current_directory(tmp_path: Path, how: str) -> None:
    """Like `--at ""`, `--root ""` silently meant something: Path("") is ".", so init created a journal in the working directory."""
    args, env = {"option": (["--root", ""], {}), "blank-option": (["--root", "  "], {}), "blank-env": ([], {"GHOSTJOURNAL_ROOT": " "})}[how]
    result = subprocess.run([shutil.which("ghostjournal") or "ghostjournal", *args, "init"], check=False, cwd=tmp_path, capture_output=True, text=True,
                            timeout=60, env={**os.environ, **env})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "expected a journal directory, got" in result.stderr.strip().splitlines()[-1]
    assert list(tmp_path.iterdir()) == []  # nothing created where the command ran


def test_an_empty_config_variable_is_a_usage_error_not_the_embedded_defaults(tmp_path: Path) -> None:
    """GHOSTRUNNER_CONFIG="" (a script's variable that came out empty) must not run the embedded agent into ./ghostjournal-data."""
    env = {**os.environ, "GHOSTRUNNER_CONFIG": ""}
    result = subprocess.run([shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00"],
                            check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("ghostrunner: error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    assert "GHOSTRUNNER_CONFIG" in result.stderr and list(tmp_path.iterdir()) == []


def test_no_journal_at_a_root_with_a_line_break_is_still_one_line(tmp_path: Path) -> None:
    """The "create one with ..." hint quoted the root raw: a line break in it split the one error line in two."""
    result = subprocess.run([shutil.which("ghostjournal") or "ghostjournal", "--root", "a\nExecStart=evil", "list"],
                            check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 3 and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
