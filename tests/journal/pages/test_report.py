"""`ghostjournal report`: one agent's page, checked in a real headless Chromium, and its output file's conventions."""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from tests._browser import Browser
from tests._support import place_entries
from tests._terminal import in_terminal
from tests.journal.pages._figures import header_and_panels

pytestmark = pytest.mark.xdist_group("report-browser")  # one browser for the module, on one worker



def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", *args], check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": "UTC", **(env or {})})


@pytest.fixture(scope="module")
def journal_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """motoko's entries over five days (the fourth empty), with links and a correction; bob's beside them, one linked from motoko's.

    The entry linking to bob's is placed by hand: append refuses such a link, which an earlier version could write.
    """
    root = tmp_path_factory.mktemp("report") / "journal"
    known: dict[str, Any] = {"motoko": [], "bob": []}
    with Journal(root) as journal:
        bob = journal.append({"kind": "note", "agent": "bob", "theme": "bobs orchard", "voice": "Pears ripen slowly in the bobsorchard.",
                              "ts": "2026-08-02T09:00:00+00:00", "tags": ["orchard"]})
        known["bob"].append(bob.id)
        previous: str | None = None
        for day, hours in ((1, (8, 20)), (2, (8, 12, 20)), (3, (9,)), (5, (7, 21))):
            for hour in hours:
                signals: dict[str, Any] = {"novelty": round(hour / 24, 3), "focus": f"focus {hour}"}
                if previous is not None:
                    signals["continuity_refs"] = [previous] + ([bob.id] if day == 3 else [])
                payload = {
                    "kind": "evening" if hour >= 20 else "pulse", "agent": "motoko", "theme": "harbour lights" if hour < 12 else "the net",
                    "voice": f"Day {day} at {hour}: the tide{' kestrelwing' if day == 2 and hour == 8 else ''}.\nSecond line only in the entry.",
                    "ts": f"2026-08-0{day}T{hour:02d}:00:00+00:00", "mood": "calm" if hour < 12 else "uneasy", "tags": ["harbour"],
                    "signals": signals,
                }
                entry = place_entries(journal, [payload])[0] if day == 3 else journal.append(payload)
                known["motoko"].append(entry.id)
                previous = entry.id
        correction = journal.append({
            "kind": "note", "agent": "motoko", "theme": "harbour lights", "voice": "Correction: the tide came at seven, kestrelwing.",
            "ts": "2026-08-05T22:00:00+00:00", "signals": {"supersedes": [known["motoko"][0]]},
        })
        known["motoko"].append(correction.id)
        digest = journal.append({
            "kind": "digest", "agent": "motoko", "theme": "digest: harbour lights", "voice": "Digest of the week.",
            "ts": "2026-08-05T23:00:00+00:00",
            "meta": {"digest": {"focus": [{"focus": "the harbour lights", "count": 4}, {"focus": "tide tables", "count": 2}]}},
        })
        known["motoko"].append(digest.id)
        known["correction"], known["corrected"] = correction.id, known["motoko"][0]
    return root, known


