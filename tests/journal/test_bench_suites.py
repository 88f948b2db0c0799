"""The freshness suites and the abstention figures' arithmetic: the data keeps its two shapes, and the measures measure."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from journal import Journal

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(BENCH))
    try:
        import abstention
        import freshness

        yield {"freshness": freshness, "abstention": abstention}
    finally:
        sys.path.remove(str(BENCH))


def test_the_suites_hold_forty_scenarios_of_each_shape_in_the_shape_described(bench: dict[str, ModuleType]) -> None:
    """Each updated fact: 2-3 versions weeks apart, the newest the answer, a neutral and a presupposing probe; each trap: the oldest is the answer."""
    scenarios = bench["freshness"].load_scenarios()
    shapes = [s["shape"] for s in scenarios]
    assert shapes.count("updated-fact") >= 40 and shapes.count("recency-trap") >= 40
    for scenario in scenarios:
        entries = scenario["entries"]
        times = [datetime.fromisoformat(e["ts"]) for e in entries]
        assert times == sorted(times), scenario["id"]
        assert all("supersedes" not in (e.get("signals") or {}) for e in entries)  # the point: no explicit link
        if scenario["shape"] == "updated-fact":
            assert 2 <= len(entries) <= 3 and scenario["answer"] == entries[-1]["id"]
            assert all(later - earlier >= timedelta(weeks=3) for earlier, later in itertools.pairwise(times)), scenario["id"]
            assert sorted(p["style"] for p in scenario["probes"]) == ["neutral", "presupposes-old"]
        else:
            assert 3 <= len(entries) <= 5 and scenario["answer"] == entries[0]["id"] and times[1] > times[0]
            assert {p["style"] for p in scenario["probes"]} == {"trap"}


def test_every_suite_entry_is_a_valid_entry_and_the_ids_are_unique(bench: dict[str, ModuleType], tmp_path: Path) -> None:
    """The suites load into a real journal through the public append, as the bench loads them."""
    scenarios = bench["freshness"].load_scenarios()
    bench["freshness"].build_journal(tmp_path / "journal", scenarios, background=0)
    with Journal(tmp_path / "journal") as journal:
        assert journal.digest().count == sum(len(s["entries"]) for s in scenarios)


def _hit(entry_id: str, days: int) -> Any:
    return SimpleNamespace(entry_id=entry_id, entry=SimpleNamespace(ts=(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=days)).isoformat()))


def test_a_probe_passes_only_with_the_answer_above_every_other_entry_of_its_scenario(bench: dict[str, ModuleType]) -> None:
    passes = bench["freshness"].probe_passes
    scenario = {"answer": "b", "entries": [{"id": "a"}, {"id": "b"}]}
    assert passes(["x", "b", "y", "a"], scenario) and passes(["b"], scenario)
    assert not passes(["a", "b"], scenario) and not passes(["a", "x"], scenario) and not passes([], scenario)


def test_newer_first_moves_a_newer_near_duplicate_above_an_older_hit_and_nothing_else(bench: dict[str, ModuleType]) -> None:
    import numpy as np

    hits = [_hit("old", 0), _hit("unrelated", 5), _hit("new", 9)]
    vectors = {"old": np.array([1.0, 0.0]), "new": np.array([0.8, 0.6]), "unrelated": np.array([0.0, 1.0])}
    assert bench["freshness"].newer_first(hits, vectors, 0.75) == ["new", "old", "unrelated"]
    assert bench["freshness"].newer_first(hits, vectors, 0.9) == ["old", "unrelated", "new"]


def test_auroc_and_the_floor_calibration(bench: dict[str, ModuleType]) -> None:
    """AUROC is 1 when separated, 0 reversed, 0.5 for ties; the floor is the highest step that at most 1 % fall below."""
    auroc, calibrate = bench["abstention"].auroc, bench["abstention"].calibrate
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0 and auroc([0.1], [0.9]) == 0.0 and auroc([0.5, 0.5], [0.5]) == 0.5
    assert auroc([0.3, 0.9], [0.5, 0.1]) == 0.75
    answerable = [0.25] + [0.5] * 99  # one in a hundred may fall below
    assert calibrate(answerable) == 0.5
    assert calibrate([0.25, 0.26] + [0.5] * 98) == 0.26  # two below 0.27 would be two in a hundred


def test_the_long_lived_bench_runs_as_the_readme_gives_it_and_prints_each_ways_figures(tmp_path: Path) -> None:
    """``python bench/bench_long_lived.py`` (on 4 journals here) prints an RSS row (anonymous + file pages) every --every journals and each way's growth."""
    completed = subprocess.run([sys.executable, str(BENCH / "bench_long_lived.py"), "--journals", "4", "--entries", "1", "--every", "2"],
                               check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("RSS (MiB")))
    rows = [line.split() for line in lines[header + 2:header + 5]]
    assert [row[0] for row in rows] == ["0", "2", "4"] and all(float(value) > 0 for row in rows for value in row[1:] if value != "+")
    assert [line.split(":")[0] for line in lines[header + 5:]] == ["shared encoder", "own encoder"]


