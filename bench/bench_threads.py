#!/usr/bin/env python3
"""Benchmark of one Journal shared by threads: search throughput, and what the call lock costs one thread.

Prints, from one run (the machine is shared and noisy, so compared figures
are taken side by side):

1. searches per second from 1, 2 and 4 threads on one shared instance, next
   to the same threads with one instance each, at ``--entries`` entries;
2. single-threaded append and search latency (p50/p95) of this tree next to
   the tree of ``--baseline`` (by default the commit before the call lock),
   in alternating rounds, each in a fresh process.

    python bench/bench_threads.py                  # 10,000 entries, about two minutes
    python bench/bench_threads.py --entries 2000 --seconds 1 --rounds 1   # smoke run
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
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_journal import Synth, fast_fill, pct

from journal import Journal

REPO = Path(__file__).resolve().parents[1]


def build(root: Path, entries: int, seed: int) -> list[str]:
    """A journal of *entries* synthetic entries (indexed by the open); return query texts."""
    synth = Synth(seed=seed)
    Journal(root).close()
    fast_fill(root, synth, entries)
    with Journal(root) as journal:
        journal.reindex()
    return [text for text, _agent, _cls in synth.queries(200)]


def throughput(root: Path, queries: Sequence[str], threads: int, seconds: float, *, shared: bool) -> float:
    """Searches per second from *threads* threads, on one shared Journal or one Journal each."""
    journals = [Journal(root)] * threads if shared else [Journal(root) for _ in range(threads)]
    counts = [0] * threads
    start, stop = threading.Barrier(threads + 1), threading.Event()

    def run(n: int) -> None:
        journal, i = journals[n], n * 37
        for query in queries[:20]:  # warm each instance's caches before the clock starts
            journal.search(query, k=8)
        start.wait()
        while not stop.is_set():
            journal.search(queries[i % len(queries)], k=8)
            i += 1
            counts[n] += 1

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    stop.wait(seconds)  # the measured interval itself, not a synchronisation
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    for journal in set(journals):
        journal.close()
    return sum(counts) / elapsed


def latency_child(spec: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process, on the journal package found first on sys.path: append and search latency."""
    import journal as package

    root = Path(spec["root"])
    synth = Synth(seed=spec["seed"])
    queries = [text for text, _agent, _cls in synth.queries(spec["searches"])]
    appends, searches = [], []
    with Journal(root) as journal:
        for _ in range(spec["appends"]):
            payload = synth.payload()
            t0 = time.perf_counter()
            journal.append(payload)
            appends.append(time.perf_counter() - t0)
        for query in queries:
            t0 = time.perf_counter()
            journal.search(query, k=8)
            searches.append(time.perf_counter() - t0)
    return {"package": package.__file__, "append": appends, "search": searches}


def baseline_commit(revision: str | None) -> str:
    """*revision*, or the commit before the one that gave the Journal its call lock."""
    if revision is None:
        found = subprocess.run(
            ["git", "log", "--format=%H", "--reverse", "-S", "self.calls = threading.RLock()", "--", "journal/sync/_keeper.py"],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout.split()
        revision = f"{found[0]}^" if found else "HEAD"
    return subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def export_tree(revision: str, into: Path) -> Path:
    """The ``journal`` package of *revision*, extracted under *into*."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision, "journal"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_child(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)])}
    out = subprocess.run([sys.executable, __file__, "--latency-child", json.dumps(spec)], env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def ms(values: Sequence[float]) -> str:
    return f"p50 {pct(values, 50) * 1000:6.2f} ms  p95 {pct(values, 95) * 1000:6.2f} ms"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000, help="journal size for the throughput figures (default 10000)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per throughput figure (default 3)")
    parser.add_argument("--baseline", help="git revision to compare latency with (default: the commit before the call lock)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating latency rounds per tree (default 3)")
    parser.add_argument("--appends", type=int, default=200, help="appends per latency round (default 200)")
    parser.add_argument("--searches", type=int, default=300, help="searches per latency round (default 300)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--latency-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.latency_child:
        print(json.dumps(latency_child(json.loads(args.latency_child))))
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    try:
        root = work / "journal"
        t0 = time.perf_counter()
        queries = build(root, args.entries, args.seed)
        print(f"journal of {args.entries} entries built in {time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs")
        print(f"\nsearches per second (k=8, {args.seconds:g} s each)")
        print(f"{'threads':>8} {'one shared Journal':>20} {'one Journal each':>18}")
        for threads in (1, 2, 4):
            shared = throughput(root, queries, threads, args.seconds, shared=True)
            own = throughput(root, queries, threads, args.seconds, shared=False)
            print(f"{threads:>8} {shared:>20.0f} {own:>18.0f}")

        baseline = baseline_commit(args.baseline)
        trees = {f"baseline {baseline}": export_tree(baseline, work / "baseline"), "this tree": REPO}
        samples: dict[str, dict[str, list[float]]] = {name: {"append": [], "search": []} for name in trees}
        for round_ in range(args.rounds):
            order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
            for name, tree in order:
                fresh = work / f"latency-{round_}-{name.split()[0]}"
                shutil.copytree(root, fresh)
                result = run_child(tree, {"root": str(fresh), "seed": args.seed + 100 + round_, "appends": args.appends, "searches": args.searches})
                assert Path(result["package"]).is_relative_to(tree), f"{name} ran {result['package']}"
                for key in ("append", "search"):
                    samples[name][key].extend(result[key])
                shutil.rmtree(fresh)
        print(f"\nsingle-threaded latency, {args.rounds} alternating rounds of {args.appends} appends and {args.searches} searches at {args.entries} entries")
        for key in ("append", "search"):
            for name in trees:
                values = samples[name][key]
                print(f"  {key:<7} {name:<18} {ms(values)}  mean {statistics.fmean(values) * 1000:6.2f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
