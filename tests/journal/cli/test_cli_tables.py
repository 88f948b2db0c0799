"""The tables ghostjournal prints on a terminal: short ids that get and relate take back, local times, the text given the width.

Each test runs the real command on a pseudo-terminal of a given width (or with ``--text`` and ``COLUMNS``), as a
person at an 80-column terminal sees it; ``--json`` keeps the whole ids and ISO times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.frame.render import clip, text_width
from tests._terminal import in_terminal

GHOSTJOURNAL = [sys.executable, "-m", "journal.cli.cli"]
LONG_VOICE = "The harbor light came back at dusk, slower than last week, and the gulls stayed on the breakwater until the tide turned."


def _run(root: Path, *args: str, columns: int = 80, tz: str = "UTC") -> subprocess.CompletedProcess[str]:
    """The command with its text output at *columns* (``--text`` and ``COLUMNS``, as a terminal of that width gets it)."""
    env = {**os.environ, "COLUMNS": str(columns), "TZ": tz}
    return subprocess.run([*GHOSTJOURNAL, "--root", str(root), *args], capture_output=True, text=True, env=env, check=False)


def _note(agent: str, hours: int, theme: str = "harbor light", voice: str = LONG_VOICE, **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "ts": f"2019-09-01T{hours:02d}:30:00Z", "theme": theme, "voice": voice, **extra}


@pytest.fixture
def harbor(root: Path) -> Path:
    """Three of motoko's entries and one of batou's, with random UUIDs and voices longer than any terminal."""
    with Journal(root) as journal:
        for hours in (1, 2, 3):
            journal.append(_note("motoko", hours))
        journal.append(_note("batou", 4))
    return root


def _text_column(lines: list[str], header: str) -> list[str]:
    """The cells of the last column, *header*, of a table's rows (its header line first, the footer line left out)."""
    start = lines[0].index(header)
    return [line[start:] for line in lines[1:-1]]


@pytest.mark.parametrize(("args", "header", "fixed"), [
    (["search", "harbor light", "--agent", "motoko"], "SNIPPET", ["SCORE", "ID", "TIME", "THEME"]),
    (["search", "harbor light"], "SNIPPET", ["SCORE", "ID", "TIME", "AGENT", "THEME"]),
    (["list", "--agent", "motoko"], "VOICE", ["ID", "TIME", "KIND", "THEME"]),
    (["list"], "VOICE", ["ID", "TIME", "KIND", "AGENT", "THEME"]),
], ids=["search-agent", "search", "list-agent", "list"])
def test_at_80_columns_the_text_gets_what_a_short_id_and_time_leave(harbor: Path, args: list[str], header: str, fixed: list[str]) -> None:
    """80 columns: an 8-character id, a local time to the minute, no agent column with --agent, and the rest for the text.

    With the whole UUID and ISO time the text had 11 columns; now every column but the text is as wide as its
    widest cell (or header), and the text fills the line to the 80th column exactly.
    """
    result = _run(harbor, *args, "--text")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert lines[0].split() == [*fixed, header]
    ids = [line.split()[fixed.index("ID")] for line in lines[1:-1]]
    assert all(len(shown) == 8 for shown in ids), ids
    times = [line[lines[0].index("TIME"):].split("  ")[0] for line in lines[1:-1]]
    assert set(times) <= {"2019-09-01 01:30", "2019-09-01 02:30", "2019-09-01 03:30", "2019-09-01 04:30"}, times
    # every other column is as wide as its header or cells (THEME is "harbor light", SCORE "1.000"), two spaces apart
    widths = {"SCORE": 5, "ID": 8, "TIME": 16, "KIND": 4, "AGENT": 6, "THEME": 12}
    text_width_expected = 80 - sum(widths[name] + 2 for name in fixed)
    assert lines[0].index(header) == 80 - text_width_expected
    documents = json.loads(_run(harbor, *args, "--json").stdout)
    texts = [" ".join((doc["snippet"] if "snippet" in doc else doc["voice"]).split()) for doc in documents]
    assert _text_column(lines, header) == [clip(text, text_width_expected) for text in texts]
    if header == "VOICE":  # the voices are longer than any width left (a snippet is a few words: it shows whole)
        assert all(text_width(text) > text_width_expected for text in texts)
    assert text_width_expected >= (31 if "--agent" in args else 23)  # it was 11 beside the whole UUID and ISO time


def test_a_wider_terminal_gives_the_text_the_width(harbor: Path) -> None:
    """At 200 columns the voice is whole: the extra width goes to the text, not to ids or times."""
    result = _run(harbor, "list", "--agent", "motoko", "--text", columns=200)
    lines = result.stdout.rstrip("\n").splitlines()
    assert _text_column(lines, "VOICE") == [LONG_VOICE] * 3
    assert lines[0].index("VOICE") == 8 + 2 + 16 + 2 + 4 + 2 + 12 + 2


