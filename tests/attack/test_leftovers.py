"""Defects found outside their own class: usage errors, broken log streams, hostile read arguments,
persona labels, long quoted values, helper environments, serve's kill, cleartext keys.

Real processes and pipes where the promise is about them (a reader that quits, a helper that
ignores SIGTERM under a real ``serve``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.cli.cli import cli
from tests._support import SIMPLE_AGENT, entries, ghostrunner, write_config
from tests.attack.hostile import hostile_text

# --- 1. every usage error of ghostrunner is one line, exit 2, naming the option and its range ---------------------------

@pytest.mark.parametrize(("args", "named"), [
    (["status", "--log", "{log}", "--now", "0001-01-01T00:00+05:00"], "--now"),
    (["status", "--log", "{log}", "--now", "9999-12-31T23:59-05:00"], "--now"),
    (["status", "--log", "{log}", "--grace", "99999999d"], "--grace"),
    (["status", "--log", "{log}", "--grace", "1e400"], "--grace"),
    (["systemd", "render", "--out", "{out}", "--randomized-delay", "99999999d"], "--randomized-delay"),
    (["systemd", "render", "--out", "{out}", "--randomized-delay", "soon"], "--randomized-delay"),
    (["run", "evening", "--agent", "motoko", "--at", "0001-01-01T00:00+05:00"], "--at"),
    (["simulate", "--days", "99999999999"], "--days"),
    (["simulate", "--days", "1", "--start", "9999-12-31"], "--start"),
    (["demo", "--start", "0001-01-01"], "--start"),
    (["--bogus"], "--bogus"),
    (["systemd", "render", "--bogus"], "--bogus"),
    (["run"], "ROUTINE"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], named: str) -> None:
    config = write_config(tmp_path, SIMPLE_AGENT)
    (tmp_path / "empty.log").write_text("", encoding="utf-8")
    argv = ["--config", str(config), *(arg.replace("{out}", str(tmp_path / "units")).replace("{log}", str(tmp_path / "empty.log")) for arg in args)]
    result = CliRunner().invoke(cli, argv, input="")
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ghostrunner: error: "), result.stderr
    assert named in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""
    assert not (tmp_path / "units").exists()


def test_range_is_named(tmp_path: Path) -> None:
    config = write_config(tmp_path, SIMPLE_AGENT)
    log = tmp_path / "empty.log"
    log.write_text("", encoding="utf-8")
    now = CliRunner().invoke(cli, ["--config", str(config), "status", "--log", str(log), "--now", "0001-01-01T00:00+05:00"])
    assert "1970-01-01 to 8999-12-31" in now.stderr
    grace = CliRunner().invoke(cli, ["--config", str(config), "status", "--log", str(log), "--grace", "99999999d"])
    assert "at most 100 years" in grace.stderr


def test_bare_command_still_shows_its_help() -> None:
    result = CliRunner().invoke(cli, [], prog_name="ghostrunner")
    assert "Usage: ghostrunner" in result.output and "Commands:" in result.output


# --- 2. a log stream that fails never kills a run ----------------------------------------------------------------------

def _ghostrunner() -> str:
    return shutil.which("ghostrunner") or "ghostrunner"


def test_run_with_stderr_reader_gone_still_finishes(tmp_path: Path) -> None:
    """stderr is a pipe whose reader has quit before the run logs anything: the run appends and prints its result."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to write_end is EPIPE from the start
    try:
        done = subprocess.run([_ghostrunner(), "--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00"],
                              check=False, cwd=tmp_path, stdout=subprocess.PIPE, stderr=write_end, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stdout
    assert '"outcome": "appended"' in done.stdout
    assert [entry.client_key for entry in entries(tmp_path / "journal")] == ["motoko:evening:2026-09-05"]


def test_simulate_piped_into_head_finishes_every_run(tmp_path: Path) -> None:
    """``ghostrunner simulate 2>&1 | head -1`` with info logs: the reader quits after a line; every slot still gets its entry."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    argv = [_ghostrunner(), "--config", str(config), "--log-level", "info", "simulate", "--days", "3", "--start", "2026-09-01"]
    process = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()  # head -1 quits
    assert process.wait(60) in (0, 1) and b"run.started" in first
    # Nothing was lost: simulating the same days again finds every slot done.
    again = subprocess.run([*argv[:3], "simulate", "--days", "3", "--start", "2026-09-01"], check=False, cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert '"outcomes": {"duplicate"' in again.stdout and "appended" not in again.stdout
    assert "Traceback" not in again.stderr


def test_run_piped_into_head_c1_appends(tmp_path: Path) -> None:
    """``ghostrunner run ... 2>&1 | head -c1``: the reader quits after the first byte of the first log line; the run still appends."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    read_end, write_end = os.pipe()
    process = subprocess.Popen([_ghostrunner(), "--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00"],
                               cwd=tmp_path, stdout=write_end, stderr=write_end)
    os.close(write_end)
    try:
        assert os.read(read_end, 1)  # head -c1
    finally:
        os.close(read_end)
    # 0, or 1 if the printed result itself met the closed pipe (click ends that quietly); never a crash by signal.
    assert process.wait(60) in (0, 1)
    assert [entry.client_key for entry in entries(tmp_path / "journal")] == ["motoko:evening:2026-09-05"]


# --- 3. a read's text argument that is no text is a ValueError naming the argument -----------------------------------

@pytest.mark.parametrize(("method", "kwargs", "named"), [
    ("list", {"agent": "\udcff"}, "agent"),
    ("list", {"kind": "note\udcff"}, "kind"),
    ("list", {"since": "\udcff"}, "since"),
    ("list", {"until": "2026-01-01T00:00:00Z\udcff"}, "until"),
    ("search", {"query": "harbour", "agent": "\udcff"}, "agent"),
    ("search", {"query": "harbour", "kind": "\udcff"}, "kind"),
    ("search", {"query": "harbour", "since": "\udcff"}, "since"),
    ("digest", {"agent": "\udcff"}, "agent"),
    ("digest", {"until": "\udcff"}, "until"),
    ("prompt_context", {"query": "harbour", "agent": "\udcff"}, "agent"),
    ("find_by_client_key", {"client_key": "motoko:evening:\udcff"}, "client_key"),
    ("list", {"agent": 7}, "agent"),
])
def test_read_arguments_that_are_no_text(tmp_path: Path, method: str, kwargs: dict[str, object], named: str) -> None:
    from journal import Journal

    with Journal(tmp_path / "j") as journal, pytest.raises(ValueError, match=rf"^{named} must ") as caught:
        getattr(journal, method)(**kwargs)
    assert not isinstance(caught.value, UnicodeError)
    assert str(caught.value).isprintable()


def test_relate_agent_that_is_no_text(tmp_path: Path, make_payload: object) -> None:
    from journal import Journal

    with Journal(tmp_path / "j") as journal:
        entry = journal.append(make_payload())  # type: ignore[operator]
        with pytest.raises(ValueError, match=r"^agent must be UTF-8 text"):
            journal.relate(entry.id, agent="\udcff")


def test_ghostjournal_agent_bytes_not_utf8_is_usage_error(tmp_path: Path) -> None:
    """A command line's --agent that is not UTF-8 (os.fsencode gives Python a lone surrogate): exit 2, one line."""
    root = tmp_path / "j"
    tool = shutil.which("ghostjournal") or "ghostjournal"
    assert subprocess.run([tool, "--root", str(root), "init"], check=False, capture_output=True, timeout=60).returncode == 0
    done = subprocess.run([tool.encode(), b"--root", os.fsencode(root), b"list", b"--agent", b"\xff"], check=False, capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr and b"UnicodeEncodeError" not in done.stderr and b"agent" in done.stderr


# --- 5. quoted values in error messages are cut to a bounded length ---------------------------------------------------

def test_journal_since_error_is_bounded(tmp_path: Path) -> None:
    from journal import Journal

    huge = "2026-" + "9" * 100_000
    with Journal(tmp_path / "j") as journal:
        for call in (lambda: journal.list(since=huge), lambda: journal.search("x", until=huge), lambda: journal.search("x", mode=huge),
                     lambda: journal.list(limit=huge)):  # type: ignore[arg-type]
            with pytest.raises(ValueError) as caught:  # noqa: PT011 - four calls, four messages; only their length is checked
                call()
            assert len(str(caught.value)) < 300, str(caught.value)[:300]


@pytest.mark.parametrize("args", [
    ["status", "--log", "{log}", "--now", "2026-" + "9" * 100_000],
    ["status", "--log", "{log}", "--grace", "9" * 100_000 + "x"],
    ["run", "evening", "--agent", "m" * 100_000],
    ["run", "evening", "--agent", "motoko", "--at", "x" * 100_000],
    ["systemd", "render", "--out", "{out}", "--randomized-delay", "1" * 100_000 + "q"],
    ["systemd", "render", "--out", "{out}", "--user", "u" * 100_000],
])
def test_runner_option_errors_are_bounded(tmp_path: Path, args: list[str]) -> None:
    config = write_config(tmp_path, SIMPLE_AGENT)
    (tmp_path / "empty.log").write_text("", encoding="utf-8")
    argv = ["--config", str(config), *(a.replace("{out}", str(tmp_path / "units")).replace("{log}", str(tmp_path / "empty.log")) for a in args)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output[:500]
    assert len(result.stderr) < 400 and result.stderr.count("\n") == 1, result.stderr[:500]


def test_config_error_is_bounded(tmp_path: Path) -> None:
    from runner.errors import ConfigError
    from runner.settings.config import load_config

    config = write_config(tmp_path, SIMPLE_AGENT, runner=f'timezone = "{"Z" * 100_000}"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert len(str(caught.value)) < len(str(config)) + 400


# --- 4. persona labels follow the entry schema's label rule, checked at load time -----------------------------------

def _persona_with(tmp_path: Path, old: str, new: str) -> Path:
    from tests._support import PERSONA

    text = PERSONA.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "bad_persona.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(("old", "new", "key"), [
    ('theme = "', 'theme = "' + "t" * 201, "interests[0].theme"),
    ('tags = ["', 'tags = ["bell\\u0007', "interests[0].tags[0]"),
    ('tags = ["', 'tags = ["' + "x" * 300, "interests[0].tags[0]"),
    ('focus = ["', 'focus = ["line\\nbreak', "interests[0].focus[0]"),
    ('moods = ["', 'moods = ["' + "m" * 201, "moods[0]"),
])
def test_persona_labels_are_checked_at_load(tmp_path: Path, old: str, new: str, key: str) -> None:
    from runner.errors import ConfigError
    from runner.settings.persona import load_persona

    path = _persona_with(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        load_persona(path)
    assert caught.value.source == str(path) and caught.value.key == key
    assert "at most 200 characters without control characters" in str(caught.value)


def test_persona_duplicate_tags_refused(tmp_path: Path) -> None:
    from runner.errors import ConfigError
    from runner.settings.persona import load_persona

    path = _persona_with(tmp_path, 'tags = ["', 'tags = ["same", "same", "')
    with pytest.raises(ConfigError, match="unique tags"):
        load_persona(path)


def test_every_simulated_run_of_a_loaded_persona_is_valid(tmp_path: Path) -> None:
    """A persona at the limits (200-character labels) loads, and its simulated runs all append."""
    config_dir = tmp_path / "c"
    config = write_config(config_dir, SIMPLE_AGENT)
    text = (config_dir / "motoko.toml").read_text(encoding="utf-8")
    # "focused" follows the 193 characters: a mood of exactly 200.
    (config_dir / "motoko.toml").write_text(text.replace('moods = ["', 'moods = ["' + "m" * 193, 1), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(config), "simulate", "--days", "2", "--start", "2026-09-01"])
    assert result.exit_code == 0, result.output
    assert '"failed"' not in result.stdout


# --- 6. a command helper never gets an agent's API key ----------------------------------------------------------------

def test_command_helper_environment_has_no_api_key(tmp_path: Path) -> None:
    """Two agents: one openai with api_key_env, one command; a real ``ghostrunner run`` of the command agent's helper."""
    from tests._support import script

    seen = tmp_path / "helper_env.txt"
    argv = script(tmp_path, "helper.py", f"""
        import json, os, sys
        request = json.load(sys.stdin)
        with open({str(seen)!r}, "w", encoding="utf-8") as out:
            out.write("\\n".join(sorted(os.environ)))
        print(json.dumps({{"voice": "hello", "theme": "t"}}))
    """)
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "20s" }}

    [agents.batou]
    routines = ["evening"]
    backend = {{ type = "openai", base_url = "http://127.0.0.1:9/v1", api_key_env = "BATOU_SECRET_KEY" }}

    [agents.togusa]
    routines = ["evening"]
    backend = {{ type = "openai", base_url = "https://api.invalid/v1", api_key_env = "TOGUSA_KEY" }}
    """
    config = write_config(tmp_path, body)
    done = ghostrunner("--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00", cwd=tmp_path,
                       env={"BATOU_SECRET_KEY": "sk-batou", "TOGUSA_KEY": "sk-togusa", "UNRELATED_SETTING": "kept"})
    assert done.returncode == 0, done.stdout + done.stderr
    names = set(seen.read_text(encoding="utf-8").split("\n"))
    assert "BATOU_SECRET_KEY" not in names and "TOGUSA_KEY" not in names
    assert {"UNRELATED_SETTING", "PATH", "GHOSTRUNNER_BACKEND_RUN"} <= names


# --- 8. an API key over cleartext http to another host is warned about at load -----------------------------------------

@pytest.mark.parametrize(("url", "warned"), [
    ("http://example.com/v1", True),
    ("http://10.1.2.3:11434/v1", True),
    ("http://127.0.0.1:11434/v1", False),
    ("http://localhost:11434/v1", False),
    ("http://[::1]:11434/v1", False),
    ("https://example.com/v1", False),
])
def test_cleartext_key_to_remote_host_is_warned(tmp_path: Path, url: str, warned: bool) -> None:
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "openai", base_url = "{url}", api_key_env = "SOME_KEY" }}
    """
    config = write_config(tmp_path, body)
    log = tmp_path / "empty.log"
    log.write_text("", encoding="utf-8")
    done = ghostrunner("--config", str(config), "status", "--log", str(log), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "cleartext" in line]
    if warned:
        assert len(warnings) == 1 and "agents.motoko.backend.base_url" in warnings[0] and "SOME_KEY" in warnings[0], done.stderr
        assert "sk-" not in done.stderr
    else:
        assert warnings == [], done.stderr


