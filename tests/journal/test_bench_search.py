"""``bench/bench_search.py --baseline REV``: both trees answer the same queries, and one table shows them side by side."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_search_bench_prints_every_trees_p50_p95_and_cpu_for_each_size_class_and_call() -> None:
    """Two baselines (a revision and a checkout's directory) on two small journals (lexical only: hybrid needs the real model).

    A row per size, query class and call, with every tree's figures, each baseline's ratios to this tree's, and the load.
    """
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_search.py"),
            "--baseline",
            "HEAD",
            "--baseline",
            str(BENCH.parent),
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
    assert re.match(
        r"baseline [0-9a-f]{7,}, baseline [0-9a-f]{7,} beside this tree \(.+\); \d+ CPUs; load average \d+\.\d\d \d+\.\d\d \d+\.\d\d$",
        lines[0],
    ), lines[0]
    header = next(n for n, line in enumerate(lines) if line.split()[:4] == ["entries", "mode", "queries", "call"])
    assert lines[header].count("baseline") == 2 and "this tree p50/p95 ms, CPU ms" in lines[header]
    rows = [line.split() for line in lines[header + 1 : header + 9]]
    assert [row[:4] for row in rows] == [
        [size, "lexical", cls, call] for size in ("30", "60") for cls in ("common", "ordinary") for call in ("search", "prompt_context")
    ]
    for row in rows:  # per baseline: p50 / p95, CPU, the p50 and CPU ratios; then this tree's p50 / p95, CPU
        assert len(row) == 4 + 6 + 6 + 4, row
        for at in (4, 10):
            p50, p95, cpu, ratio, cpu_ratio = float(row[at]), float(row[at + 2]), float(row[at + 3]), row[at + 4], row[at + 5]
            assert row[at + 1] == "/" and p50 <= p95 and cpu > 0 and float(ratio[:-1]) > 0 and float(cpu_ratio[:-1]) > 0, row
        assert row[17] == "/" and float(row[16]) <= float(row[18])
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
    assert "--baseline 'no-such-revision' is not a revision of this repository, nor a checkout's directory" in result.stderr


def test_the_search_bench_with_agent_adds_rows_of_agent_scoped_queries_after_the_whole_journals() -> None:
    """--agent: each size also has the common and ordinary queries scoped to an agent, every tree's figures beside them."""
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_search.py"),
            "--baseline",
            str(BENCH.parent),
            "--sizes",
            "40",
            "--hybrid-sizes",
            "",
            "--queries",
            "2",
            "--rounds",
            "1",
            "--agent",
        ],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(n for n, line in enumerate(lines) if line.split()[:4] == ["entries", "mode", "queries", "call"])
    rows = [line.split() for line in lines[header + 1 : header + 9]]
    assert [row[:4] for row in rows] == [
        ["40", "lexical", cls, call]
        for cls in ("common", "ordinary", "common@agent", "ordinary@agent")
        for call in ("search", "prompt_context")
    ]
    for row in rows:  # the baseline's p50 / p95, CPU and ratios; this tree's p50 / p95, CPU
        assert len(row) == 4 + 6 + 4 and float(row[7]) > 0 and float(row[13]) > 0, row
    assert lines[header + 9].startswith("2 queries of each class per round, 1 rounds")


def test_the_search_benchs_agent_scoped_queries_differ_from_the_whole_journals_and_leave_them_as_they_were() -> None:
    """The queries without --agent are the same with it (figures stay comparable); the scoped ones repeat none of them."""
    sys.path.insert(0, str(BENCH))
    try:
        from bench_journal import AGENTS
        from bench_search import queries
    finally:
        sys.path.remove(str(BENCH))
    plain, warm = queries(30, 7)
    scoped, scoped_warm = queries(30, 7, agent=True)
    assert warm == scoped_warm and {cls: scoped[cls] for cls in plain} == plain
    for cls in ("common", "ordinary"):
        asked = scoped[f"{cls}@agent"]
        assert len(asked) == 30 and {agent for _, agent in asked} <= set(AGENTS) and len({agent for _, agent in asked}) > 1
        texts = [text for text, _ in asked]
        assert len(set(texts)) == 30 and not set(texts) & set(plain[cls]) and not set(texts) & set(warm)
