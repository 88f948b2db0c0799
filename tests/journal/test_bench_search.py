"""``bench/bench_search.py --baseline REV``: both trees answer the same queries, and one table shows them side by side."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_search_bench_prints_both_trees_p50_and_p95_for_each_size_class_and_call() -> None:
    """On two small journals (lexical only: hybrid needs the real model), a row per size, query class and call, with both trees' figures and the load."""
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_search.py"),
            "--baseline",
            "HEAD",
            "--sizes",
            "30,60",
            "--hybrid-sizes",
            "",
            "--queries",
            "3",
            "--rounds",
            "2",
        ],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"baseline [0-9a-f]{7,} beside this tree \(.+\); \d+ CPUs; load average \d+\.\d\d \d+\.\d\d \d+\.\d\d$", lines[0]), (
        lines[0]
    )
    header = next(n for n, line in enumerate(lines) if line.split()[:4] == ["entries", "mode", "queries", "call"])
    assert "baseline" in lines[header] and "this tree p50/p95 ms" in lines[header]
    rows = [line.split() for line in lines[header + 1 : header + 9]]
    assert [row[:4] for row in rows] == [
        [size, "lexical", cls, call] for size in ("30", "60") for cls in ("common", "ordinary") for call in ("search", "prompt_context")
    ]
    for row in rows:  # base p50 / p95, this p50 / p95, the ratio, both CPU medians
        assert row[5] == "/" and row[8] == "/" and row[10].endswith("x"), row
        assert float(row[4]) <= float(row[6]) and float(row[7]) <= float(row[9]) and float(row[10][:-1]) > 0
    assert re.match(r"3 queries of each class per round, 2 rounds; load average at the end \d+\.\d\d", lines[header + 9])
    assert "30 entries, lexical, this tree: open" in result.stderr and "60 entries, lexical, baseline" in result.stderr


def test_the_search_bench_refuses_a_revision_it_cannot_find_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "bench_search.py"), "--baseline", "no-such-revision", "--sizes", "10"],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--baseline 'no-such-revision' is not a revision of this repository" in result.stderr
