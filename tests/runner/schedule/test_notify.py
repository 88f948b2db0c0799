"""The sd_notify protocol: datagrams on a real socket, watchdog pings, and `ghostrunner serve` under NOTIFY_SOCKET."""

from __future__ import annotations

import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.schedule.notify import Notifier, WatchdogPinger
from tests._support import event_named, reap, start_serve, write_config


@pytest.fixture
def datagram_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A bound Unix datagram socket in tmp_path (short enough for sun_path) with a receive timeout."""
    path = tmp_path / "n.sock"
    if len(str(path)) >= 100:  # sun_path holds 108 bytes; fall back to the abstract namespace
        address, bind_to = f"@ghostrunner-test-{uuid.uuid4().hex}", None
    else:
        address, bind_to = str(path), str(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(bind_to or "\0" + address[1:])
    sock.settimeout(30)
    yield sock, address
    sock.close()


def _receive_until(sock: socket.socket, wanted: str) -> list[str]:
    """Receive datagrams until one holds the line *wanted*; return every line seen."""
    seen: list[str] = []
    while True:
        lines = sock.recv(4096).decode().splitlines()
        seen += lines
        if wanted in lines:
            return seen


def test_without_notify_socket_every_call_is_a_no_op() -> None:
    """Outside systemd the notifier is disabled and notify() sends nothing and raises nothing."""
    notifier = Notifier.from_environ({})
    assert not notifier.is_enabled and notifier.watchdog_seconds is None
    assert notifier.notify("READY=1") is False


def test_path_socket_receives_the_datagram(datagram_socket: tuple[socket.socket, str]) -> None:
    """A state sent to a filesystem (or abstract) socket address arrives as one datagram."""
    sock, address = datagram_socket
    assert Notifier.from_environ({"NOTIFY_SOCKET": address}).notify("READY=1\nSTATUS=up") is True
    assert sock.recv(4096) == b"READY=1\nSTATUS=up"


def test_abstract_namespace_address_starting_with_at() -> None:
    """An address starting with '@' is sent to the abstract namespace (a leading NUL byte)."""
    name = f"ghostrunner-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(10)
        assert Notifier(address="@" + name).notify("STOPPING=1") is True
        assert sock.recv(4096) == b"STOPPING=1"


def test_unreachable_socket_is_reported_not_raised(tmp_path: Path) -> None:
    """A socket path nobody listens on makes notify() return False instead of failing the service."""
    assert Notifier(address=str(tmp_path / "gone.sock")).notify("READY=1") is False


def test_watchdog_usec_is_read_for_this_process_only() -> None:
    """WATCHDOG_USEC gives the interval in seconds, unless WATCHDOG_PID names another process."""
    mine = Notifier.from_environ({"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())})
    other = Notifier.from_environ({"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"})
    assert mine.watchdog_seconds == 30.0
    assert other.watchdog_seconds is None


def test_watchdog_pinger_pings_until_stopped() -> None:
    """The pinger sends WATCHDOG=1 at once and then on every interval, and nothing after stop()."""
    sent: list[str] = []
    three = threading.Event()

    def send(state: str) -> None:
        sent.append(state)
        if len(sent) >= 3:
            three.set()

    pinger = WatchdogPinger(send, 0.01)
    pinger.start()
    assert three.wait(60)
    pinger.stop()
    count = len(sent)
    assert set(sent) == {"WATCHDOG=1"}
    pinger.stop()
    assert len(sent) == count
    with pytest.raises(ValueError, match="watchdog interval must be positive, got 0"):
        WatchdogPinger(send, 0)


def test_serve_sends_ready_watchdog_and_stopping(tmp_path: Path, datagram_socket: tuple[socket.socket, str]) -> None:
    """A real `ghostrunner serve` under NOTIFY_SOCKET sends READY=1 and watchdog pings, then STOPPING=1 on SIGTERM, and exits 0."""
    sock, address = datagram_socket
    body = """
    [routines.minutely]
    kind = "note"
    schedule = "* * * * *"
    slot = "minute"
    question = "what now?"
    prompt = "Write a note."

    [agents.motoko]
    persona = "motoko.toml"
    routines = ["minutely"]
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "0s"\n', wall_clock=True)
    env = {**os.environ, "NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"}
    env.pop("WATCHDOG_PID", None)
    process, reader = start_serve(path, tmp_path, env)
    try:
        before_ready = _receive_until(sock, "READY=1")
        assert "STOPPING=1" not in before_ready
        reader.wait(event_named("scheduler.started"))
        _receive_until(sock, "WATCHDOG=1")
        _receive_until(sock, "WATCHDOG=1")  # a second ping: they repeat, not just once at start
        process.send_signal(signal.SIGTERM)
        _receive_until(sock, "STOPPING=1")
        assert process.wait(30) == 0
        events = reader.drain()
    finally:
        reap(process)
    assert [e["event"] for e in events if e["event"].startswith("scheduler.")][-2:] == ["scheduler.stopping", "scheduler.stopped"]