def test_cleartext_warning_is_a_log_line_under_run(tmp_path: Path) -> None:
    body = """
    [agents.motoko]
    routines = ["digest"]
    backend = { type = "openai", base_url = "http://192.0.2.1:9/v1", api_key_env = "SOME_KEY", timeout = "1s" }
    """
    config = write_config(tmp_path, body)
    # The digest routine calls no backend: nothing is sent anywhere, the warning comes from loading the configuration.
    done = ghostrunner("--config", str(config), "run", "digest", "--agent", "motoko", "--at", "2026-09-07T22:00", cwd=tmp_path,
                       env={"SOME_KEY": "sk-x"})
    lines = [json.loads(line) for line in done.stderr.splitlines() if "cleartext" in line]
    assert len(lines) == 1 and lines[0]["level"] == "warning", done.stderr


# --- 7. serve's kill of a stuck worker also ends the worker's backend helpers -------------------------------------------

def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


def test_serve_kill_of_stuck_worker_ends_its_helper(tmp_path: Path) -> None:
    """A real serve; the helper (own session, ignores SIGTERM, sleeps for good) stops its worker with SIGSTOP,
    so the worker can neither fail its own run nor clean up: serve SIGKILLs it at run_timeout, and must end the helper too.
    Nothing ends by itself here, so run_timeout has room for a loaded machine to start the worker and the helper."""
    import signal

    from tests._support import NIGHTLY, event_named, reap, script, start_serve, wait_for_path

    pid_file = tmp_path / "helper.pid"
    argv = script(tmp_path, "stuck.py", f"""
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.stdin.read()
        with open({str(pid_file) + ".tmp"!r}, "w") as out:
            out.write(str(os.getpid()))
        os.rename({str(pid_file) + ".tmp"!r}, {str(pid_file)!r})
        os.kill(os.getppid(), signal.SIGSTOP)  # the worker is stuck: a SIGTERM cannot act on it
        while True:
            time.sleep(60)
    """)
    body = NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "120s" }}
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "2d"\nrun_timeout = "10s"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    helper = None
    try:
        reader.wait(event_named("run.started"), timeout=180)
        wait_for_path(pid_file, timeout=180)
        helper = int(pid_file.read_text())
        crashed = reader.wait(event_named("scheduler.worker_crashed"), timeout=180)
        assert "run_timeout" in crashed["error"]
        still = _alive(helper)  # judged when serve reports the kill: its cleanup must be done by then
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        reap(process)
        if helper is not None and _alive(helper):
            os.kill(helper, signal.SIGKILL)
    assert not still, f"the helper {helper} outlived its SIGKILLed worker"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.one_of(st.none(), hostile_text()), kind=st.one_of(st.none(), hostile_text()), since=st.one_of(st.none(), hostile_text()))
def test_any_text_as_a_read_filter_is_a_result_or_a_value_error(tmp_path: Path, agent: str | None, kind: str | None, since: str | None) -> None:
    """Every Unicode category (lone surrogates included) in agent=/kind=/since=: a list or a ValueError naming one of them."""
    from journal import Journal

    with Journal(tmp_path / "j") as journal:
        for call in (lambda: journal.list(agent=agent, kind=kind, since=since), lambda: journal.search("x", agent=agent, kind=kind, since=since),
                     lambda: journal.digest(agent=agent, since=since), lambda: journal.prompt_context("x", agent=agent, since=since)):
            try:
                call()
            except UnicodeError as exc:
                raise AssertionError(f"a bare {type(exc).__name__}") from exc
            except ValueError as exc:
                assert str(exc).split(" ", 1)[0] in ("agent", "kind", "since"), str(exc)