def test_on_a_real_terminal_of_80_columns_the_lines_fit(harbor: Path) -> None:
    """On a pseudo-terminal 80 wide (no COLUMNS), list fills its lines to 80 and no further."""
    result = in_terminal([*GHOSTJOURNAL, "--root", str(harbor), "list", "--agent", "motoko"], columns=80,
                         env={**os.environ, "TZ": "UTC"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert [text_width(line) for line in lines[1:-1]] == [80, 80, 80]


def test_json_keeps_whole_ids_and_iso_times(harbor: Path) -> None:
    """--json (and a pipe) print the very documents as before: the whole UUIDs, ISO 8601 UTC times, the scores as computed."""
    hits = json.loads(_run(harbor, "search", "harbor light", "--json").stdout)
    entries = json.loads(_run(harbor, "list", "--json").stdout)
    assert all(len(hit["entry_id"]) == 36 and hit["entry"]["ts"].endswith(":30:00Z") for hit in hits)
    assert all(len(entry["id"]) == 36 and entry["ts"].startswith("2019-09-01T") for entry in entries)
    assert json.loads(subprocess.run([*GHOSTJOURNAL, "--root", str(harbor), "list"], capture_output=True, text=True, check=True).stdout) == entries


def test_times_are_local_and_the_table_names_the_zone(harbor: Path) -> None:
    """TZ=Asia/Tokyo: 01:30Z is 10:30 there, and the footer says the times are Tokyo's."""
    lines = _run(harbor, "list", "--agent", "motoko", "--text", tz="Asia/Tokyo").stdout.rstrip("\n").splitlines()
    assert [line.split("  ")[1] for line in lines[1:-1]] == ["2019-09-01 12:30", "2019-09-01 11:30", "2019-09-01 10:30"]
    assert lines[-1] == "3 entries; times in Asia/Tokyo"


def test_a_perfect_match_in_a_journal_of_one_entry_scores_1_not_0(root: Path) -> None:
    """FTS5's BM25 gives 'rain roof' against the one entry holding both words about 0 (no word tells entries apart); a
    journal this small weighs them still (journal/indexing/_floored.py), and the table shows each score beside the best's,
    so the match reads 1.000, and the footer says so."""
    with Journal(root) as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "rain", "voice": "Rain on the tin roof."})
    lines = _run(root, "search", "rain roof", "-k", "3", "--agent", "motoko", "--text").stdout.rstrip("\n").splitlines()
    assert lines[1].split()[0] == "1.000"
    assert lines[-1].endswith("scores relative to the best (1.000)")
    raw = json.loads(_run(root, "search", "rain roof", "--json").stdout)[0]["score"]
    assert raw > 0.0005  # the JSON keeps the score as computed: FTS5's alone would print as 0.000


def test_relate_takes_a_short_id_and_shows_the_agent_only_unscoped(harbor: Path) -> None:
    """relate with the 8-character id a table showed: the same hits as with the whole id; AGENT shown only without --agent."""
    entries = json.loads(_run(harbor, "list", "--agent", "motoko", "--json").stdout)
    whole, short = entries[0]["id"], entries[0]["id"][:8]
    assert json.loads(_run(harbor, "relate", short, "--json").stdout) == json.loads(_run(harbor, "relate", whole, "--json").stdout)
    unscoped = _run(harbor, "relate", short, "--text").stdout.splitlines()
    scoped = _run(harbor, "relate", short, "--agent", "motoko", "--text").stdout.splitlines()
    assert unscoped[0].split() == ["REASON", "SCORE", "ID", "TIME", "AGENT", "THEME", "VOICE"]
    assert scoped[0].split() == ["REASON", "SCORE", "ID", "TIME", "THEME", "VOICE"]
    assert [text_width(line) for line in scoped[1:-1]] == [80] * (len(scoped) - 2)


def test_get_takes_the_short_id_a_table_shows(harbor: Path) -> None:
    """Every id list shows, typed back into get, is that row's entry."""
    entries = json.loads(_run(harbor, "list", "--json").stdout)
    shown = [line.split()[0] for line in _run(harbor, "list", "--text").stdout.splitlines()[1:-1]]
    assert [json.loads(_run(harbor, "get", short).stdout)["id"] for short in shown] == [entry["id"] for entry in entries]


def test_short_ids_grow_where_ids_share_their_start(root: Path) -> None:
    """Supplied ids that share a start: each is shown as long as it takes to name it alone, a short or contained id whole."""
    ids = ["aaaaaaaa-1", "aaaaaaaa-2", "aaaaaaab", "abc", "abc-longer-id"]
    with Journal(root) as journal:
        for hours, entry_id in enumerate(ids):
            journal.append({**_note("motoko", hours), "id": entry_id})
    lines = _run(root, "list", "--text").stdout.rstrip("\n").splitlines()
    assert sorted(line.split()[0] for line in lines[1:-1]) == ["aaaaaaaa-1", "aaaaaaaa-2", "aaaaaaab", "abc", "abc-long"]
    for entry_id, short in [("abc", "abc"), ("abc-longer-id", "abc-long"), ("aaaaaaab", "aaaaaaab")]:
        assert json.loads(_run(root, "get", short).stdout)["id"] == entry_id


@pytest.mark.parametrize(("command"), ["get", "relate"])
def test_a_prefix_of_several_ids_is_one_line_naming_it_and_the_count_exit_2(root: Path, command: str) -> None:
    with Journal(root) as journal:
        for hours, entry_id in enumerate(["cafe-1", "cafe-2", "cafe-3", "dome-1"]):
            journal.append({**_note("motoko", hours), "id": entry_id})
    result = _run(root, command, "cafe")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "ghostjournal: error: entry id prefix 'cafe' matches 3 entries; give more of the id, or the whole of it\n"
    unknown = _run(root, command, "cab")
    assert unknown.returncode == 3 and unknown.stdout == ""
    assert unknown.stderr == "ghostjournal: error: no entry with id 'cab': it is no entry's id nor the start of one (it matches 0 entries)\n"
    bad = _run(root, command, "../x")
    assert bad.returncode == 65 and len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
