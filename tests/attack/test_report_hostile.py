"""Both reports fed hostile text, opened in a real headless Chromium: no script of the data runs, nothing is requested, all is shown as text.

Entry text is written by a language model and log lines by anything that
writes to the journal, so both are attacker-controlled: markup that would
run a script or load an image if it were parsed, a `</script>` that would
close the page's data, `<!--`, `javascript:` links, line and paragraph
separators, lone surrogates (refused by the journal, kept escaped by the
log reader) and voices of a mebibyte.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from journal.errors import EntryValidationError
from journal.frame.htmlpage import embed_json
from tests._browser import Browser, Opened
from tests._support import write_config

pytestmark = pytest.mark.xdist_group("report-browser")

#: Each would set window.__pwned if the page ever parsed it as markup or followed it as a link.
ATTACKS = (
    "<script>window.__pwned = 'script'</script>",
    "\"><img src=x onerror=\"window.__pwned = 'img'\">",
    "'><svg onload=\"window.__pwned = 'svg'\"></svg>",
    "</script><script>window.__pwned = 'close'</script>",
    "<!--<script>window.__pwned = 'comment'</script>",
    "javascript:window.__pwned = 'link'",
    "</style><style>body { background: url(http://127.0.0.1:9/css) }</style>",
    'line\u2028separator\u2029paragraph</textarea><iframe src="http://127.0.0.1:9/frame"></iframe>',
)



def _assert_inert(opened: Opened) -> None:
    page = opened.page
    assert page.evaluate("window.__pwned") is None
    assert opened.problems() == []  # no console error, no policy violation (nothing was even tried), no request
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.querySelectorAll('iframe, object, embed, img, link, base').length") == 0
    assert page.evaluate("document.scripts.length") == 2  # the page's data and its one script
    assert page.evaluate("Array.from(document.querySelectorAll('[href]')).every(a => a.getAttribute('href').startsWith('#'))")


@pytest.fixture(scope="module")
def hostile_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "journal"
    with Journal(root) as journal:
        first = None
        for number, attack in enumerate(ATTACKS):
            label = attack.replace("\u2028", " ").replace("\u2029", " ")  # labels take no line separators; voices do
            entry = journal.append({
                "kind": "note", "agent": "motoko", "theme": label[:120], "voice": f"{attack}\n{attack}", "mood": label[:60],
                "tags": [label[:60]], "ts": f"2026-08-0{1 + number % 3}T1{number}:00:00+00:00",
                "anchors": [{"type": "url", "ref": attack, "label": label[:60]}],
                "signals": {"focus": label[:120], "novelty": 0.5, **({"continuity_refs": [first]} if first else {})},
                "meta": {"note": attack, "digest": {"focus": [{"focus": label[:120], "count": 2}]}},
            })
            first = first or entry.id
        big = ("<img src=x onerror=window.__pwned=1></script><!--\u2028" * 20000)[: 1000 * 1000]
        journal.append({"kind": "note", "agent": "motoko", "theme": "big", "voice": big, "ts": "2026-08-04T10:00:00+00:00"})
        with pytest.raises(EntryValidationError, match="lone surrogates"):
            journal.append({"kind": "note", "agent": "motoko", "theme": "surrogate", "voice": "half \ud800 a pair"})
    return root


def test_hostile_entries_run_no_script_and_request_nothing(browser: Browser, hostile_journal: Path, tmp_path: Path) -> None:
    out = tmp_path / "hostile.html"
    done = subprocess.run(["ghostjournal", "--root", str(hostile_journal), "report", "--agent", "motoko", "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=120, env={**os.environ, "TZ": "UTC"})
    assert done.returncode == 0, done.stderr
    opened = browser.open(out)
    _assert_inert(opened)
    page = opened.page
    assert page.eval_on_selector_all("li.entry", "items => items.length") == len(ATTACKS) + 1
    for key in page.eval_on_selector_all("li.entry", "items => items.map(item => item.id)"):
        page.evaluate(f"location.hash = {json.dumps('#' + key)}")
        page.wait_for_function(f"document.getElementById('detail-title').textContent !== '' && !document.getElementById('detail').hidden && "
                               f"document.querySelector('a[href=\"#{key}\"]') !== null")
        voice = page.text_content("#detail pre")
        assert voice is not None
        if "big" not in (page.text_content("#detail-title") or ""):
            assert voice.split("\n")[0] in ATTACKS  # shown as the very text written
    page.fill("#search", "</script>")
    expected = sum("</script>" in attack for attack in ATTACKS) + 1  # and the big voice
    assert page.eval_on_selector_all("li.entry:not([hidden])", "items => items.length") == expected
    _assert_inert(opened)


def test_hostile_log_lines_run_no_script_and_request_nothing(browser: Browser, tmp_path: Path) -> None:
    config = write_config(tmp_path, '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\n')
    lines = []
    for number, attack in enumerate(ATTACKS):
        agent = f"{attack}\ud800"
        slot = f"2026-08-0{1 + number % 3}{attack}"
        lines.append(json.dumps({
            "event": "run.finished", "level": "error", "timestamp": f"2026-08-0{1 + number % 3}T21:00:05Z", "run_id": attack, "agent": agent,
            "routine": attack, "slot": slot, "client_key": f"{agent}:{attack}:{slot}", "scheduled": "2026-08-01T21:00:00+00:00",
            "outcome": "failed", "duration_ms": 5.0, "error": attack + "\u2028\ud800" + "x" * (1 << 16), "dry_run": False,
        }))
        lines.append(json.dumps({"MESSAGE": [*attack.encode("utf-8"), 0xFF], "PRIORITY": "3"}))
    lines.append(json.dumps({"event": "scheduler.missed", "level": "info", "timestamp": "2026-08-03T22:00:00Z", "agent": ATTACKS[1],
                             "routine": ATTACKS[3], "slot": ATTACKS[5], "reason": ATTACKS[0]}))
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "runs.html"
    done = subprocess.run(["ghostrunner", "report", "--config", str(config), "--log", str(log), "--now", "2026-08-04T00:00:00+00:00",
                           "--out", str(out)], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 3, done.stderr  # status: the configured pair has no run (overdue); the hostile pairs are not configured
    assert out.read_bytes().decode("utf-8")  # valid UTF-8 whatever the log held
    opened = browser.open(out)
    _assert_inert(opened)
    page = opened.page
    assert page.eval_on_selector_all("tr[data-pair='motoko:evening'] a.cell", "cells => cells.map(cell => cell.className)") == [
        "cell absent"] * 2  # the evenings due since the log begins (08-01 21:00:05), of which it holds nothing
    cells = page.eval_on_selector_all("tr:not([data-pair='motoko:evening']) a.cell", "cells => cells.map(cell => cell.dataset.key)")
    assert len(cells) == len(ATTACKS) + 1  # each hostile run, and the hostile missed slot
    for key in cells:
        page.evaluate(f"location.hash = {json.dumps('#' + key)}")
        page.wait_for_function("!document.getElementById('detail').hidden")
        shown = page.text_content("#detail") or ""
        assert any(attack.split("\u2028")[0] in shown for attack in ATTACKS)
    _assert_inert(opened)


@pytest.mark.parametrize("value", [*ATTACKS, "\ud800", "a\udfffb", "\u2028\u2029", "<\u2028/script>"])
def test_embedded_json_can_close_no_element_and_reads_back_the_same(value: str) -> None:
    encoded = embed_json({"text": value, "list": [value]})
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded and "\u2028" not in encoded and "\u2029" not in encoded
    encoded.encode("utf-8")  # no lone surrogate is left to break the file
    assert json.loads(encoded) == {"text": value, "list": [value]}