def test_the_readme_reindex_bench_runs_both_trees_and_prints_their_ratio() -> None:
    """``bench/bench_encoder.py --reindex-baseline REV`` (the README's command, on a small journal) reindexes with NN by both trees."""
    result = subprocess.run([sys.executable, str(BENCH / "bench_encoder.py"), "--reindex-baseline", "HEAD", "--reindex-entries", "6"],
                            cwd=BENCH.parent, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if " entries/s " in line]
    assert [row.split()[0] for row in rows] == ["baseline", "this"]
    assert re.search(r"this tree against the baseline: \d+\.\d\dx as fast", result.stdout)


@pytest.mark.long
def test_the_runner_bench_times_the_hybrid_year_of_both_trees_alone_with_their_peak_memory() -> None:
    """``bench/bench_runner.py --baseline REV --year-only`` (the docs' command; ``--quick``: 30 days) simulates by each tree and nothing else."""
    result = subprocess.run([sys.executable, str(BENCH / "bench_runner.py"), "--baseline", "HEAD", "--year-only", "--quick"],
                            cwd=BENCH.parent, capture_output=True, text=True, check=False, timeout=1200)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stderr.splitlines() if line.startswith("30-day")]
    assert [row.split(", ")[1].split()[0] for row in rows] == ["baseline", "this"]  # the first round starts with the baseline
    assert all(re.search(r"214 runs in [\d.]+ s, [\d.]+ s of CPU, peak RSS [\d.]+ MB", row) for row in rows)
    refused = subprocess.run([sys.executable, str(BENCH / "bench_runner.py"), "--year-only"], capture_output=True, text=True, check=False, timeout=300)
    assert refused.returncode == 2 and "--year-only compares the hybrid year with --baseline REV's" in refused.stderr.splitlines()[-1]


def test_the_carry_bench_prints_each_commands_time_and_memory_beside_the_reindex() -> None:
    """``bench/bench_carry.py`` on a small journal prints one row: the reindex, the tree, then verify, export and import, each with seconds and MiB."""
    result = subprocess.run([sys.executable, str(BENCH / "bench_carry.py"), "--sizes", "200"], capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.strip().splitlines()
    assert header.split()[:4] == ["entries", "reindex", "tree", "verify"] and "import s, peak MiB" in header and "import entries/s" in header
    assert row.split()[:4] == ["200", row.split()[1], "s", "this"] and row.count(" s ") + row.count(" s\t") >= 3 and row.count("MiB") == 3
    assert '"appended": 200' in result.stderr and '"problems": 0' in result.stderr
    assert "import reads/writes" in header and re.search(r" \d+\.\d\dM/\d+\.\d\dM ", row)  # the import's read and write calls


def test_the_verify_bench_runs_both_trees_and_prints_their_time_and_memory() -> None:
    """``bench/bench_verify.py --baseline REV`` (on a small journal) verifies it by both trees, a row each, then their ratios."""
    result = subprocess.run([sys.executable, str(BENCH / "bench_verify.py"), "--baseline", "HEAD", "--sizes", "200"],
                            cwd=BENCH.parent, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.split()[:1] == ["200"]]
    assert [row[1] for row in rows] == ["baseline", "this", "this"]
    assert [row[-2] for row in rows[:2]] == ["0", "0"]  # the problems column: the journal is clean
    assert re.search(r"this tree against the baseline: \d+\.\d\dx the time, \d+\.\d\dx the peak memory", result.stdout)
