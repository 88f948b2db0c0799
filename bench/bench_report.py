"""Report benchmarks (not tests): file size and time to interactive of both reports, at a month and a year of a simulated agent.

Run:  python bench/bench_report.py [--days 30,365] [--loads 3] [--screenshots DIR] [--keep DIR]

For each length, ``ghostrunner simulate`` lives that many days of motoko
(the embedded persona, lexical memory) with its log at info level; then
``ghostjournal report --agent motoko`` and ``ghostrunner report`` are built
from the journal and from that log, and each page is opened ``--loads``
times in the distribution's headless Chromium (``/usr/bin/chromium``).

The simulation logs each run at the moment it ran, seconds apart, so every
slot would look late; the runner report is built from the same lines with
each ``timestamp`` moved to its run's virtual time (scheduled time plus
duration), as ``serve`` would have logged them over the weeks.

Printed per report: entries or slots, file size, build time (the command,
a fresh process), and the time to interactive in the browser: the page's own
``report-ready`` mark (its script has parsed the data and wired the page,
measured from the navigation's start), and from ``goto`` to that point as
the driving process sees it (median of the loads). Targets: under 5 MB and
under 2 s for a year (about 2,600 entries).

With ``--screenshots DIR`` the shortest run's pages are photographed into
DIR (the pictures in docs/ghostjournal.md and docs/monitoring.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PERSONA = REPO / "examples" / "agents" / "motoko.toml"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
START = "2026-01-01"


def _config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    path = directory / "ghostrunner.toml"
    path.write_text('[runner]\njournal_root = "./journal"\ntimezone = "UTC"\nmemory = "lexical"\n'
                    '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening", "digest"]\n', encoding="utf-8")
    return path


def _replayed(log: str) -> str:
    """The simulation's lines with each run's timestamp moved to its virtual time (scheduled + duration)."""
    lines = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not event.get("scheduled"):
            continue
        moment = datetime.fromisoformat(event["scheduled"]) + timedelta(milliseconds=float(event.get("duration_ms") or 0))
        event["timestamp"] = moment.isoformat()
        lines.append(json.dumps(event))
    return "\n".join(lines) + "\n"


def _timed(argv: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    return time.perf_counter() - began, done


def _loads(context: Any, path: Path, loads: int) -> tuple[float, float]:
    """Median ms to the page's report-ready mark, and from goto to it as seen from here."""
    marks, walls = [], []
    for _ in range(loads):
        page = context.new_page()
        began = time.perf_counter()
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", state="attached")
        walls.append((time.perf_counter() - began) * 1000)
        marks.append(page.evaluate("performance.getEntriesByName('report-ready')[0].startTime"))
        page.close()
    return statistics.median(marks), statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--days", default="30,365", help="simulation lengths in days, comma-separated")
    parser.add_argument("--loads", type=int, default=3, help="page loads per report (the median is printed)")
    parser.add_argument("--screenshots", type=Path, default=None, help="photograph the shortest run's pages into this directory")
    parser.add_argument("--keep", type=Path, default=None, help="keep the journals, logs and pages here")
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = options.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    rows = []
    env = {**os.environ, "TZ": "UTC", "GHOSTJOURNAL_PROGRESS_AFTER": "3600"}
    env.pop("GHOSTRUNNER_CONFIG", None)
    lengths = sorted(int(days) for days in options.days.split(","))
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="bench-chromium-"), executable_path=CHROMIUM,
                                                                headless=True, args=ARGS, viewport={"width": 1280, "height": 900})
        try:
            for days in lengths:
                directory = work / f"{days}d"
                if directory.exists():
                    shutil.rmtree(directory)
                config = _config(directory)
                seconds, simulated = _timed(["ghostrunner", "--config", str(config), "--log-level", "info", "simulate", "--agent", "motoko",
                                             "--days", str(days), "--start", START, "--json"], cwd=directory, env=env)
                assert simulated.returncode == 0, simulated.stderr[-2000:]
                log = directory / "runs.log"
                log.write_text(_replayed(simulated.stderr), encoding="utf-8")
                journal_page, runs_page = directory / "journal.html", directory / "runs.html"
                built_journal, done = _timed(["ghostjournal", "--root", str(directory / "journal"), "report", "--agent", "motoko",
                                              "--out", str(journal_page)], env=env)
                assert done.returncode == 0, done.stderr
                end = (datetime.fromisoformat(START) + timedelta(days=days)).isoformat() + "+00:00"  # judged as the simulation ends
                built_runs, done = _timed(["ghostrunner", "--config", str(config), "report", "--log", str(log), "--now", end,
                                           "--out", str(runs_page)], env=env)
                assert done.returncode == 0, done.stderr  # every slot of the simulation ran: all well
                entries = json.loads(simulated.stdout)["runs"]
                for name, page_path, count, built in (("journal", journal_page, entries, built_journal), ("runs", runs_page, entries, built_runs)):
                    mark, wall = _loads(context, page_path, options.loads)
                    rows.append((days, name, count, page_path.stat().st_size, seconds if name == "journal" else None, built, mark, wall))
                if options.screenshots is not None and days == lengths[0]:
                    options.screenshots.mkdir(parents=True, exist_ok=True)
                    for name, page_path in (("report-journal.png", journal_page), ("report-runs.png", runs_page)):
                        page = context.new_page()
                        page.goto(page_path.resolve().as_uri())
                        page.wait_for_selector("body[data-ready='1']", state="attached")
                        page.screenshot(path=str(options.screenshots / name))
                        page.close()
                        print(f"screenshot: {options.screenshots / name} ({(options.screenshots / name).stat().st_size} bytes)")
        finally:
            context.close()
    print(f"\n{'days':>5} {'report':<8} {'entries':>8} {'file MB':>8} {'simulate s':>11} {'build s':>8} {'ready ms':>9} {'goto->ready ms':>15}")
    for days, name, count, size, simulate_s, built, mark, wall in rows:
        print(f"{days:>5} {name:<8} {count:>8} {size / 1e6:>8.2f} {'' if simulate_s is None else f'{simulate_s:.1f}':>11} {built:>8.2f} "
              f"{mark:>9.0f} {wall:>15.0f}")
    print("\ntargets: a year (about 2,600 entries) under 5 MB and interactive under 2 s")
    if options.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
