"""`ghostrunner report`: the runs of a fleet's log as one page, checked in a real headless Chromium; its exit code is status's."""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.monitor.log_digest import read_log
from runner.monitor.report import build_run_report
from runner.monitor.status import build_report
from runner.settings.config import load_config
from tests._browser import Browser
from tests._docs import blocks, page_text
from tests._support import ghostrunner, write_config
from tests.journal.pages._figures import header_and_panels
from tests.runner._runlogs import FLEET, NOW, finished_line, log_line, run_log

pytestmark = pytest.mark.xdist_group("report-browser")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("fleet")
    log = directory / "runs.log"
    log.write_text("\n".join(run_log()) + "\n", encoding="utf-8")
    return write_config(directory, FLEET), log


@pytest.fixture(scope="module")
def report_file(fleet: tuple[Path, Path]) -> tuple[Path, subprocess.CompletedProcess[str]]:
    config, log = fleet
    out = log.with_name("runs.html")
    done = ghostrunner("report", "--config", str(config), "--log", str(log), "--now", NOW, "--since", "2026-09-01", "--out", str(out))
    return out, done


def _cells(page: Any) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each pair's cells in the grid, as (slot, state), in the grid's order."""
    return {tuple(row[0].split(":", 1)): [tuple(cell) for cell in row[1]] for row in page.eval_on_selector_all(
        "table.grid tbody tr[data-pair]", "rows => rows.map(row => [row.dataset.pair, Array.from(row.querySelectorAll('a.cell'))"
        ".map(cell => [cell.title.split(': ')[0], cell.className.split(' ')[1]])])")}


def test_the_grid_shows_every_slot_of_every_pair_in_its_state(browser: Browser, report_file: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _done = report_file
    opened = browser.open(out)
    assert opened.problems() == []
    assert opened.requests == [opened.url]
    assert _cells(opened.page) == {
        ("motoko", "pulse-4h"): [(f"2026-09-0{day}T{hour:02d}", "absent") for day in (1, 2) for hour in range(0, 24, 4)] + [
                                 ("2026-09-03T00", "appended"), ("2026-09-03T04", "duplicate"), ("2026-09-03T08", "busy"),
                                 ("2026-09-03T12", "absent"), ("2026-09-03T16", "appended"), ("2026-09-03T20", "appended")],
        ("motoko", "evening"): [("2026-09-01", "appended"), ("2026-09-02", "appended"), ("2026-09-03", "failed")],
        ("batou", "evening"): [("2026-09-01", "late"), ("2026-09-02", "paused"), ("2026-09-03", "missed")],
    }


def _open_cell(page: Any, pair: str, title: str) -> str | None:
    """Click *pair*'s cell of *title* and return the detail panel's fields once its title is the cell's.

    A cell is a link to its fragment, and the page shows it on the ``hashchange`` event, which comes after the
    click returns: read at once, the panel may still show the cell before.
    """
    agent, routine = pair.split(":")
    page.click(f"tr[data-pair='{pair}'] a.cell[title='{title}']")
    page.wait_for_function("expected => document.getElementById('detail-title').textContent === expected", arg=f"{agent} {routine} {title}")
    return page.text_content("#detail-fields")


def test_a_cell_opens_to_its_runs_attempts_error_and_duration(browser: Browser, report_file: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = report_file
    page = browser.open(out).page
    panel = _open_cell(page, "motoko:evening", "2026-09-02: appended")
    assert panel is not None
    assert "runs2" in panel  # two runs: the failure, then the rerun that appended
    assert "openai backend: HTTP 503 from the model server" in panel and "backend attempts 3" in panel and "duration 9.0 s" in panel
    assert panel.index("outcome appended") < panel.index("outcome failed")  # newest first
    missed = _open_cell(page, "batou:evening", "2026-09-03: missed")
    assert missed is not None and "downtime" in missed


def test_the_overall_state_and_the_exit_code_are_those_of_status(report_file: tuple[Path, subprocess.CompletedProcess[str]],
                                                                 fleet: tuple[Path, Path]) -> None:
    out, done = report_file
    config, log = fleet
    status = ghostrunner("status", "--config", str(config), "--log", str(log), "--now", NOW, "--json")
    judged = json.loads(status.stdout)
    assert done.returncode == status.returncode == judged["exit_code"] == 1
    raw = out.read_text(encoding="utf-8")
    assert '<span class="verdict" id="verdict">status: something failed (exit 1)</span>' in raw
    for pair in judged["pairs"]:
        assert f"<tr><th>{pair['agent']}</th><th>{pair['routine']}</th><td>{pair['state']}</td>" in raw
    assert done.stderr.startswith(f"wrote {out} (") and done.stderr.count("\n") == 1


def test_stdin_and_stdout_work_as_for_status(fleet: tuple[Path, Path]) -> None:
    config, log = fleet
    healthy = "\n".join(line for line in run_log() if '"failed"' not in line and "pulse-4h" not in line and "batou" not in line) + "\n"
    done = subprocess.run(["ghostrunner", "report", "--config", str(config), "--now", "2026-09-02T23:00:00+00:00", "--out", "-"],
                          input=healthy, capture_output=True, text=True, check=False, timeout=60)
    status = subprocess.run(["ghostrunner", "status", "--config", str(config), "--now", "2026-09-02T23:00:00+00:00"],
                            input=healthy, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == status.returncode != 1
    assert done.stdout.startswith("<!DOCTYPE html>") and f"(exit {status.returncode})" in done.stdout
    empty = ghostrunner("report", "--config", str(config), "--log", str(log), "--out", " ")
    assert empty.returncode == 2 and empty.stderr.startswith("ghostrunner: error: ") and empty.stderr.count("\n") == 1


def test_out_refuses_a_symlink_and_writes_nothing(fleet: tuple[Path, Path], tmp_path: Path) -> None:
    config, log = fleet
    target = tmp_path / "keep.txt"
    target.write_text("keep", encoding="utf-8")
    (tmp_path / "runs.html").symlink_to(target)
    done = ghostrunner("report", "--config", str(config), "--log", str(log), "--now", NOW, "--out", str(tmp_path / "runs.html"))
    assert done.returncode != 0 and done.stderr.startswith("ghostrunner: error: refused ") and "a symlink" in done.stderr
    assert done.stderr.count("\n") == 1 and target.read_text(encoding="utf-8") == "keep"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep.txt", "runs.html"]


def _block(page: str, first_line: str) -> list[str]:
    """The lines of *page*'s shell block that starts with *first_line*."""
    (block,) = [block for block in blocks(page) if block.language == "sh" and block.first_line == first_line]
    return [line for line in block.text.splitlines() if line.strip()]


