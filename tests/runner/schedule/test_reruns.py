"""Later runs of a failed slot: under a real `ghostrunner serve`, and the timing rule itself."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runner.cron.slots import cron_trigger
from runner.run.contract import Outcome, RunIdentity, RunResult
from runner.schedule.reruns import needs_rerun, next_fire_after, rerun_time
from tests._support import NIGHTLY, event_named, script, start_serve, with_key, write_config

#: Fails with "try again later" (75) on its first two calls, then answers; its calls are counted in a file beside it.
FLAKY = """
import json, os, sys
request = json.load(sys.stdin)
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls-" + request["agent"])
calls = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(calls + 1))
if request["agent"] == "batou":
    print("unknown model", file=sys.stderr)
    sys.exit(2)
if calls < 2:
    print("model server not up yet", file=sys.stderr)
    sys.exit(75)
print(json.dumps({"voice": "on call %d" % (calls + 1), "theme": "t"}))
"""


def test_serve_reruns_a_transiently_failed_slot_with_backoff_and_never_a_permanent_one(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    """A catch-up run that fails transiently is run again after 1 s, then 2 s, and the third run appends; a permanent failure gets no rerun."""
    argv = script(tmp_path, "flaky.py", FLAKY)
    backend = f'{{ type = "command", command = {json.dumps(argv)}, attempts = 1 }}'
    body = NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {backend}

    [agents.batou]
    routines = ["nightly"]
    backend = {backend}
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "2d"\nslot_retry_delay = "1s"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    refused = reader.wait(event_named("run.finished", agent="batou"))
    appended = reader.wait(event_named("run.finished", agent="motoko", outcome="appended"), timeout=60)
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    events = reader.drain()
    assert refused["outcome"] == "failed" and "exited with status 2" in refused["error"]
    motoko = [e for e in events if e.get("agent") == "motoko" and e["event"] in ("run.finished", "scheduler.retry_scheduled")]
    assert [(e["event"], e.get("outcome"), e.get("rerun")) for e in motoko] == [
        ("run.finished", "failed", None), ("scheduler.retry_scheduled", None, 1),
        ("run.finished", "failed", None), ("scheduler.retry_scheduled", None, 2),
        ("run.finished", "appended", None),
    ]
    first, second = (datetime.fromisoformat(e["run_date"]) - datetime.fromisoformat(e["timestamp"]) for e in motoko if "run_date" in e)
    assert timedelta(seconds=0.9) < first < timedelta(seconds=1.1) and timedelta(seconds=1.9) < second < timedelta(seconds=2.1)
    assert len({e["slot"] for e in motoko}) == 1 and len({e["run_id"] for e in motoko if e["event"] == "run.finished"}) == 3
    assert not [e for e in events if e["event"] == "scheduler.retry_scheduled" and e["agent"] == "batou"]
    assert (tmp_path / "calls-batou").read_text() == "1"
    assert [entry.voice for entry in with_key(tmp_path / "journal", appended["client_key"])] == ["on call 3"]


def _result(outcome: Outcome, *, permanent: bool = False) -> RunResult:
    identity = RunIdentity(run_id="r", agent="a", routine="r", slot="s", client_key="a:r:s", scheduled="2026-09-05T00:00:00+00:00")
    return RunResult(identity, outcome=outcome, entry_id=None, duration_ms=1.0, permanent=permanent)


def test_only_a_transient_failure_or_a_crash_needs_a_rerun() -> None:
    """Failed and not permanent, or no result at all (the worker died): rerun; a success or a permanent failure: none."""
    assert needs_rerun(_result(Outcome.FAILED)) and needs_rerun(None)
    assert not needs_rerun(_result(Outcome.FAILED, permanent=True))
    assert not any(needs_rerun(_result(outcome)) for outcome in (Outcome.APPENDED, Outcome.DUPLICATE, Outcome.SKIPPED))


def test_reruns_double_stop_at_the_cap_and_never_reach_the_next_fire() -> None:
    """Waits of 5, 10, 20 minutes; none past slot_retries; none at or after the routine's next fire (the slot's deadline)."""
    trigger = cron_trigger("0 */1 * * *", UTC)
    scheduled = datetime(2026, 9, 5, 10, tzinfo=UTC)
    deadline = next_fire_after(trigger, scheduled)
    assert deadline == datetime(2026, 9, 5, 11, tzinfo=UTC)
    delay = timedelta(minutes=5)
    failed = scheduled + timedelta(minutes=1)
    times = [rerun_time(rerun=n, retries=3, delay=delay, failed_at=failed, deadline=deadline) for n in (1, 2, 3, 4)]
    assert times == [failed + timedelta(minutes=5), failed + timedelta(minutes=10), failed + timedelta(minutes=20), None]
    late = scheduled + timedelta(minutes=52)
    assert rerun_time(rerun=1, retries=3, delay=delay, failed_at=late, deadline=deadline) == late + delay
    assert rerun_time(rerun=2, retries=3, delay=delay, failed_at=late, deadline=deadline) is None  # 11:02 is the next slot's time
    assert rerun_time(rerun=1, retries=0, delay=delay, failed_at=failed, deadline=deadline) is None
