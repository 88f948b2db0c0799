"""Retries within a run: real `ghostrunner run` processes against a scripted chat server on 127.0.0.1, and the policy itself."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journal import PromptContext
from runner.backends.base import REPLY_SCHEMA, ReflectionRequest
from runner.errors import BackendError, BackendReplyError, BackendTimeoutError, BackendUnavailableError
from runner.run.retries import MAX_RETRY_WAIT, MIN_ATTEMPT_SECONDS, Retrier, RetryPolicy
from tests._chat_server import ChatServer
from tests._support import entries, ghostrunner, openai_agent, script, write_config

AT = "2026-09-05T21:00"
KEY = "motoko:evening:2026-09-05"


def _config(tmp_path: Path, url: str, extra: str = "", timeout: str = "10s") -> Path:
    return write_config(tmp_path, openai_agent(url, timeout=timeout, backend=f"retry_delay = 0.01\n{extra}\n"))


def _run(path: Path) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """One real `ghostrunner run` of motoko's evening slot: exit code, printed result, and its log lines."""
    done = ghostrunner("run", "evening", "--agent", "motoko", "--at", AT, "--config", str(path), cwd=path.parent)
    return done.returncode, json.loads(done.stdout.splitlines()[-1]), [json.loads(line) for line in done.stderr.splitlines()]


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == name]


def test_two_503s_then_a_reply_append_one_entry_after_three_requests_and_a_rerun_asks_nobody(tmp_path: Path) -> None:
    """503, 503, then a valid reply: one run appends one entry after three requests; a second run is a duplicate without a request."""
    with ChatServer([503, 503]) as server:
        path = _config(tmp_path, server.url)
        code, result, logs = _run(path)
        assert (code, result["outcome"], result["attempts"]) == (0, "appended", 3), result
        assert len(server.requests) == 3
        retries = _events(logs, "run.retry")
        assert [line["attempt"] for line in retries] == [2, 3]
        assert all("HTTP 503" in line["error"] and line["level"] == "warning" for line in retries)
        assert 0 < retries[0]["delay"] <= 0.01 and 0 < retries[1]["delay"] <= 0.02  # backoff doubles; jitter keeps it above half
        assert _events(logs, "run.finished")[0]["attempts"] == 3
        again_code, again, _ = _run(path)
        assert (again_code, again["outcome"], again["attempts"], again["entry_id"]) == (0, "duplicate", 0, result["entry_id"])
        assert len(server.requests) == 3
    assert [entry.client_key for entry in entries(tmp_path / "journal")] == [KEY]