def _figures_said(page: str, first_line: str) -> list[str]:
    """The figures *page* says the block starting with *first_line* produces: the code spans of "The page it writes says A, B and C, and ..."."""
    text = page_text(page)
    after = text[text.index(first_line):]
    sentence = after[after.index("The page it writes says"):].replace("\n", " ").split(", and ", 1)[0]
    return re.findall(r"`([^`]+)`", sentence)


def test_the_readme_report_commands_run_as_written(browser: Browser, tmp_path: Path) -> None:
    """Both pages' report commands (docs/ghostjournal.md, docs/monitoring.md) run as written in a fresh home, and their pages say what the docs say."""
    env = {key: value for key, value in os.environ.items() if key not in {"XDG_STATE_HOME", "GHOSTRUNNER_CONFIG"}}
    env |= {"HOME": str(tmp_path), "TZ": "UTC"}

    def run(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)

    simulate = "ghostrunner --log-level info simulate --agent motoko --days 28 --start 2026-08-01 2> runs.log"
    for line in _block("docs/ghostjournal.md", simulate):
        done = run(line)
        assert done.returncode == 0, (line, done.stderr)
    opened = browser.open(tmp_path / "motoko.html")
    assert opened.problems() == []
    summary = opened.page.text_content("p.summary")
    said = _figures_said("docs/ghostjournal.md", simulate)
    assert said[0] == "200 entries" and all(figure in summary for figure in said), (said, summary)
    header, shown = header_and_panels(opened.page)
    assert header == shown
    picture = "ghostrunner report --log runs.log --now 2026-08-29T00:00 --out runs.html"
    (line,) = _block("docs/monitoring.md", picture)
    done = run(line)
    status = run("ghostrunner status --log runs.log --now 2026-08-29T00:00")
    assert done.returncode == status.returncode == 0 and done.stderr.startswith("wrote runs.html ("), done.stderr
    runs = browser.open(tmp_path / "runs.html")
    assert runs.problems() == []
    said = _figures_said("docs/monitoring.md", picture)
    assert said == ["status: all well (exit 0)", "appended 200", "late 0"]
    assert runs.page.text_content("#verdict") == said[0]
    legend = runs.page.eval_on_selector_all(".legend > span", "items => items.map(item => item.textContent)")
    assert set(said[1:]) <= set(legend) and runs.page.eval_on_selector_all("a.cell.appended", "cells => cells.length") == 200
    # The block for a live journal, fed the same log on stdin: its exit is status's.
    (command,) = _block("docs/monitoring.md", "journalctl -u ghostrunner -o cat --since -8d | ghostrunner report --since -7d --out runs.html")
    source, report = command.split(" | ", 1)
    assert source.startswith("journalctl -u ghostrunner -o cat")
    done = run(f"cat runs.log | {report} --force")
    status = run("cat runs.log | ghostrunner status")
    assert done.returncode == status.returncode and done.stderr.startswith("wrote runs.html (")

