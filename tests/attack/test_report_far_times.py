"""ghostjournal report of entries at the edges of the calendar, which the journal accepts: year 1 and year 9999.

One entry far off made the charts lay out every empty day between (millions), and a time whose local date falls
beyond 9999-12-31 (late on the last day, east of UTC) ended the command with a traceback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from journal.pages.report import CHARTED_DAYS

FAR = ("0001-01-01T00:30:00+00:00", "2026-08-01T09:00:00+00:00", "9999-12-31T23:00:00+00:00")


@pytest.fixture(scope="module")
def far_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("far") / "journal"
    with Journal(root) as journal:
        ids = [journal.append({"kind": "note", "agent": "motoko", "theme": "edge", "voice": f"Written for {ts}.", "ts": ts}).id for ts in FAR]
    return root, ids


def _report(root: Path, out: Path, zone: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "--root", str(root), "report", "--agent", "motoko", "--out", str(out)], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "TZ": zone})


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "America/Adak"])
def test_entries_of_year_1_and_9999_make_a_page_of_their_entries_not_of_every_day_between(far_journal: tuple[Path, list[str]], tmp_path: Path,
                                                                                           zone: str) -> None:
    root, ids = far_journal
    out = tmp_path / "motoko.html"
    done = _report(root, out, zone)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    page = out.read_text(encoding="utf-8")
    assert all(f'id="e-{entry_id}"' in page for entry_id in ids)
    assert f"charts are drawn for windows of {CHARTED_DAYS} days at most" in page
    # Each day laid out is at least a bar slot in the kinds chart: a page under a megabyte lays out far fewer than the 3.65 million between.
    assert out.stat().st_size < 1_000_000


def test_a_window_of_ordinary_length_still_gets_its_charts(far_journal: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, _ = far_journal
    out = tmp_path / "window.html"
    done = subprocess.run(["ghostjournal", "--root", str(root), "report", "--agent", "motoko", "--since", "2026-01-01", "--until", "2027-01-01",
                           "--out", str(out)], capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "TZ": "UTC"})
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert 'id="chart-kinds"' in page and "charts are drawn for windows" not in page
