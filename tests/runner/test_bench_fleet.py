"""The fleet's scale bench as the README gives it, on a few agents: both sides run, and each fire has one entry; its cron covers the window."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from runner.cron.slots import cron_trigger
from tests._redis import RedisServer

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench_fleet() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_fleet

        yield bench_fleet
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("start", [datetime(2026, 3, 5, 10, 20, tzinfo=UTC), datetime(2026, 3, 5, 10, 56, tzinfo=UTC),
                                   datetime(2026, 12, 31, 23, 57, tzinfo=UTC)])
def test_the_compressed_days_cron_fires_at_each_minute_of_the_window_and_nowhere_near_it(bench_fleet: ModuleType, start: datetime) -> None:
    """Within an hour, across an hour, across a year's end: the day's fires, and no other fire within 50 minutes either side of them."""
    for moments in bench_fleet.day_fires(start, 8).values():
        trigger = cron_trigger(bench_fleet.cron_of(moments), UTC)
        near = [moment for moment in trigger.after(moments[0] - timedelta(minutes=50), days=2) if moment <= moments[-1] + timedelta(minutes=50)]
        assert near == moments


@pytest.mark.waits_on_the_clock
def test_the_readme_fleet_bench_runs_both_sides_and_counts_one_entry_per_fire(tmp_path: Path) -> None:
    """``python bench/bench_fleet.py`` (6 agents, 2 shards, one minute here): redis-server, workers, beat, then serve; no loss, no double."""
    RedisServer(tmp_path / "probe").stop()  # skips (or fails under CI) as the fleet's tests do when redis-server is missing
    # The bench's own lead (60 s) for the workers' start: it starts with the suite's heaviest tests (a booted systemd, extras
    # installed into fresh venvs, a browser), and with 15 s the workers were not up in time at a load average of 20.
    result = subprocess.run([sys.executable, str(BENCH / "bench_fleet.py"), "--agents", "6", "--shards", "2", "--minutes", "1"],
                            cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line[:34].strip(): line[34:].split() for line in result.stdout.splitlines() if len(line) > 34 and line[34:].strip()}
    assert rows["fires in the window"] == ["6", "6"]
    assert rows["entries in the journals"] == ["6", "6"]
    for row in ("losses (a fire without its entry)", "doubles (a key with two entries)", "entries of no fire in the window"):
        assert rows[row] == ["0", "0"], row
    assert all(float(value) >= 0 for value in rows["publish lag p99 (s)"])
    memory = re.findall(r"^ {2}(fleet|serve) +(\S+(?: shard\d)?) +main (\d+\.\d)", result.stdout, re.MULTILINE)
    assert [(side, name) for side, name, _ in memory] == [("fleet", "redis-server"), ("fleet", "worker shard0"), ("fleet", "worker shard1"), ("fleet", "beat"), ("serve", "serve")]
    assert all(float(mb) > 0 for _, _, mb in memory)