MONTH = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening", "digest"]
"""


def test_a_simulated_month_on_time_is_all_appended_and_agrees_with_status(browser: Browser, tmp_path: Path) -> None:
    """A real simulated month judged at its end: every slot appended (judged on the simulation's clock, as status judges it), status all well."""
    config = write_config(tmp_path, MONTH)
    simulated = ghostrunner("--log-level", "info", "simulate", "--config", str(config), "--agent", "motoko", "--days", "30",
                            "--start", "2026-08-01", cwd=tmp_path, timeout=300)
    assert simulated.returncode == 0, simulated.stderr
    log = tmp_path / "runs.log"
    log.write_text(simulated.stderr, encoding="utf-8")
    out = tmp_path / "runs.html"
    now = "2026-08-31T00:00"
    done = ghostrunner("report", "--config", str(config), "--log", str(log), "--now", now, "--out", str(out))
    status = ghostrunner("status", "--config", str(config), "--log", str(log), "--now", now, "--json")
    judged = json.loads(status.stdout)
    assert done.returncode == status.returncode == judged["exit_code"] == 0, done.stderr
    assert [pair["state"] for pair in judged["pairs"]] == ["ok", "ok", "ok"]
    assert judged["input"]["first"] == "2026-08-01T00:00:00+00:00"  # the log's reach is on the simulation's clock too
    page = browser.open(out).page
    states = page.eval_on_selector_all("table.grid a.cell", "cells => cells.map(cell => cell.className.split(' ')[1])")
    assert len(states) == judged["input"]["runs"] == 30 * 6 + 30 + 5 and set(states) == {"appended"}
    legend = page.text_content(".legend")
    assert legend is not None and f"appended {len(states)}" in legend and "late 0" in legend and "absent 0" in legend


def _late_log(simulated: bool) -> list[str]:
    """motoko's evening of 09-01 appended at 21:00 (on time), of 09-02 at 21:20 (the grace's edge), of 09-03 six hours after it fired."""
    marks = {"simulated": True} if simulated else {}
    return [
        finished_line("motoko", "evening", "2026-09-01", "2026-09-01T21:00:00+00:00", "appended", "2026-09-01T21:00:00Z", **marks),
        finished_line("motoko", "evening", "2026-09-02", "2026-09-02T21:00:00+00:00", "appended", "2026-09-02T21:20:00Z", **marks),
        finished_line("motoko", "evening", "2026-09-03", "2026-09-03T21:00:00+00:00", "appended", "2026-09-04T03:00:00Z", **marks),
    ]


@pytest.mark.parametrize("simulated", [False, True], ids=["real", "simulated"])
def test_a_run_is_late_exactly_when_status_would_have_called_its_slot_overdue_before_it(tmp_path: Path, simulated: bool) -> None:
    """One rule: a run is late when status, judging just before it on its schedule's clock, called its slot overdue; a simulated run's clock is its slot's."""
    config = load_config(write_config(tmp_path, FLEET))
    grace = timedelta(minutes=20)
    lines = [log_line("scheduler.started", "2026-08-31T00:00:00Z", agents=["motoko", "batou"]), *_late_log(simulated)]
    page = build_run_report(config, lines, now=datetime(2026, 9, 4, 4, tzinfo=UTC), grace=grace)
    row = re.search(r'<tr data-group data-pair="motoko:evening">.*?</tr>', page.html.decode())
    assert row is not None
    cells = re.findall(r'<a class="cell (\w+)" href="#s-\d+" data-key="s-\d+" title="(2026-09-0\d): ', row.group())
    expected = ["appended", "appended", "appended"] if simulated else ["appended", "appended", "late"]
    assert [state for state, _ in cells] == expected
    for line, state in zip(lines[1:], expected, strict=True):
        run = json.loads(line)
        finished = run["scheduled"] if simulated else run["timestamp"]
        just_before = datetime.fromisoformat(finished) - timedelta(microseconds=1)
        earlier = [earlier for earlier in lines if json.loads(earlier)["timestamp"] < run["timestamp"]]
        pair = next(pair for pair in build_report(config, read_log(earlier), just_before, grace).pairs if pair.routine == "evening"
                    and pair.agent == "motoko")
        assert (pair.due_slot == run["slot"] and pair.state == "overdue") == (state == "late"), (run["slot"], pair.due_slot, pair.state)