@pytest.fixture(scope="module")
def report_file(journal_root: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, _ = journal_root
    out = tmp_path_factory.mktemp("out") / "motoko.html"
    done = _run("--root", str(root), "report", "--agent", "motoko", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_the_page_loads_without_a_console_error_or_any_request(browser: Browser, report_file: Path) -> None:
    opened = browser.open(report_file)
    assert opened.problems() == []
    assert opened.requests == [opened.url]


def test_the_timeline_shows_each_entry_of_the_agent_by_day(browser: Browser, report_file: Path, journal_root: tuple[Path, dict[str, Any]]) -> None:
    _, known = journal_root
    page = browser.open(report_file).page
    shown = page.eval_on_selector_all("li.entry", "items => items.map(item => item.id)")
    assert sorted(shown) == sorted(f"e-{entry_id}" for entry_id in known["motoko"])
    days = page.eval_on_selector_all("li.day h3", "heads => heads.map(head => head.textContent)")
    assert days == ["2026-08-01 (2)", "2026-08-02 (3)", "2026-08-03 (1)", "2026-08-05 (4)"]
    first = page.text_content(f"#e-{known['motoko'][0]}")
    assert first is not None and "pulse" in first and "harbour lights" in first and "calm" in first and "Day 1 at 8: the tide." in first
    assert "Second line" not in first  # the first line only; the whole entry opens on a click


def test_the_search_box_filters_the_entries_on_the_page(browser: Browser, report_file: Path) -> None:
    page = browser.open(report_file).page
    page.fill("#search", "KestrelWing")
    visible = page.eval_on_selector_all("li.entry:not([hidden])", "items => items.map(item => item.textContent)")
    assert len(visible) == 2 and all("kestrelwing" in item.lower() for item in visible)
    assert page.text_content("#shown") == "2"
    assert page.eval_on_selector_all("li.day:not([hidden]) h3", "heads => heads.map(head => head.textContent)") == [
        "2026-08-02 (3)", "2026-08-05 (4)"]
    page.fill("#search", "kestrelwing correction")  # every word must match
    assert page.eval_on_selector_all("li.entry:not([hidden])", "items => items.length") == 1
    page.fill("#search", "")
    assert page.eval_on_selector_all("li.entry:not([hidden])", "items => items.length") == 10


def test_a_link_opens_the_whole_entry_and_links_follow_continuity_and_corrections(
    browser: Browser, report_file: Path, journal_root: tuple[Path, dict[str, Any]],
) -> None:
    _, known = journal_root
    page = browser.open(report_file).page
    assert page.is_hidden("#detail")
    page.click(f"#e-{known['motoko'][1]} .open")
    assert page.is_visible("#detail")
    panel = page.text_content("#detail")
    assert panel is not None and "Second line only in the entry." in panel and "focus 20" in panel and known["motoko"][1] in panel
    page.click(f"#detail a[href='#e-{known['motoko'][0]}']")  # "continues": the entry before it
    assert page.text_content("#detail-title") == "2026-08-01 08:00 pulse: harbour lights"
    corrected = page.text_content("#detail")
    assert corrected is not None and "corrected by" in corrected
    assert page.get_attribute(f"#e-{known['corrected']}", "class") == "entry superseded"
    page.click(f"#e-{known['correction']} a[href='#e-{known['corrected']}']")
    assert page.text_content("#detail-title") == "2026-08-01 08:00 pulse: harbour lights"


def test_the_charts_hold_one_point_per_day(browser: Browser, report_file: Path) -> None:
    page = browser.open(report_file).page
    days = [(date(2026, 8, 1) + timedelta(days=offset)).isoformat() for offset in range(5)]
    bars = page.eval_on_selector_all("#chart-kinds svg g.col", "cols => cols.map(col => [col.dataset.col, col.dataset.count])")
    assert bars == [[days[0], "2"], [days[1], "3"], [days[2], "1"], [days[3], "0"], [days[4], "4"]]
    points = page.eval_on_selector_all("#chart-novelty svg g.col circle", "marks => marks.map(mark => mark.parentNode.dataset.col)")
    assert points == [days[0], days[1], days[2], days[4]]  # a day without an entry has no point, not a zero
    assert page.eval_on_selector_all("#chart-moods svg g.col", "cols => cols.map(col => col.dataset.col)") == days
    assert page.eval_on_selector_all("#chart-themes svg g.col", "cols => cols.map(col => col.dataset.col)") == ["2026-W31", "2026-W32"]
    focus = page.eval_on_selector_all("#chart-focus svg rect title", "titles => titles.map(title => title.textContent)")
    assert focus == ["2026-08-05, the harbour lights: 4 mentions", "2026-08-05, tide tables: 2 mentions"]


def test_nothing_of_another_agent_is_in_the_file(browser: Browser, report_file: Path, journal_root: tuple[Path, dict[str, Any]]) -> None:
    _, known = journal_root
    raw = report_file.read_text(encoding="utf-8")
    assert known["bob"][0] not in raw and "bob" not in raw.lower() and "orchard" not in raw
    assert "1 link to entries not in this report" in raw  # motoko's link to bob's entry, counted, never shown
    page = browser.open(report_file).page
    assert known["bob"][0] not in page.content()


def test_the_page_carries_a_strict_policy_and_its_data_as_escaped_json(report_file: Path) -> None:
    raw = report_file.read_text(encoding="utf-8")
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', raw)
    assert policy is not None
    directives = dict(part.strip().split(" ", 1) for part in policy.group(1).split(";"))
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'none'" and directives["img-src"] == "'none'"
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+'", directives["script-src"]) and re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+'", directives["style-src"])
    assert "http:" not in raw and "https:" not in raw
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', raw, re.DOTALL)
    assert data is not None and len(json.loads(data.group(1))) == 10


def test_out_replaces_a_file_whole_and_refuses_a_symlink_or_a_fifo(journal_root: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    root, _ = journal_root
    out = tmp_path / "page.html"
    out.write_text("old", encoding="utf-8")
    done = _run("--root", str(root), "report", "--agent", "motoko", "--out", str(out), "--force")  # no earlier report: asked to replace it
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(b"<!DOCTYPE html>") and sorted(path.name for path in tmp_path.iterdir()) == ["page.html"]
    assert out.stat().st_mode & 0o777 == 0o600
    target = tmp_path / "target.txt"
    target.write_text("keep", encoding="utf-8")
    (tmp_path / "link.html").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.html")
    for name, kind in (("link.html", "a symlink"), ("fifo.html", "a FIFO")):
        refused = _run("--root", str(root), "report", "--agent", "motoko", "--out", str(tmp_path / name))
        assert refused.returncode != 0 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("ghostjournal: error: ") and kind in refused.stderr, refused.stderr
    assert target.read_text(encoding="utf-8") == "keep"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo.html", "link.html", "page.html", "target.txt"]


def test_out_dash_writes_the_page_to_stdout_and_an_empty_out_is_a_usage_error(journal_root: tuple[Path, dict[str, Any]]) -> None:
    root, _ = journal_root
    piped = _run("--root", str(root), "report", "--agent", "motoko", "--out", "-")
    assert piped.returncode == 0 and piped.stdout.startswith("<!DOCTYPE html>") and piped.stdout.rstrip().endswith("</html>")
    empty = _run("--root", str(root), "report", "--agent", "motoko", "--out", "")
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1 and "--out" in empty.stderr


def test_a_slow_build_reports_its_progress_on_stderr(journal_root: tuple[Path, dict[str, Any]]) -> None:
    root, _ = journal_root
    done = _run("--root", str(root), "report", "--agent", "motoko", "--out", "-", env={"GHOSTJOURNAL_PROGRESS_AFTER": "0"})
    assert done.returncode == 0
    assert "building the report (entries): 10/10" in done.stderr


def test_an_agent_without_entries_gets_an_empty_page_and_a_warning(journal_root: tuple[Path, dict[str, Any]]) -> None:
    root, _ = journal_root
    done = _run("--root", str(root), "report", "--agent", "nobody", "--out", "-")
    assert done.returncode == 0 and "No entries of this agent in this window." in done.stdout
    assert done.stderr == "ghostjournal: warning: no entries of agent 'nobody' in this window; the report is empty\n"


def test_a_blank_agent_or_a_missing_directory_is_one_line_and_writes_nothing(journal_root: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    root, _ = journal_root
    blank = _run("--root", str(root), "report", "--agent", " ", "--out", str(tmp_path / "page.html"))
    assert blank.returncode == 2 and blank.stderr == "ghostjournal: error: Invalid value for '--agent': expected an agent's name, got ' '\n"
    missing = _run("--root", str(root), "report", "--agent", "motoko", "--out", str(tmp_path / "gone" / "page.html"))
    assert missing.returncode == 74 and missing.stderr.count("\n") == 1 and "create that directory first" in missing.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_page_is_never_written_onto_a_terminal(journal_root: tuple[Path, dict[str, Any]]) -> None:
    root, _ = journal_root
    shown = in_terminal(["ghostjournal", "--root", str(root), "report", "--agent", "motoko"])
    assert shown.returncode == 2 and shown.stdout == ""
    assert shown.stderr.startswith("ghostjournal: error: Invalid value for '--out': stdout is a terminal") and shown.stderr.count("\n") == 1


def test_links_and_corrections_are_drawn_between_the_entries_on_the_page(browser: Browser, report_file: Path,
                                                                          journal_root: tuple[Path, dict[str, Any]]) -> None:
    _, known = journal_root
    page = browser.open(report_file).page
    assert page.eval_on_selector_all("#chart-links line.continues", "lines => lines.length") == 7  # the chain of 8; not day 3's link to bob
    assert page.eval_on_selector_all("#chart-links line.corrects", "lines => lines.length") == 1
    dots = page.eval_on_selector_all("#chart-links a", "links => links.map(link => link.getAttribute('href'))")
    assert sorted(dots) == sorted(f"#e-{entry_id}" for entry_id in known["motoko"])
    page.click(f"#chart-links a[href='#e-{known['correction']}'] circle")
    assert page.text_content("#detail-title") == "2026-08-05 22:00 note: harbour lights"


def test_since_and_until_bound_the_page_and_links_out_of_the_window_are_counted_not_shown(journal_root: tuple[Path, dict[str, Any]]) -> None:
    root, known = journal_root
    done = _run("--root", str(root), "report", "--agent", "motoko", "--since", "2026-08-02", "--until", "2026-08-04", "--out", "-")
    assert done.returncode == 0, done.stderr
    shown = re.findall(r'<li class="entry[^"]*" id="e-([0-9a-f-]+)"', done.stdout)
    assert shown == known["motoko"][2:6]  # the three of 08-02 and the one of 08-03, oldest first
    assert known["motoko"][1] not in done.stdout  # the entry 08-02's first continues, outside the window
    assert "2 links to entries not in this report" in done.stdout  # that one, and day 3's link to bob


#: Berlin leaves summer time on 2026-10-25 at 01:00 UTC: that day has 25 hours, 02:30 twice.
AROUND_THE_CHANGE = ("2026-10-24T21:30:00+00:00", "2026-10-24T22:30:00+00:00", "2026-10-25T00:30:00+00:00", "2026-10-25T01:30:00+00:00",
                     "2026-10-25T22:30:00+00:00", "2026-10-25T23:30:00+00:00")


@pytest.fixture(scope="module")
def changing_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dst") / "journal"
    with Journal(root) as journal:
        for number, moment in enumerate(AROUND_THE_CHANGE):
            journal.append({"kind": "pulse", "agent": "motoko", "theme": f"hour {number}", "voice": f"Entry {number}.", "ts": moment})
    return root


def _days_and_times(page: Any) -> tuple[list[str], list[str], list[list[str]]]:
    days = page.eval_on_selector_all("li.day h3", "heads => heads.map(head => head.textContent)")
    times = page.eval_on_selector_all("li.entry .open", "links => links.map(link => link.textContent.slice(0, 5))")
    bars = page.eval_on_selector_all("#chart-kinds svg g.col", "cols => cols.map(col => [col.dataset.col, col.dataset.count])")
    return days, times, bars


def test_tz_groups_days_in_that_zone_across_a_daylight_saving_change(browser: Browser, changing_root: Path, tmp_path: Path) -> None:
    """--tz Europe/Berlin: the 25-hour 2026-10-25 holds its four entries (02:30 twice), whatever TZ says; the default is TZ's zone."""
    berlin = (["2026-10-24 (1)", "2026-10-25 (4)", "2026-10-26 (1)"], ["23:30", "00:30", "02:30", "02:30", "23:30", "00:30"],
              [["2026-10-24", "1"], ["2026-10-25", "4"], ["2026-10-26", "1"]])
    for name, args, env in (("flag", ["--tz", "Europe/Berlin"], {"TZ": "UTC"}), ("local", [], {"TZ": "Europe/Berlin"})):
        out = tmp_path / f"{name}.html"
        done = _run("--root", str(changing_root), "report", "--agent", "motoko", *args, "--out", str(out), env=env)
        assert done.returncode == 0, done.stderr
        opened = browser.open(out)
        assert opened.problems() == []
        assert _days_and_times(opened.page) == berlin, name
        assert "days in Europe/Berlin" in out.read_text(encoding="utf-8")
    utc = tmp_path / "utc.html"
    assert _run("--root", str(changing_root), "report", "--agent", "motoko", "--out", str(utc)).returncode == 0
    days, _, _ = _days_and_times(browser.open(utc).page)
    assert days == ["2026-10-24 (2)", "2026-10-25 (4)"]  # the same entries on UTC's days


def test_since_and_until_are_read_in_the_tz_given(changing_root: Path) -> None:
    """--since 2026-10-25 --until 2026-10-26 with --tz Europe/Berlin is Berlin's whole 25-hour day, wherever --tz stands on the line."""
    for args in (["--tz", "Europe/Berlin", "--since", "2026-10-25", "--until", "2026-10-26"],
                 ["--since", "2026-10-25", "--until", "2026-10-26", "--tz", "Europe/Berlin"]):
        done = _run("--root", str(changing_root), "report", "--agent", "motoko", *args, "--out", "-")
        assert done.returncode == 0, done.stderr
        assert re.findall(r'<span class="theme">hour (\d)</span>', done.stdout) == ["1", "2", "3", "4"], args


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "../../etc/passwd", "/etc/localtime", "Europe"])
def test_a_tz_that_is_no_zone_is_one_line_and_writes_nothing(changing_root: Path, tmp_path: Path, zone: str) -> None:
    """A --tz that names no IANA zone: exit 2, one line quoting it and saying what is expected, no file."""
    done = _run("--root", str(changing_root), "report", "--agent", "motoko", "--tz", zone, "--out", str(tmp_path / "page.html"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"ghostjournal: error: Invalid value for '--tz': expected an IANA time zone name such as Europe/Berlin or UTC, "
                           f"got {zone!r}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def digests_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fortnight of motoko: pulses in a chain, a correction, and four digests, two of which recorded no focus (one written by hand)."""
    root = tmp_path_factory.mktemp("digests") / "journal"
    with Journal(root) as journal:
        previous: str | None = None
        first: str | None = None
        for day in range(1, 15):
            entry = journal.append({"kind": "pulse", "agent": "motoko", "theme": "the tide", "voice": f"Day {day}.",
                                    "ts": f"2026-08-{day:02d}T09:00:00+00:00", "signals": {"novelty": 0.5} | (
                                        {"continuity_refs": [previous]} if previous else {})})
            previous, first = entry.id, first or entry.id
        journal.append({"kind": "note", "agent": "motoko", "theme": "the tide", "voice": "Correction.", "ts": "2026-08-14T10:00:00+00:00",
                        "signals": {"supersedes": [first]}})
        for day, focus in ((3, [{"focus": "tide tables", "count": 2}]), (7, []), (10, None), (14, [{"focus": "the lights", "count": 1}])):
            meta = {} if focus is None else {"digest": {"focus": focus}}
            journal.append({"kind": "digest", "agent": "motoko", "theme": "digest", "voice": "Digest.", "ts": f"2026-08-{day:02d}T22:00:00+00:00",
                            "meta": meta})
    return root


def test_every_count_in_the_header_is_one_the_panels_show(browser: Browser, digests_root: Path, tmp_path: Path) -> None:
    """Four digests, two without focus, are four columns of the focus panel; links and corrections are those drawn; also in a narrowed window."""
    for name, window in (("all", []), ("narrowed", ["--since", "2026-08-05"])):
        out = tmp_path / f"{name}.html"
        done = _run("--root", str(digests_root), "report", "--agent", "motoko", *window, "--out", str(out))
        assert done.returncode == 0, done.stderr
        opened = browser.open(out)
        assert opened.problems() == []
        header, shown = header_and_panels(opened.page)
        assert header == shown, name
        if name == "all":
            assert header == {"entries": 19, "pulse": 14, "note": 1, "digest": 4, "continuity links": 13, "corrections": 1}
            assert opened.page.text_content("#focus-none") == "2 of the 4 digests recorded no focus (meta.digest.focus): their columns are empty."
            assert "No digest entry" not in opened.page.content()
        else:  # the link of 08-05 to 08-04 and the correction of 08-01 leave the window: counted apart, not as links shown
            assert header["continuity links"] == 9 and header["corrections"] == 0 and header["digest"] == 3
            assert "2 links to entries not in this report" in opened.page.text_content("p.summary")


@pytest.fixture(scope="module")
def long_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An entry every third day for three years, each continuing the one before, one correction a year."""
    root = tmp_path_factory.mktemp("long") / "journal"
    with Journal(root) as journal:
        previous: str | None = None
        payloads = []
        start = date(2025, 1, 1)
        for step in range(0, 3 * 365, 3):
            day = start + timedelta(days=step)
            payloads.append((day, {"kind": "pulse", "agent": "motoko", "theme": "the tide", "voice": f"On {day}.", "ts": f"{day}T09:00:00+00:00"}))
        for day, payload in payloads:
            signals: dict[str, Any] = {"continuity_refs": [previous]} if previous else {}
            entry = journal.append({**payload, "signals": signals})
            if day.month == 6 and day.day <= 3:
                journal.append({"kind": "note", "agent": "motoko", "theme": "the tide", "voice": "Correction.", "ts": f"{day}T10:00:00+00:00",
                                "signals": {"supersedes": [entry.id]}})
            previous = entry.id
    return root


@pytest.mark.parametrize(("since", "columns"), [("2027-10-15", ""), ("2026-01-01", "2026-W01"), (None, "2025-01")],
                         ids=["short", "by-week", "by-month"])
def test_the_links_panel_stays_a_chart_for_long_windows(browser: Browser, long_root: Path, tmp_path: Path, since: str | None, columns: str) -> None:
    """Up to 92 days the links are drawn; past that they are counted per week, past two years per month; the counts are the header's."""
    out = tmp_path / "page.html"
    done = _run("--root", str(long_root), "report", "--agent", "motoko", *(["--since", since] if since else []), "--out", str(out))
    assert done.returncode == 0, done.stderr
    opened = browser.open(out)
    assert opened.problems() == []
    panel = opened.page.text_content("#chart-links")
    assert panel is not None and "Drawn for windows" not in panel
    cols = opened.page.eval_on_selector_all("#chart-links svg g.col", "cols => cols.map(col => col.dataset.col)")
    if since == "2027-10-15":
        assert cols == [] and opened.page.eval_on_selector_all("#chart-links line.continues", "lines => lines.length") > 0
    else:
        assert cols[0] == columns and len(cols) == (105 if since else 36)
    header, shown = header_and_panels(opened.page)
    assert header == shown and header["continuity links"] > 0 and (header["corrections"] > 0) == (since != "2027-10-15")  # corrections: in June
