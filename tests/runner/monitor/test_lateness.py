"""Lateness that status and report see: percentiles of scheduled -> started per pair, and drift (always late), apart from overdue."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests._support import SIMPLE_AGENT, ghostrunner, write_config

NOW = "2026-09-08T23:30Z"


def _finished(routine: str, slot: str, scheduled: datetime, late: timedelta, duration_ms: float = 2000.0) -> str:
    """A run.finished line of a run that started *late* after *scheduled* and took *duration_ms*."""
    finished = scheduled + late + timedelta(milliseconds=duration_ms)
    return json.dumps(
        {
            "event": "run.finished",
            "level": "info",
            "timestamp": finished.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "run_id": f"r-{routine}-{slot}",
            "agent": "motoko",
            "routine": routine,
            "slot": slot,
            "client_key": f"motoko:{routine}:{slot}",
            "scheduled": scheduled.isoformat(),
            "entry_id": f"e-{routine}-{slot}",
            "outcome": "appended",
            "duration_ms": duration_ms,
            "error": None,
            "dry_run": False,
            "reason": None,
            "attempts": 1,
            "tokens": None,
            "cost": None,
        }
    )


def _log(tmp_path: Path, runner: str = "") -> tuple[Path, Path]:
    """Evenings 22 to 107 minutes late every day for a week (drift); pulses on time but one an hour late (no drift)."""
    path = write_config(tmp_path, SIMPLE_AGENT.replace('["pulse-4h", "evening", "digest"]', '["pulse-4h", "evening"]'), runner=runner)
    lines = []
    for day in range(2, 9):
        evening = datetime(2026, 9, day, 21, tzinfo=UTC)
        lines.append(_finished("evening", f"2026-09-{day:02d}", evening, timedelta(minutes=22 + (day - 2) * 85 // 6)))
        for hour in range(0, 24, 4):
            pulse = datetime(2026, 9, day, hour, tzinfo=UTC)
            late = timedelta(hours=1) if (day, hour) == (5, 8) else timedelta(seconds=3)
            lines.append(_finished("pulse-4h", f"2026-09-{day:02d}T{hour:02d}", pulse, late))
    log = tmp_path / "runs.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, log


def test_status_gives_each_pairs_lateness_and_flags_the_pair_always_late_as_drifting(tmp_path: Path) -> None:
    """The evening, 22-107 minutes late every day, drifts and is still ok (its slots have their entries); the pulse, late once, does not."""
    path, log = _log(tmp_path)
    done = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", NOW, "--json", "--grace", "3h")
    assert done.returncode == 0, done.stdout + done.stderr
    pairs = {pair["routine"]: pair for pair in json.loads(done.stdout)["pairs"]}
    evening, pulse = pairs["evening"]["lateness"], pairs["pulse-4h"]["lateness"]
    assert (pairs["evening"]["state"], evening["runs"], evening["drift"]) == ("ok", 7, True)
    assert (evening["p50_s"], evening["max_s"]) == (22 * 60 + 3 * 85 // 6 * 60, 107 * 60)
    assert (pairs["pulse-4h"]["state"], pulse["runs"], pulse["drift"]) == ("ok", 42, False)
    assert (pulse["p50_s"], pulse["p90_s"], pulse["max_s"]) == (3.0, 3.0, 3600.0)
    table = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", NOW, "--text", "--grace", "3h").stdout
    assert "DRIFT" in next(line for line in table.splitlines() if " evening " in line)
    assert "DRIFT" not in next(line for line in table.splitlines() if " pulse-4h " in line)


def test_a_drifting_pair_is_not_overdue_and_an_overdue_pair_need_not_drift(tmp_path: Path) -> None:
    """Judged after the evening's next slot was due and never ran: overdue (exit 3), its drift still flagged beside it."""
    path, log = _log(tmp_path)
    done = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", "2026-09-10T02:00Z", "--json", "--grace", "3h")
    pairs = {pair["routine"]: pair for pair in json.loads(done.stdout)["pairs"]}
    assert done.returncode == 3
    assert (pairs["evening"]["state"], pairs["evening"]["lateness"]["drift"]) == ("overdue", True)
    assert (pairs["pulse-4h"]["state"], pairs["pulse-4h"]["lateness"]["drift"]) == ("overdue", False)


def test_the_report_shows_each_pairs_lateness(tmp_path: Path) -> None:
    """The report's pair table has the lateness column, the drifting pair marked."""
    path, log = _log(tmp_path)
    out = tmp_path / "runs.html"
    done = ghostrunner("report", "--config", str(path), "--log", str(log), "--now", NOW, "--grace", "3h", "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert "lateness (7 days)" in page and "p50 3s p90 3s" in page and "DRIFT" in page


@pytest.mark.parametrize(
    ("threshold", "drifting"),
    [("2h", set()), ("21m", {"evening"}), ("2s", {"evening", "pulse-4h"})],
)
def test_runner_drift_threshold_sets_how_late_always_late_is(tmp_path: Path, threshold: str, drifting: set[str]) -> None:
    """The evening's least late run started 22 minutes late, the pulse's 3 s: each drifts exactly when that is over the threshold."""
    path, log = _log(tmp_path, runner=f'drift_threshold = "{threshold}"\n')
    done = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", NOW, "--json", "--grace", "3h")
    assert done.returncode == 0, done.stdout + done.stderr
    pairs = json.loads(done.stdout)["pairs"]
    assert {pair["routine"] for pair in pairs if pair["lateness"]["drift"]} == drifting
    out = tmp_path / "runs.html"
    assert ghostrunner("report", "--config", str(path), "--log", str(log), "--now", NOW, "--grace", "3h", "--out", str(out)).returncode == 0
    assert ("DRIFT" in out.read_text(encoding="utf-8")) == bool(drifting)


@pytest.mark.parametrize("value", ['"0s"', '"8d"', '"soon"', "true"])
def test_a_bad_drift_threshold_is_refused_at_load_in_one_line(tmp_path: Path, value: str) -> None:
    """A threshold under a second, over the week lateness is judged on, or not a duration: one line naming the key, exit 78."""
    path, log = _log(tmp_path, runner=f"drift_threshold = {value}\n")
    done = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", NOW, "--json")
    assert (done.returncode, done.stdout) == (78, "")
    assert done.stderr.strip().count("\n") == 0 and "runner.drift_threshold" in done.stderr and "Traceback" not in done.stderr
