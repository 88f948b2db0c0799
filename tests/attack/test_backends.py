"""Backends under attack: they cannot hang a run, leak a key, or impersonate a reply.

Every server here is a real HTTP server on 127.0.0.1 in a thread, every
helper a real program; runs go through the real engine (and `ghostrunner run`
where the exit code and the logs are the promise). A run that must be cut by
a timeout waits on something that never ends by itself (a server trickling
until the test ends, a helper sleeping for good), so its ending at all, with
the message naming the timeout that cut it, is the proof: no time is measured,
and each timeout has room for a loaded machine to start the processes it bounds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from journal import Journal
from runner.backends import REPLY_FIELDS, build_backend, parse_reply_text
from runner.backends.base import MAX_REPLY_BYTES, MAX_REPLY_DEPTH
from runner.backends.command import reply_from_output
from runner.backends.openai_chat import reply_from_completion
from runner.errors import BackendError
from runner.run.engine import RunResult, execute_run
from runner.settings.config import load_config
from tests._support import NIGHTLY, entries, event_named, ghostrunner, reap, script, start_serve, write_config
from tests.attack._http import AT, GOOD, KEY, Answer, HostileServer, envelope, json_logging, openai_config

#: How long a test waits for a run that only a timeout can end; a run still going then has escaped every timeout.
ENDS_WITHIN = 180.0
#: A timeout that cuts a process the run starts (a helper, `ghostrunner run`, a worker): room for a loaded
#: machine to start Python, and the helper to record its pids, before the cut.
CUT_AFTER = 10


def _command_config(tmp_path: Path, argv: list[str], *, timeout: str = "1s", runner: str = "") -> Path:
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "{timeout}", attempts = 1 }}
    """
    return write_config(tmp_path, body, runner=runner)


def _run(path: Path, *, run_timeout: float | None = None) -> tuple[RunResult, float, list[dict[str, Any]]]:
    """One in-process run of motoko's evening slot; its result, how long it took, and its log events."""
    config = load_config(path)
    agent = config.agent("motoko")
    with Journal(agent.journal_root) as journal, capture_logs() as logs:
        began = time.monotonic()
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone),
                             backend=build_backend(agent), tz=config.timezone, run_timeout=run_timeout)
        return result, time.monotonic() - began, logs


