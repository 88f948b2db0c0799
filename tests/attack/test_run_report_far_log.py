"""ghostrunner report of a log with one stray line from long ago: the page is of the runs, not of every slot since then.

A line of 1971 (a clock reset, a garbled timestamp) made the log "reach" 55 years back, and every pulse slot since
became an absent cell: 162,679 cells, a page of 51 MB, for a log of a dozen runs.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from runner.monitor.report import ABSENT_DAYS, build_run_report
from runner.settings.config import load_config
from tests._support import write_config
from tests.runner._runlogs import FLEET, NOW, run_log

#: The fleet's slots per day: motoko's pulse-4h six and evening one, batou's evening one.
_SLOTS_PER_DAY = 8


def test_a_stray_line_of_1971_lays_out_absent_slots_for_a_bounded_window_and_says_so(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, FLEET))
    stray = json.dumps({"event": "scheduler.started", "level": "info", "timestamp": "1971-01-01T00:00:00Z", "agents": ["motoko"]})
    built = build_run_report(config, [stray, *run_log()], now=datetime.fromisoformat(NOW))
    assert built.states["absent"] <= (ABSENT_DAYS + 1) * _SLOTS_PER_DAY
    assert f"absent slots are shown for the last {ABSENT_DAYS} only" in built.html.decode()
    plain = build_run_report(config, run_log(), now=datetime.fromisoformat(NOW))
    assert "absent slots are shown for the last" not in plain.html.decode()
    # The verdict is status's whatever the page lays out: the stray line changes neither.
    assert (built.status.exit_code, built.status.verdict) == (plain.status.exit_code, plain.status.verdict)
    assert {state: count for state, count in built.states.items() if state != "absent"} == \
        {state: count for state, count in plain.states.items() if state != "absent"}
