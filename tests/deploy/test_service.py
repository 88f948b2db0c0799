"""ghostrunner.service under a live systemd: readiness, the watchdog, restarts, a graceful stop, and its logs."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.deploy._deploy import CONFIG, STAGE, configure, entries, status_of_the_journal
from tests.deploy._live import LiveSystem, wait_until

pytestmark = pytest.mark.live_systemd

SERVICE = "ghostrunner.service"
#: The rendered WatchdogSec=60s would make "past the watchdog" a minute-long wait: a drop-in shortens it
#: (serve pings at half of whatever systemd sets in WATCHDOG_USEC).
WATCHDOG_SECONDS = 3
RESTART_SECONDS = 10  # the rendered RestartSec=
#: Its own agent: the timer tests' journal (motoko) stays theirs.
SERVICE_CONFIG = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"
catchup_grace = "25h"
run_timeout = "5m"
shutdown_timeout = "2m"

[routines.tick]
kind = "note"
schedule = "* * * * *"
slot = "minute"
question = "what is this minute about?"
prompt = "Write one line."

[agents.batou]
persona = "agents/motoko.toml"
routines = ["tick"]
backend = "simulated"
"""
#: An agent whose program waits for the test to open a FIFO: a run kept in flight as long as the test wants.
HOLDER = f"""
[routines.hold]
kind = "note"
schedule = "0 0 * * *"
slot = "day"
question = "what was held?"
prompt = "Write one line."

[agents.holder]
routines = ["hold"]
backend = {{ type = "command", command = ["/usr/bin/python3", "{STAGE}/hold.py"], timeout = "60s" }}
"""
GATE = f"{STAGE}/gate.fifo"
HOLD_PROGRAM = f"""
import json, sys
request = json.load(sys.stdin)
with open({GATE!r}) as gate:  # blocks until the test opens the FIFO for writing, then reads to its end
    gate.read()
print(json.dumps({{"voice": "held, then released, for " + request["slot"], "theme": "waiting"}}))
"""


@pytest.fixture(scope="module")
def service(system: LiveSystem) -> Iterator[None]:
    """The service deployment (step 3a of docs/deploying.md), with a short watchdog."""
    configure(system, SERVICE_CONFIG)
    dropin = system.path("/etc/systemd/system/ghostrunner.service.d")
    dropin.mkdir(exist_ok=True)
    (dropin / "watchdog.conf").write_text(f"[Service]\nWatchdogSec={WATCHDOG_SECONDS}s\n")
    system.systemctl("daemon-reload")
    try:
        yield
    finally:
        system.systemctl("disable", "--now", SERVICE, check=False)
        (dropin / "watchdog.conf").unlink()
        system.systemctl("daemon-reload")


def _state(system: LiveSystem) -> dict[str, str]:
    return system.show(SERVICE, "ActiveState", "SubState", "MainPID", "NRestarts", "Result", "ExecMainStatus")


def _start(system: LiveSystem) -> dict[str, str]:
    """Start the service unless it is running (the start limit forgotten first); return its state."""
    system.systemctl("reset-failed", SERVICE, check=False)
    system.systemctl("enable", "--now", SERVICE)
    state = _state(system)
    assert state["ActiveState"] == "active", state
    return state


def _restarted(system: LiveSystem, before: dict[str, str]) -> dict[str, str] | None:
    state = _state(system)
    restarted = state["ActiveState"] == "active" and state["MainPID"] not in ("0", before["MainPID"])
    return state if restarted else None


