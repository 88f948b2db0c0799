"""Later attempts of a failed slot under a live systemd: the rendered oneshot service restarts a transient failure, never a permanent one."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from tests.deploy._deploy import CONFIG, STAGE, STATE, VENV, configure, entries
from tests.deploy._live import LiveSystem, wait_until

pytestmark = pytest.mark.live_systemd

HELPER = "/etc/ghostrunner/flaky.py"
#: A command helper: evening's first call says "try again later" (75), the next one answers; pulse-4h always fails for good (2).
FLAKY = f"""
import json, os, sys
request = json.load(sys.stdin)
if request["routine"] == "pulse-4h":
    print("no such model", file=sys.stderr)
    sys.exit(2)
count = os.path.join("{STATE}", "flaky-calls")
calls = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(calls + 1))
if calls == 0:
    print("model server not up yet", file=sys.stderr)
    sys.exit(75)
print(json.dumps({{"voice": "written on call %d" % (calls + 1), "theme": "restarts"}}))
"""
RESTART_CONFIG = f"""
[runner]
journal_root = "{STATE}/{{agent}}"
lock_file = "{STATE}/serve.lock"
timezone = "UTC"
slot_retry_delay = "1s"

[agents.motoko]
routines = ["evening", "pulse-4h"]
backend = {{ type = "command", command = ["{VENV}/bin/python", "{HELPER}"], attempts = 1 }}
"""


@pytest.fixture(scope="module")
def flaky(system: LiveSystem) -> Iterator[None]:
    system.path(f"{STAGE}/flaky.py").write_text(textwrap.dedent(FLAKY), encoding="utf-8")
    system.run("install", "-m", "0644", f"{STAGE}/flaky.py", HELPER)
    configure(system, RESTART_CONFIG)
    try:
        yield
    finally:
        system.systemctl("stop", "ghostrunner-run-evening@motoko.service", "ghostrunner-run-pulse-4h@motoko.service", check=False)
        system.systemctl("reset-failed", check=False)
        system.run("rm", "-rf", f"{STATE}/motoko", f"{STATE}/flaky-calls", HELPER, check=False)
        system.run("cp", "/dev/null", CONFIG, check=False)


def test_a_transient_failure_is_restarted_and_the_slot_gets_its_entry(system: LiveSystem, flaky: None) -> None:
    """The first run exits 1 (its helper exited 75); systemd starts it again after RestartSec=1s, and that run appends the slot."""
    unit = "ghostrunner-run-evening@motoko.service"
    system.systemctl("start", "--no-block", unit)
    [entry] = wait_until("the restarted run's entry", lambda: [e for e in entries(system, "motoko") if e["meta"]["source_routine"] == "evening"],
                         60, 0.5)
    assert entry["voice"] == "written on call 2"

    def settled() -> dict[str, str] | None:
        shown = system.show(unit, "NRestarts", "ActiveState", "Result")
        return shown if shown["ActiveState"] in ("inactive", "failed") else None

    shown = wait_until("the unit to settle", settled, 30, 0.2)
    assert shown["Result"] == "success", shown
    # NRestarts is no witness: systemd 252 resets it when the restart job starts the unit. Its own journal line is one.
    messages = [str(record.get("MESSAGE", "")) for record in system.journal(f"UNIT={unit}")]
    assert sum("Scheduled restart job, restart counter is at 1." in message for message in messages) == 1, messages
    assert not any("restart counter is at 2" in message for message in messages), messages
    finished = [event for event in system.events("-u", unit) if event.get("event") == "run.finished"]
    assert [(event["outcome"], event["attempts"]) for event in finished] == [("failed", 1), ("appended", 1)]


def test_a_permanent_failure_is_not_restarted(system: LiveSystem, flaky: None) -> None:
    """A run the backend refused for good exits 78, which RestartPreventExitStatus= lists: the unit fails once, with no restart."""
    unit = "ghostrunner-run-pulse-4h@motoko.service"
    system.systemctl("start", unit, check=False)
    shown = system.show(unit, "ActiveState", "Result", "ExecMainStatus")
    assert (shown["ActiveState"], shown["Result"], shown["ExecMainStatus"]) == ("failed", "exit-code", "78"), shown
    messages = [str(record.get("MESSAGE", "")) for record in system.journal(f"UNIT={unit}")]
    assert not any("Scheduled restart job" in message for message in messages), messages
    finished = [event for event in system.events("-u", unit) if event.get("event") == "run.finished"]
    assert [(event["outcome"], event["attempts"]) for event in finished] == [("failed", 1)]
    assert "exited with status 2: no such model" in finished[0]["error"]