def _run_cut(path: Path, end_hostile: Callable[[], None]) -> tuple[RunResult, list[dict[str, Any]]]:
    """:func:`_run`, which only a timeout can end, waited for ENDS_WITHIN; one still going fails, after *end_hostile* lets it end."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_run(path))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread, which raises it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(ENDS_WITHIN)
    if thread.is_alive():
        end_hostile()
        thread.join(ENDS_WITHIN)
        pytest.fail(f"the run was still going after {ENDS_WITHIN} s: no timeout cut it")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    result, _elapsed, logs = outcome[0]
    return result, logs


def _assert_one_clear_failure(result: RunResult, logs: list[dict[str, Any]], backend: str) -> None:
    """Failed, with one printable line naming backend and agent; no run.error (the bug path) and nothing appended."""
    assert result.outcome == "failed" and result.entry_id is None
    assert result.error is not None and result.error.startswith(f"{backend} backend (agent motoko): "), result.error
    assert all(char.isprintable() for char in result.error), repr(result.error)
    assert len(result.error) < 1000
    assert [event["event"] for event in logs] == ["run.started", "run.finished"], logs
    assert logs[-1]["error"] == result.error


# -- 1. wall-clock deadlines --------------------------------------------------------------


def _trickle_headers(server: HostileServer, handler: BaseHTTPRequestHandler) -> None:
    """A status line, then one header that grows by one byte every quarter second (urllib's per-read timeout never fires)."""
    server.write(handler, b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not server.stop.wait(0.25):  # until the test ends: only a timeout can end the run
        server.write(handler, b"a")


def _trickle_body(server: HostileServer, handler: BaseHTTPRequestHandler) -> None:
    """Headers promising a body, then the body one byte every quarter second."""
    server.write(handler, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    while not server.stop.wait(0.25):  # a body of 100000 bytes never comes at this pace: only a timeout ends the run
        server.write(handler, b" ")


@pytest.mark.parametrize("answer", [_trickle_headers, _trickle_body], ids=["headers", "body"])
def test_trickling_server_is_cut_off_at_the_backend_timeout(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            answer: Answer) -> None:
    """A server sending a byte every 0.25 s for good cannot hold a run: the 1 s backend timeout cuts it, and says so."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    server = servers(answer)
    result, logs = _run_cut(openai_config(tmp_path, server.url, timeout="1s"), server.stop.set)
    _assert_one_clear_failure(result, logs, "openai")
    assert "no reply within 1 s (the backend's timeout)" in result.error


def test_run_timeout_cuts_off_a_trickling_server_under_ghostrunner_run(servers: Callable[..., HostileServer], tmp_path: Path) -> None:
    """`ghostrunner run` against a server trickling for good (backend timeout 1 h) is cut by run_timeout, logs run.finished, exits 1."""
    server = servers(_trickle_body)
    path = openai_config(tmp_path, server.url, timeout="1h", runner=f'run_timeout = "{CUT_AFTER}s"\n')
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=tmp_path, timeout=ENDS_WITHIN,
                         env={"GHOSTRUNNER_ATTACK_KEY": KEY})
    assert result.returncode == 1, result.stderr
    printed = json.loads(result.stdout)
    assert printed["outcome"] == "failed" and "what run_timeout left for the backend" in printed["error"]
    assert printed["error"].startswith("openai backend (agent motoko): no reply within")
    logged = [json.loads(line) for line in result.stderr.splitlines()]
    assert [event["event"] for event in logged] == ["run.started", "run.finished"]
    assert logged[-1]["error"] == printed["error"] and "Traceback" not in result.stderr
    assert entries(tmp_path / "journal") == []


def test_under_serve_the_worker_ends_its_own_run_before_run_timeout(servers: Callable[..., HostileServer], tmp_path: Path) -> None:
    """Under `serve` a run against a server trickling for good fails by itself at its run_timeout: the worker logs
    run.finished with the reason, and the scheduler never has to kill it."""
    server = servers(_trickle_body)
    body = NIGHTLY + f"""
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["nightly"]
    backend = {{ type = "openai", base_url = "{server.url}", timeout = "1h" }}
    """
    path = write_config(tmp_path, body, runner=f'catchup_grace = "2d"\nrun_timeout = "{CUT_AFTER}s"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    try:
        reader.wait(event_named("run.started"), timeout=ENDS_WITHIN)
        finished = reader.wait(event_named("run.finished"), timeout=ENDS_WITHIN)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        events = reader.drain()
    finally:
        reap(process)
    assert finished["outcome"] == "failed" and "what run_timeout left for the backend" in finished["error"], finished
    assert [e for e in events if e["event"] == "scheduler.worker_crashed"] == []


#: Helpers that leave something behind, for good: nothing they start ends by itself. Each records its
#: pids in pids.json: the helper's and the leftover's. `{pids}` is the file; `{reply}` a valid reply line.
DETACHING = {
    # A grandchild in a new session keeps stdout open; the helper itself hangs.
    "setsid-grandchild": """
        import json, os, sys, time
        sys.stdin.read()
        helper = os.getpid()
        if os.fork() == 0:
            os.setsid()
            open({pids!r}, "w").write(json.dumps([helper, os.getpid()]))
            while True:
                time.sleep(3600)
        while True:
            time.sleep(3600)
    """,
    # A daemon made by double fork holds stdout; the helper prints a good reply and exits at once.
    "double-fork-then-exit": """
        import json, os, sys, time
        sys.stdin.read()
        helper = os.getpid()
        child = os.fork()
        if child == 0:
            os.setsid()
            if os.fork() == 0:
                open({pids!r}, "w").write(json.dumps([helper, os.getpid()]))
                while True:
                    time.sleep(3600)
            os._exit(0)
        os.waitpid(child, 0)
        while not os.path.exists({pids!r}):
            time.sleep(0.01)
        print({reply!r}, flush=True)
    """,
    # A grandchild leaves the group (same session) and holds stdout; the helper hangs.
    "own-group-grandchild": """
        import json, os, sys, time
        sys.stdin.read()
        helper = os.getpid()
        if os.fork() == 0:
            os.setpgid(0, 0)
            open({pids!r}, "w").write(json.dumps([helper, os.getpid()]))
            while True:
                time.sleep(3600)
        while True:
            time.sleep(3600)
    """,
    # A grandchild in a new session with an empty environment (no marker variable) holding stdout.
    "setsid-exec-clean-env": """
        import json, os, shutil, sys, time
        sys.stdin.read()
        helper = os.getpid()
        if os.fork() == 0:
            os.setsid()
            open({pids!r}, "w").write(json.dumps([helper, os.getpid()]))
            os.execve(shutil.which("sleep"), ["sleep", "infinity"], {{}})
        while True:
            time.sleep(3600)
    """,
}


def _alive(pid: int) -> bool:
    """Whether *pid* is a live process (a zombie waiting for its reaper is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


def _members(session: int) -> list[int]:
    """Live processes whose process group or session is *session*."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            state, _ppid, pgrp, sid = stat[stat.rindex(b")") + 2 :].split()[:4]
            if state not in (b"Z", b"X") and session in (int(pgrp), int(sid)):
                found.append(int(name))
    return found


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a test recorded; any still alive at the end is killed, so a failing test leaks nothing either."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _detaching_helper(tmp_path: Path, kind: str) -> tuple[list[str], Path]:
    pids = tmp_path / "pids.json"
    code = DETACHING[kind].format(pids=str(pids), reply=json.dumps(GOOD))
    return script(tmp_path, "detaching.py", code), pids


@pytest.mark.parametrize("kind", list(DETACHING))
def test_a_helper_that_detaches_cannot_hold_the_run_or_outlive_it(tmp_path: Path, kind: str, leftovers: list[int]) -> None:
    """A command helper whose grandchild escapes (setsid, double fork, own group, clean env) ends the run by its timeout; nothing it started lives on."""
    argv, pids_file = _detaching_helper(tmp_path, kind)

    def end_both() -> None:
        for pid in json.loads(pids_file.read_text()) if pids_file.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    result, logs = _run_cut(_command_config(tmp_path, argv, timeout=f"{CUT_AFTER}s"), end_both)
    helper, grandchild = json.loads(pids_file.read_text())
    leftovers.extend([helper, grandchild])
    if kind == "double-fork-then-exit":
        assert result.outcome == "appended", result.error  # the helper's reply was complete when it exited
    else:
        _assert_one_clear_failure(result, logs, "command")
        assert f"no reply within {CUT_AFTER} s" in result.error
    assert not _alive(helper) and not _alive(grandchild)
    assert _members(helper) == []


def test_run_timeout_bounds_a_detaching_helper_under_ghostrunner_run(tmp_path: Path, leftovers: list[int]) -> None:
    """`ghostrunner run` whose helper (timeout 1 h) and detached grandchild sleep for good is cut by run_timeout, which kills them both."""
    argv, pids_file = _detaching_helper(tmp_path, "setsid-grandchild")
    path = _command_config(tmp_path, argv, timeout="1h", runner=f'run_timeout = "{CUT_AFTER}s"\n')
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=tmp_path, timeout=ENDS_WITHIN)
    helper, grandchild = json.loads(pids_file.read_text())
    leftovers.extend([helper, grandchild])
    printed = json.loads(result.stdout)
    assert result.returncode == 1 and printed["outcome"] == "failed", result.stderr
    assert "what run_timeout left for the backend" in printed["error"], printed["error"]
    assert "Traceback" not in result.stderr
    assert not _alive(helper) and not _alive(grandchild) and _members(helper) == []


# -- 1. the reply cap -----------------------------------------------------------------------

_FLOOD = 12 * MAX_REPLY_BYTES


def _flood(server: HostileServer, handler: BaseHTTPRequestHandler) -> None:
    """A 200 answer whose body (no Content-Length) streams far past the cap."""
    server.write(handler, b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"choices": [{"message": {"content": "')
    chunk = b"a" * 65536
    while server.sent < _FLOOD and not server.stop.is_set():
        server.write(handler, chunk)


def test_an_oversized_http_reply_is_refused_after_the_cap(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body streaming 96 MiB is cut off after MAX_REPLY_BYTES: the run fails clearly and memory stays near the cap."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    server = servers(_flood)
    tracemalloc.start()
    try:
        result, _elapsed, logs = _run(openai_config(tmp_path, server.url, timeout="20s"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_one_clear_failure(result, logs, "openai")
    assert f"larger than the limit of {MAX_REPLY_BYTES} bytes" in result.error
    assert peak < 3 * MAX_REPLY_BYTES, f"reading the reply peaked at {peak} bytes"
    assert server.answered.wait(30), "the server was still streaming after the run ended"
    assert server.sent < _FLOOD / 2


def test_an_oversized_helper_output_is_refused_after_the_cap(tmp_path: Path) -> None:
    """A helper printing 96 MiB on stdout is killed once past MAX_REPLY_BYTES; memory stays near the cap."""
    argv = script(tmp_path, "flood.py", f"""
        import os, sys
        sys.stdin.read()
        chunk = b"a" * 65536
        for _ in range({_FLOOD // 65536}):
            os.write(1, chunk)
    """)
    tracemalloc.start()
    try:
        result, _elapsed, logs = _run(_command_config(tmp_path, argv, timeout="20s"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_one_clear_failure(result, logs, "command")
    assert f"printed more than the limit of {MAX_REPLY_BYTES} bytes" in result.error
    assert peak < 3 * MAX_REPLY_BYTES, f"reading the output peaked at {peak} bytes"


# -- 2. redirects ---------------------------------------------------------------------------


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("where", ["other-origin", "same-origin"])
def test_no_redirect_is_followed_and_the_key_goes_nowhere_else(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               code: int, where: str) -> None:
    """A 3xx answer fails the run naming its target; the other origin (another port) gets no request, so never the key."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    impostor = servers(lambda server, handler: server.respond(handler, envelope(json.dumps({**GOOD, "voice": "the impostor's words"}))))
    first = servers()
    target = f"{impostor.url}/chat/completions" if where == "other-origin" else f"{first.url}/elsewhere"
    first.answer = lambda server, handler: server.respond(handler, b"", status=code, headers={"Location": target})
    result, _elapsed, logs = _run(openai_config(tmp_path, first.url))
    _assert_one_clear_failure(result, logs, "openai")
    assert f"answered HTTP {code}, a redirect to " in result.error and "redirects are not followed" in result.error
    assert impostor.requests == []
    assert len(first.requests) == 1 and first.requests[0]["path"] == "/v1/chat/completions"
    assert entries(tmp_path / "journal") == []


# -- 3. one clear line for every bad reply -----------------------------------------------------


def _raw(data: bytes) -> Answer:
    return lambda server, handler: server.write(handler, data)


def _body(body: bytes, status: int = 200) -> Answer:
    return lambda server, handler: server.respond(handler, body, status=status)


BAD_ANSWERS: dict[str, tuple[Answer, str]] = {
    "choices-missing": (_body(b'{"id": "x"}'), 'no "choices" list'),
    "choices-empty": (_body(b'{"choices": []}'), 'no "choices" list'),
    "choices-an-object": (_body(b'{"choices": {"0": 1}}'), 'no "choices" list'),
    "message-missing": (_body(b'{"choices": [{"text": "hi"}]}'), 'no "message" object'),
    "choice-a-string": (_body(b'{"choices": ["hi"]}'), 'no "message" object'),
    "content-null": (_body(envelope(None)), "content is null"),
    "content-a-number": (_body(envelope(7)), "content is a number"),
    "content-an-object": (_body(envelope({"voice": "v"})), "content is an object"),
    "content-a-list-of-images": (_body(envelope([{"type": "image_url", "image_url": "x"}])), "a list without text parts"),
    "refusal": (_body(json.dumps({"choices": [{"message": {"content": None, "refusal": "I can't\nhelp"}}]}).encode()), "the model refused: I can't help"),
    "envelope-nested-100000-deep": (_body(b"[" * 100_000 + b"]" * 100_000), f"at most {MAX_REPLY_DEPTH} are allowed"),
    "content-nested-5000-deep": (_body(envelope('{"voice": ' + "[" * 5000 + "]" * 5000 + "}")), f"at most {MAX_REPLY_DEPTH} are allowed"),
    "non-utf8-body": (_body(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'), "not UTF-8 text"),
    "utf16-body": (_body(envelope(json.dumps(GOOD)).decode().encode("utf-16")), "not UTF-8 text"),
    "nan-in-reply": (_body(envelope('{"voice": "v", "theme": "t", "signals": {"novelty": NaN}}')), "NaN is not a JSON number"),
    "huge-number": (_body(envelope('{"voice": "v", "theme": "t", "signals": {"novelty": 1e999}}')), "too large for a float"),
    "wrong-field-type": (_body(envelope('{"voice": "v", "theme": "t", "tags": {"a": 1}}')), "the reply is not a valid entry"),
    "closed-mid-reply": (_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + envelope("x")[:30]), "in the middle of its answer"),
    "closed-mid-chunk": (_raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n" + b"a" * 30), "in the middle of its answer"),
    "closed-without-answer": (_raw(b""), "closed the connection without answering"),
    "not-http": (_raw(b"SSH-2.0-OpenSSH_9.6\r\n"), "did not answer with valid HTTP"),
    "http-500-with-a-huge-body": (_body(b"boom\n" + b"x" * (4 * MAX_REPLY_BYTES), status=500), "HTTP 500 from http://127.0.0.1:"),
    "http-404-with-escapes": (_body(b"\x1b[31mno such model\r\nFAKE LOG LINE\x00", status=404), "HTTP 404 from http://127.0.0.1:"),
}


@pytest.mark.parametrize("mode", list(BAD_ANSWERS))
def test_every_bad_answer_fails_the_run_with_one_clear_line(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           mode: str) -> None:
    """Wrong JSON shapes, deep nesting, non-UTF-8, a connection closed mid-reply, an HTTP error with a huge body: one line naming the backend."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    answer, message = BAD_ANSWERS[mode]
    server = servers(answer)
    result, _elapsed, logs = _run(openai_config(tmp_path, server.url, timeout="10s"))
    _assert_one_clear_failure(result, logs, "openai")
    assert message in result.error
    assert entries(tmp_path / "journal") == []


def test_content_given_as_text_parts_is_accepted(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Content sent as a list of text parts (as some servers do) is joined and read as the reply."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    text = json.dumps(GOOD)
    server = servers(_body(envelope([{"type": "text", "text": text[:10]}, {"type": "text", "text": text[10:]}])))
    result, _elapsed, _logs = _run(openai_config(tmp_path, server.url))
    assert result.outcome == "appended", result.error


BAD_HELPERS: dict[str, tuple[str, str]] = {
    "nonzero-with-a-huge-stderr": ("""
        import os, sys
        sys.stdin.read()
        os.write(2, b"x" * (4 * 1024 * 1024) + b"\\n" + b"y" * (2 * 1024 * 1024) + b"\\n")
        sys.exit(4)
    """, "exited with status 4: yyyy"),
    "nonzero-with-escapes-on-stderr": ("""
        import os, sys
        sys.stdin.read()
        os.write(2, b"\\x1b[2Jgone\\r{\\"event\\": \\"run.finished\\"}\\x00\\xff\\n")
        sys.exit(2)
    """, "exited with status 2: "),
    "killed-by-a-signal": ("""
        import os, signal, sys
        sys.stdin.read()
        os.kill(os.getpid(), signal.SIGSEGV)
    """, "exited with signal SIGSEGV"),
    "binary-on-stdout": ("""
        import os, sys
        sys.stdin.read()
        os.write(1, bytes(range(256)))
    """, "printed bytes that are not UTF-8"),
    "deep-json-on-stdout": ("""
        import sys
        sys.stdin.read()
        print("[" * 200000 + "]" * 200000)
    """, f"at most {MAX_REPLY_DEPTH} are allowed"),
    "never-reads-stdin": ("""
        import json
        print(json.dumps({"voice": "v", "theme": "t", "tags": 5}))
    """, "the reply is not a valid entry"),
}


@pytest.mark.parametrize("mode", list(BAD_HELPERS))
def test_every_bad_helper_fails_the_run_with_one_clear_line(tmp_path: Path, mode: str) -> None:
    """A huge or hostile stderr, a signal, binary or deep output: one printable line naming the backend and agent."""
    code, message = BAD_HELPERS[mode]
    result, _elapsed, logs = _run(_command_config(tmp_path, script(tmp_path, "bad.py", code), timeout="10s"))
    _assert_one_clear_failure(result, logs, "command")
    assert message in result.error


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


def test_ghostrunner_run_logs_a_bad_reply_and_exits_1_without_a_traceback(servers: Callable[..., HostileServer], tmp_path: Path) -> None:
    """Where a BackendError ends up: `ghostrunner run` prints the failed outcome, logs run.finished with it, and exits 1."""
    server = servers(_body(b"[" * 100_000 + b"]" * 100_000))
    path = openai_config(tmp_path, server.url)
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=tmp_path, env={"GHOSTRUNNER_ATTACK_KEY": KEY})
    assert result.returncode == 1, result.stderr
    printed = json.loads(result.stdout)
    assert printed["outcome"] == "failed" and printed["error"].startswith("openai backend (agent motoko): the server's answer is nested")
    logged = [json.loads(line) for line in result.stderr.splitlines()]
    assert [event["event"] for event in logged] == ["run.started", "run.finished"]
    assert logged[-1]["error"] == printed["error"] and logged[-1]["level"] == "error"


def test_a_voice_that_looks_like_deep_json_is_one_record_and_the_command_gets_the_block_as_before(tmp_path: Path) -> None:
    """Nothing parses the block back: an entry whose voice spells a deep forged record stays one record, and stdin carries prompt_context's text."""
    saved = tmp_path / "request.json"
    argv = script(tmp_path, "echo.py", f"""
        import json, sys
        request = sys.stdin.read()
        open({str(saved)!r}, "w", encoding="utf-8").write(request)
        print(json.dumps({{"voice": "v", "theme": "t"}}))
    """)
    config = load_config(_command_config(tmp_path, argv, timeout="10s"))
    agent, routine = config.agent("motoko"), config.routines["evening"]
    deep = '{"id": "forged", "theme": "t", "x": ' + "[" * 20_000 + "]" * 20_000 + "}"
    scheduled = datetime.fromisoformat(AT).replace(tzinfo=config.timezone)
    with Journal(agent.journal_root) as journal:
        stored = journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": deep, "ts": "2026-09-05T10:00:00Z"})
        result = execute_run(journal, agent=agent, routine=routine, scheduled=scheduled, backend=build_backend(agent), tz=config.timezone)
        assert result.outcome == "appended", result.error
        options = {"k": routine.context_k, "agent": "motoko", "since": scheduled - routine.window, "until": scheduled, "max_chars": routine.context_chars}
        context = journal.context(routine.question, **options)
        assert json.loads(saved.read_text(encoding="utf-8"))["context"] == context.text == journal.prompt_context(routine.question, **options)
    assert [(record.id, record.voice[:40]) for record in context.records] == [(stored.id, deep[:40])]
    assert '"id": "forged"' not in context.text  # the forged record stays escaped text inside the voice


# -- 3. hostile bodies through the parsers (Hypothesis) ------------------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30),
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)


_json_values = st.recursive(_scalars, _containers, max_leaves=20)
_reply_like = st.fixed_dictionaries(
    {"voice": st.one_of(st.text(max_size=40), _scalars), "theme": st.one_of(st.text(max_size=40), _scalars)},
    optional={"tags": _json_values, "mood": _json_values, "signals": _json_values, "anchors": _json_values, "meta": _json_values, "x": _json_values},
)
_depths = st.integers(min_value=0, max_value=3000)
_texts = st.one_of(
    _json_values.map(lambda value: json.dumps(value, allow_nan=True)),
    _reply_like.map(lambda value: json.dumps(value, allow_nan=True)),
    _reply_like.map(lambda value: "```json\n" + json.dumps(value) + "\n```"),
    _depths.map(lambda depth: "[" * depth + "]" * depth),
    _depths.map(lambda depth: '{"voice": ' * depth + '"v"' + "}" * depth),
    _depths.map(lambda depth: "[" * depth),
    st.text(max_size=200),
)
_bodies = st.one_of(
    st.binary(max_size=300),
    _texts.map(str.encode),
    _texts.map(envelope),
    _json_values.map(envelope),
    _json_values.map(lambda value: json.dumps({"choices": value}, allow_nan=True).encode()),
    _depths.map(lambda depth: b'{"choices": ' * depth + b"1" + b"}" * depth),
    _texts.map(lambda text: text.encode("utf-16")),
)


def _assert_reply_or_named_error(parse: Callable[[], dict[str, Any]], backend: str) -> None:
    try:
        reply = parse()
    except BackendError as exc:
        assert exc.backend == backend
        assert str(exc).startswith(f"{backend} backend: ")
        assert all(char.isprintable() for char in str(exc)), repr(str(exc))
    else:
        assert set(reply) <= set(REPLY_FIELDS)
        assert all(isinstance(reply[key], str) and reply[key].strip() for key in ("voice", "theme"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_bodies)
def test_hostile_http_bodies_give_a_reply_or_a_named_backend_error(body: bytes) -> None:
    """Any body a chat-completions server may send parses to a valid reply or raises BackendError naming openai, nothing else."""
    _assert_reply_or_named_error(lambda: reply_from_completion(body), "openai")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=st.one_of(st.binary(max_size=300), _texts.map(str.encode)))
def test_hostile_helper_output_gives_a_reply_or_a_named_backend_error(output: bytes) -> None:
    """Any stdout a command helper may print parses to a valid reply or raises BackendError naming command."""
    _assert_reply_or_named_error(lambda: reply_from_output(output, "agent.py"), "command")
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError:
        return
    _assert_reply_or_named_error(lambda: parse_reply_text(text, "command"), "command")


# -- 4. the key never leaks ----------------------------------------------------------------


def _echo_headers(status: int) -> Answer:
    """An answer that quotes the request's headers back, as debugging proxies and some error pages do."""

    def answer(server: HostileServer, handler: BaseHTTPRequestHandler) -> None:
        quoted = "x" * 60 + " headers were: " + json.dumps(dict(handler.headers))
        body = quoted.encode() if status >= 400 else envelope(json.dumps({**GOOD, "voice": quoted}))
        server.respond(handler, body, status=status)

    return answer


LEAKY_ANSWERS: dict[str, tuple[Answer, str]] = {
    "401-quoting-the-headers": (_echo_headers(401), "HTTP 401 from"),
    "reply-quoting-the-headers": (_echo_headers(200), "contains the API key"),
    "bad-json-quoting-the-key": (_body(envelope("not json: Bearer " + KEY)), "contains the API key"),
    "redirect-carrying-the-key": (lambda server, handler: server.respond(handler, b"", status=302, headers={"Location": f"http://127.0.0.1:1/?k={KEY}"}),
                                  "a redirect to"),
}


@pytest.mark.parametrize("mode", list(LEAKY_ANSWERS))
def test_the_api_key_is_in_no_error_log_line_or_entry(servers: Callable[..., HostileServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A server quoting the key (in an error page, a reply, broken JSON, a redirect) never gets it into the error, the logs or the journal."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    answer, message = LEAKY_ANSWERS[mode]
    server = servers(answer)
    path = openai_config(tmp_path, server.url)
    buffer = json_logging()
    config = load_config(path)
    agent = config.agent("motoko")
    with Journal(agent.journal_root) as journal:
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone),
                             backend=build_backend(agent), tz=config.timezone)
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"  # the key did travel, to base_url
    assert result.outcome == "failed" and message in (result.error or "")
    assert KEY not in json.dumps(result.to_dict()) and KEY not in buffer.getvalue()
    assert KEY[:12] not in buffer.getvalue()  # not even cut in half by a truncation
    assert entries(tmp_path / "journal") == []


def _escaped(text: str) -> str:
    """*text* spelt with JSON \\u escapes only: the same string once parsed, other bytes on the wire."""
    return "".join(f"\\u{ord(char):04x}" for char in text)


def _text_answer(body: str) -> Callable[[HostileServer, BaseHTTPRequestHandler], None]:
    return lambda server, handler: server.respond(handler, body.encode())


def _inner(reply: str) -> str:
    """A chat-completions body whose message content is *reply* (JSON-encoded once)."""
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]})


#: Answers that hold the key only in JSON-escaped form, so the raw bytes never show it.
ESCAPED_KEY_ANSWERS = {
    # the reply's own JSON escapes it: parsed, the voice is the key
    "escaped-in-the-reply": _text_answer(_inner(f'{{"voice": "my key: {_escaped(KEY)}", "theme": "t"}}')),
    # the envelope escapes it: the content string holds it; the reply is valid
    "escaped-in-the-envelope": _text_answer(_inner(json.dumps({**GOOD, "voice": "my key: " + KEY})).replace(KEY, _escaped(KEY))),
    # the envelope escapes it and the reply is broken JSON, whose error quotes its start (the key cut at 80 characters)
    "escaped-in-broken-json": _text_answer(_inner("x" * (79 - len(KEY) + 1) + KEY + " not json").replace(KEY, _escaped(KEY))),
    # an unknown field named by the key, whose name the error quotes
    "escaped-field-name": _text_answer(_inner('{{"voice": "v", "theme": "t", "{}": 1}}'.format(_escaped("z" * 70 + KEY)))),
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


@pytest.mark.parametrize("bad_key", [KEY + "\nX-Injected: 1", "Bearer " + KEY, KEY + "\u20ac"], ids=["newline", "space", "non-ascii"])
def test_a_malformed_key_fails_clearly_without_quoting_it(servers: Callable[..., HostileServer], tmp_path: Path, bad_key: str) -> None:
    """A key HTTP cannot carry fails the run for good (exit 78) with one line naming the variable; neither the output nor the logs quote it."""
    server = servers()
    path = openai_config(tmp_path, server.url)
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=tmp_path, env={"GHOSTRUNNER_ATTACK_KEY": bad_key})
    assert result.returncode == 78, result.stderr
    printed = json.loads(result.stdout)
    assert printed["error"].startswith("openai backend (agent motoko): the API key in 'GHOSTRUNNER_ATTACK_KEY' holds")
    assert KEY not in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert server.requests == []


def test_a_base_url_with_credentials_is_a_config_error_that_does_not_quote_them(servers: Callable[..., HostileServer], tmp_path: Path) -> None:
    """user:password@ in base_url is refused as configuration (exit 78) without echoing the secret, and nothing is sent."""
    server = servers()
    path = openai_config(tmp_path, f"http://motoko:{KEY}@127.0.0.1:{server.port}/v1", key_env=False)
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=tmp_path)
    assert result.returncode == 78, (result.stdout, result.stderr)
    assert "base_url" in result.stderr and "api_key_env" in result.stderr
    assert KEY not in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert server.requests == []


class _BuggyBackend:
    """A backend with a bug, whose frame holds the key in a local when it raises."""

    name = "buggy"

    def reflect(self, request: Any) -> Any:
        headers = {"Authorization": f"Bearer {os.environ['GHOSTRUNNER_ATTACK_KEY']}"}
        raise TypeError(f"a bug with {len(headers)} header")


@pytest.mark.parametrize("json_lines", [True, False], ids=["json", "console"])
def test_a_traceback_in_the_logs_shows_no_local_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_lines: bool) -> None:
    """run.error's traceback (a backend bug), as JSON or on a console, carries no frame locals, so a key held in one is not logged."""
    monkeypatch.setenv("GHOSTRUNNER_ATTACK_KEY", KEY)
    config = load_config(_command_config(tmp_path, ["true"]))
    agent = config.agent("motoko")
    buffer = json_logging(json_lines)
    with Journal(agent.journal_root) as journal:
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone),
                             backend=_BuggyBackend(), tz=config.timezone)
    assert result.outcome == "failed"
    assert "run.error" in buffer.getvalue() and "TypeError: a bug with 1 header" in buffer.getvalue()
    assert KEY not in buffer.getvalue()


class _Replying:
    """A backend that hands the engine whatever a hostile server's JSON parsed to."""

    name = "hostile"

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def reflect(self, request: Any) -> Any:
        return self.reply


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(reply=st.one_of(_reply_like, _json_values, _reply_like.map(lambda r: {**r, "voice": "v\ud800", "theme": "t"})))
def test_hostile_reply_values_fail_the_run_as_the_backend_s_error(tmp_path: Path, reply: Any) -> None:
    """Whatever parsed JSON a backend returns, a run (dry, so nothing is kept) either builds a valid entry or fails naming the backend and agent."""
    config = load_config(_command_config(tmp_path, ["true"]))
    agent = config.agent("motoko")
    with Journal(agent.journal_root) as journal, capture_logs() as logs:
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime.fromisoformat(AT).replace(tzinfo=config.timezone),
                             backend=_Replying(reply), tz=config.timezone, dry_run=True)
    if result.outcome == "failed":
        _assert_one_clear_failure(result, logs, "hostile")
    else:
        assert result.outcome == "skipped" and result.entry is not None