def test_429_waits_at_least_its_retry_after(tmp_path: Path) -> None:
    """A 429 with Retry-After: 1 is retried after a wait of at least one second, whatever the backoff says."""
    with ChatServer([(429, "1")]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (0, "appended", 2, 2)
        (retry,) = _events(logs, "run.retry")
        assert retry["delay"] >= 1.0 and "HTTP 429" in retry["error"]


def test_a_retry_after_beyond_the_deadline_ends_the_run_without_waiting(tmp_path: Path) -> None:
    """A 429 asking for an hour, in a run with five minutes, fails at once: no wait past run_timeout, no second request."""
    with ChatServer([(429, "3600")]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (1, "failed", 1, 1)
        assert "HTTP 429" in result["error"] and "permanent" not in result
        assert _events(logs, "run.retry") == []


def test_a_401_is_permanent_one_request_and_exit_78(tmp_path: Path) -> None:
    """A 401 is not retried: one request, outcome failed, marked permanent, exit 78 (so systemd does not restart it)."""
    with ChatServer([401, 401]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], result["permanent"], len(server.requests)) == (78, "failed", 1, True, 1)
        assert result["error"].startswith("openai backend (agent motoko): HTTP 401 from http://127.0.0.1:")
        assert _events(logs, "run.retry") == []
    assert entries(tmp_path / "journal") == []


def test_broken_json_is_retried_once_at_once_with_a_correction(tmp_path: Path) -> None:
    """A reply that is not JSON gets one more request, without waiting, whose last message says what was wrong."""
    with ChatServer(["broken"]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (0, "appended", 2, 2)
        first, second = server.requests
        assert len(first["messages"]) == 2 and second["messages"][:2] == first["messages"]
        correction = second["messages"][2]
        assert correction["role"] == "user" and "could not be used: the reply is not valid JSON" in correction["content"]
        (retry,) = _events(logs, "run.retry")
        assert retry["delay"] == 0 and "not valid JSON" in retry["error"]


def test_a_second_broken_reply_fails_the_run_after_two_requests(tmp_path: Path) -> None:
    """The correction is tried once: two unusable replies fail the run (transient, so not permanent), whatever attempts allows."""
    with ChatServer(["broken", "broken", "broken"]) as server:
        code, result, _ = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (1, "failed", 2, 2)
        assert "not valid JSON" in result["error"] and "permanent" not in result


def test_a_reset_connection_is_retried(tmp_path: Path) -> None:
    """A connection reset without an answer is transient: the next request's reply is appended."""
    with ChatServer(["reset"]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (0, "appended", 2, 2)
        (retry,) = _events(logs, "run.retry")
        assert "127.0.0.1" in retry["error"]


def test_a_timeout_is_retried(tmp_path: Path) -> None:
    """A server that never answers the first request is cut by the backend's timeout and asked again; its next reply is appended.
    The timeout has room for the second reply to come on a loaded machine: the first never comes, however long it waits."""
    with ChatServer(["hang"]) as server:
        code, result, logs = _run(_config(tmp_path, server.url))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (0, "appended", 2, 2)
        (retry,) = _events(logs, "run.retry")
        assert "no reply within 10 s (the backend's timeout)" in retry["error"]


def test_the_attempt_cap_ends_a_run_of_503s(tmp_path: Path) -> None:
    """With attempts = 2, two 503s fail the run after exactly two requests, exit 1 (a timer unit restarts that)."""
    with ChatServer([503, 503, 503]) as server:
        code, result, _ = _run(_config(tmp_path, server.url, "attempts = 2"))
        assert (code, result["outcome"], result["attempts"], len(server.requests)) == (1, "failed", 2, 2)
        assert "HTTP 503" in result["error"]


def test_a_refused_connection_is_transient(tmp_path: Path) -> None:
    """Nothing listening: each of the attempts is refused, and the run fails with the reason, not permanently."""
    with ChatServer() as server:
        url = server.url
    code, result, logs = _run(_config(tmp_path, url, "attempts = 3"))
    assert (code, result["outcome"], result["attempts"]) == (1, "failed", 3)
    assert "cannot reach" in result["error"] and len(_events(logs, "run.retry")) == 2


# -- the policy, with an injected clock ---------------------------------------------------


def _request(deadline: float | None = None) -> ReflectionRequest:
    return ReflectionRequest(agent="a", routine="r", kind="note", slot="s", client_key="a:r:s", scheduled="2026-01-01T00:00:00+00:00",
                             question="q", instructions="i", context=PromptContext(text="", records=(), omitted=0), persona=None, deadline=deadline)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _failing(*errors: BackendError) -> Any:
    queue = list(errors)
    seen: list[ReflectionRequest] = []

    def attempt(request: ReflectionRequest) -> str:
        seen.append(request)
        if queue:
            raise queue.pop(0)
        return "ok"

    attempt.seen = seen  # type: ignore[attr-defined]
    return attempt


def test_waits_double_with_jitter_in_their_upper_half_up_to_the_cap() -> None:
    """The wait after failure n lies in [d*2^(n-2), d*2^(n-1)], and never above MAX_RETRY_WAIT."""
    policy = RetryPolicy(attempts=20, base_delay=1.0)
    assert [policy.wait(n, lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert [policy.wait(n, lambda: 0.999999) for n in (1, 2, 3)] == pytest.approx([1.0, 2.0, 4.0])
    assert policy.wait(12, lambda: 0.999999) == pytest.approx(MAX_RETRY_WAIT)


def test_a_permanent_error_is_raised_at_once() -> None:
    """A plain BackendError (a 401) is one attempt and no wait."""
    clock = _Clock()
    retrier = Retrier(RetryPolicy(), sleep=clock.sleep, clock=lambda: clock.now)
    with pytest.raises(BackendError, match="HTTP 401"):
        retrier.call(_failing(BackendError("openai", "HTTP 401")), _request())
    assert (retrier.attempts, clock.slept) == (1, [])


def test_transient_errors_are_retried_up_to_the_cap_with_the_attempt_number() -> None:
    """Timeouts and 5xx are retried until `attempts` calls are made; each request carries its attempt number."""
    clock = _Clock()
    logged: list[tuple[int, float]] = []
    retrier = Retrier(RetryPolicy(attempts=3, base_delay=2.0), sleep=clock.sleep, clock=lambda: clock.now, rng=lambda: 0.5,
                      on_retry=lambda attempt, delay, exc: logged.append((attempt, delay)))
    attempt = _failing(BackendTimeoutError("openai", 5), BackendUnavailableError("openai", "HTTP 502"), BackendUnavailableError("openai", "HTTP 503"))
    with pytest.raises(BackendUnavailableError, match="HTTP 503"):
        retrier.call(attempt, _request())
    assert retrier.attempts == 3 and [request.attempt for request in attempt.seen] == [1, 2, 3]
    assert logged == [(2, 1.5), (3, 3.0)] and clock.slept == [1.5, 3.0]


def test_no_wait_ends_after_the_deadline() -> None:
    """A wait that would leave less than MIN_ATTEMPT_SECONDS before the deadline is not taken: the last error ends the call."""
    clock = _Clock()
    retrier = Retrier(RetryPolicy(attempts=10, base_delay=4.0), sleep=clock.sleep, clock=lambda: clock.now, rng=lambda: 0.0)
    deadline = clock.now + 2.0 + 4.0 + MIN_ATTEMPT_SECONDS + 0.5  # room for the waits of 2 s and 4 s, not for the one of 8 s
    with pytest.raises(BackendUnavailableError):
        retrier.call(_failing(*(BackendUnavailableError("openai", "HTTP 503") for _ in range(10))), _request(deadline))
    assert clock.slept == [2.0, 4.0] and retrier.attempts == 3
    assert clock.now < deadline


def test_one_correction_then_the_reply_error_stands() -> None:
    """An unusable reply is retried once with its reason as the correction; a second one is raised."""
    clock = _Clock()
    retrier = Retrier(RetryPolicy(attempts=5), sleep=clock.sleep, clock=lambda: clock.now)
    attempt = _failing(BackendReplyError("command", "the reply lacks the field 'voice'"), BackendReplyError("command", "still bad"))
    with pytest.raises(BackendReplyError, match="still bad"):
        retrier.call(attempt, _request())
    assert [request.correction for request in attempt.seen] == [None, "the reply lacks the field 'voice'"]
    assert clock.slept == []


HELPER = """
import json, os, sys
request = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "requests.jsonl"), "a") as log:
    log.write(json.dumps(request) + "\\n")
if request["attempt"] == 1:
    print("model server down", file=sys.stderr)
    sys.exit(75)
if request["correction"] is None:
    print("not json at all")
else:
    print(json.dumps({"voice": "second try", "theme": "t"}))
"""


def test_a_command_helper_gets_the_schema_and_is_retried_after_exit_75_and_bad_output(tmp_path: Path) -> None:
    """A helper gets reply_schema, attempt and correction on stdin; exit 75 is retried, then bad output once with its correction."""
    argv = script(tmp_path, "helper.py", HELPER)
    path = write_config(tmp_path, f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, retry_delay = 0.01 }}
    """)
    code, result, logs = _run(path)
    assert (code, result["outcome"], result["attempts"]) == (0, "appended", 3), result
    requests = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(request["attempt"], request["correction"] is None) for request in requests] == [(1, True), (2, True), (3, False)]
    assert requests[2]["correction"].startswith("the reply is not valid JSON")
    assert all(request["reply_schema"] == REPLY_SCHEMA for request in requests)
    assert [line["attempt"] for line in _events(logs, "run.retry")] == [2, 3]
    assert "exited with status 75 (try again later): model server down" in _events(logs, "run.retry")[0]["error"]


def test_an_untrusted_certificate_is_permanent(tmp_path: Path) -> None:
    """A TLS server whose certificate nobody trusts fails the run for good after one attempt: a retry would be refused the same way."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is needed to make the test's self-signed certificate"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "key.pem"), "-out",
                    str(tmp_path / "cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    with ChatServer() as server:
        server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
        code, result, logs = _run(_config(tmp_path, server.url.replace("http://", "https://")))
    assert (code, result["outcome"], result["attempts"], result["permanent"]) == (78, "failed", 1, True), result
    assert "the certificate of https://127.0.0.1:" in result["error"] and "is not trusted" in result["error"]
    assert _events(logs, "run.retry") == []


def test_without_a_deadline_a_long_retry_after_is_not_waited_for() -> None:
    """A run without run_timeout does not sleep through a server's Retry-After of an hour: the 429 ends the call."""
    clock = _Clock()
    retrier = Retrier(RetryPolicy(), sleep=clock.sleep, clock=lambda: clock.now)
    with pytest.raises(BackendUnavailableError, match="HTTP 429"):
        retrier.call(_failing(BackendUnavailableError("openai", "HTTP 429", retry_after=3600.0)), _request())
    assert (retrier.attempts, clock.slept) == (1, [])
    assert retrier.call(_failing(BackendUnavailableError("openai", "HTTP 429", retry_after=30.0)), _request()) == "ok"
    assert clock.slept == [30.0]