def _micro(system: LiveSystem, prop: str) -> int:
    """A timestamp property of the service in µs since the epoch."""
    value = system.systemctl("show", SERVICE, f"--property={prop}", "--value", "--timestamp=us+utc").stdout.strip()
    return int(datetime.strptime(value, "%a %Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=UTC).timestamp() * 1_000_000)


def _service_events(system: LiveSystem, event: str) -> list[dict[str, Any]]:
    return [e for e in system.events("-u", SERVICE) if e.get("event") == event]


def test_the_service_becomes_active_only_after_serve_is_ready(system: LiveSystem, service: None) -> None:
    system.systemctl("stop", SERVICE)
    pid = int(_start(system)["MainPID"])
    started = wait_until("serve's scheduler.started", lambda: [e for e in _service_events(system, "scheduler.started") if e["pid"] == pid], 10)
    logged = int(datetime.fromisoformat(started[-1]["timestamp"]).timestamp() * 1_000_000)
    # Type=notify: active once READY=1 came, which serve sends after scheduler.started, not when the process began.
    assert _micro(system, "ExecMainStartTimestamp") < logged <= _micro(system, "ActiveEnterTimestamp")


def test_the_service_stays_up_past_its_watchdog_while_serve_pings(system: LiveSystem, service: None) -> None:
    before = _start(system)
    assert system.show(SERVICE, "WatchdogUSec")["WatchdogUSec"] == f"{WATCHDOG_SECONDS}s"
    watched_until = time.monotonic() + 3 * WATCHDOG_SECONDS
    while time.monotonic() < watched_until:  # an observation window: "stays up" has a duration
        state = _state(system)
        assert (state["ActiveState"], state["MainPID"], state["NRestarts"]) == ("active", before["MainPID"], before["NRestarts"]), state
        time.sleep(0.5)
    # The pings are what kept it: a serve that stops pinging is killed by the watchdog, then restarted.
    system.run("kill", "-STOP", before["MainPID"])
    wait_until("the watchdog's verdict", lambda: system.show(SERVICE, "Result")["Result"] == "watchdog", 3 * WATCHDOG_SECONDS)
    system.run("kill", "-KILL", before["MainPID"], check=False)
    after = wait_until("the restart after the watchdog", lambda: _restarted(system, before), RESTART_SECONDS + 20, 0.5)
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1


def test_a_killed_serve_is_restarted_after_restart_sec(system: LiveSystem, service: None) -> None:
    before = _start(system)
    system.run("kill", "-9", before["MainPID"])
    killed = time.time_ns() // 1000
    after = wait_until("the restart after SIGKILL", lambda: _restarted(system, before), RESTART_SECONDS + 20, 0.5)
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1
    assert _micro(system, "ExecMainStartTimestamp") - killed >= (RESTART_SECONDS - 1) * 1_000_000, "restarted before RestartSec="


def test_stop_lets_the_in_flight_run_finish_and_log_once(system: LiveSystem, service: None) -> None:
    gate = system.path(GATE)
    system.path(f"{STAGE}/hold.py").write_text(HOLD_PROGRAM)
    gate.unlink(missing_ok=True)
    os.mkfifo(gate, 0o644)
    configure(system, SERVICE_CONFIG + HOLDER)
    system.systemctl("reset-failed", SERVICE, check=False)
    system.systemctl("restart", SERVICE)  # the holder's missed slot is caught up at once: its program waits at the gate
    writer = wait_until("the holder's program waiting at the gate", lambda: _open_writer(str(gate)), 30, 0.2)
    try:
        system.systemctl("stop", "--no-block", SERVICE)
        stopping = wait_until("serve's stop with a run in flight", lambda: _service_events_after(system, "scheduler.stopping"), 15, 0.2)
        assert stopping[-1]["in_flight"] >= 1 and _state(system)["ActiveState"] == "deactivating"
    finally:
        os.close(writer)  # the program reads to the end and answers
        gate.unlink()  # a later run of the holder fails at once instead of waiting here
    wait_until("the service stopped", lambda: _state(system)["ActiveState"] in ("inactive", "failed"), 30, 0.2)
    state = _state(system)
    assert (state["ActiveState"], state["Result"], state["ExecMainStatus"]) == ("inactive", "success", "0"), state
    [stopped] = _logged_to_the_end(system)
    assert stopped["killed"] in (0, [])
    [entry] = entries(system, "holder")
    finished = [e for e in _service_events(system, "run.finished") if e["client_key"] == entry["client_key"]]
    assert [(e["outcome"], e["entry_id"]) for e in finished] == [("appended", entry["id"])]


def _logged_to_the_end(system: LiveSystem) -> list[dict[str, Any]]:
    """Wait until the stopped service's last line (scheduler.stopped) is in the journal: every earlier line is, too.

    serve and its workers share one stream to journald, so lines arrive in the order they were written."""
    return wait_until("serve's scheduler.stopped in the journal", lambda: _service_events_after(system, "scheduler.stopped"), 10)


def _service_events_after(system: LiveSystem, event: str) -> list[dict[str, Any]]:
    """Events of the service's current (or last) invocation."""
    invocation = system.show(SERVICE, "InvocationID")["InvocationID"]
    return [e for e in system.events("-u", SERVICE, f"_SYSTEMD_INVOCATION_ID={invocation}") if e.get("event") == event]


def _open_writer(path: str) -> int | None:
    """The FIFO's write end once a reader has it open (before that, a non-blocking open fails with ENXIO)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            return None
        raise


def test_status_reads_the_runs_the_service_made(system: LiveSystem, service: None) -> None:
    _start(system)
    wait_until("a run of the service", lambda: _service_events(system, "run.finished"), 30, 0.5)
    system.systemctl("stop", SERVICE)  # no run lands between the two readings
    _logged_to_the_end(system)
    finished = [e for e in system.events("-u", SERVICE, "-u", "ghostrunner-run-*") if e.get("event") == "run.finished"]
    reports = {}
    now = datetime.now(UTC).isoformat(timespec="seconds")  # both read as of one instant: a due slot moves every minute
    for output in ("cat", "json"):
        reports[output] = status_of_the_journal(system, output, now)
    assert reports["cat"]["pairs"] == reports["json"]["pairs"]
    assert reports["cat"]["input"]["runs"] == reports["json"]["input"]["runs"] == len(finished)
    for pair in reports["cat"]["pairs"]:
        successes = [e for e in finished if (e["agent"], e["routine"]) == (pair["agent"], pair["routine"])
                     and e["outcome"] in ("appended", "duplicate", "skipped") and not e["dry_run"]]
        assert successes, pair
        latest = max(successes, key=lambda e: e["timestamp"])
        assert pair["last_success"]["run_id"] == latest["run_id"], pair


#: One more agent, for a reload to add.
SAITO = """
[agents.saito]
persona = "agents/motoko.toml"
routines = ["tick"]
backend = "simulated"
"""


def _install_config(system: LiveSystem, config: str) -> None:
    """Put a new configuration in place without rendering the units again (what an operator does before a reload)."""
    system.path(f"{STAGE}/ghostrunner.toml").write_text(config, encoding="utf-8")
    system.run("install", "-m", "0644", f"{STAGE}/ghostrunner.toml", CONFIG)


def test_systemctl_reload_rereads_the_configuration_and_refuses_a_broken_one(system: LiveSystem, service: None) -> None:
    configure(system, SERVICE_CONFIG)
    system.systemctl("reset-failed", SERVICE, check=False)
    system.systemctl("restart", SERVICE)  # serving SERVICE_CONFIG, whatever an earlier test left running
    before = _start(system)
    try:
        _install_config(system, SERVICE_CONFIG + SAITO)
        system.systemctl("reload", SERVICE)  # ExecReload= sends SIGHUP to serve
        [reloaded] = wait_until("serve's scheduler.reloaded", lambda: _service_events_after(system, "scheduler.reloaded"), 15, 0.2)
        assert (reloaded["added"], reloaded["removed"]) == (["saito:tick"], [])
        wait_until("the added agent's first run", lambda: [e for e in _service_events_after(system, "run.finished")
                                                           if e["agent"] == "saito" and e["outcome"] == "appended"], 60, 0.5)
        _install_config(system, SERVICE_CONFIG.replace("[runner]", "[runner]\nmax_concurrent_runs = 0"))
        system.systemctl("reload", SERVICE)
        [failed] = wait_until("serve's scheduler.reload_failed", lambda: _service_events_after(system, "scheduler.reload_failed"), 15, 0.2)
        assert "runner.max_concurrent_runs" in failed["error"]
        state = _state(system)
        assert (state["ActiveState"], state["SubState"], state["MainPID"]) == ("active", "running", before["MainPID"]), state
    finally:
        configure(system, SERVICE_CONFIG)
        system.systemctl("reload", SERVICE, check=False)
