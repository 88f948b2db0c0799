"""verify by two trees on the same journals: its time and its peak memory, this tree's beside a baseline revision's.

Each size's journal is built once as ``bench_carry.py`` builds it (the
synthetic agents of ``bench_journal.py`` written straight to their files,
then ``reindex()``). Each verify runs in a fresh child process whose
``PYTHONPATH`` is the tree's, the trees taking turns round by round; the
child prints its wall and CPU time, its own peak RSS (``VmHWM``: wait4's
``ru_maxrss`` would count this process's memory) and the load average as it
ends, so that figures of a shared machine are read beside its load:

    python bench/bench_verify.py --baseline d5c1783                 # sizes 10000,100000
    python bench/bench_verify.py --baseline HEAD --sizes 300        # a smoke run
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _child(root: Path) -> None:
    import journal
    from journal import Journal

    started, cpu = time.perf_counter(), time.process_time()
    with Journal(root, repair_index=False) as opened:
        report = opened.verify()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    status = Path("/proc/self/status").read_text(encoding="ascii")
    peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_mib": peak_kib / 1024, "problems": len(report.problems),
                      "entries": report.entries, "load_average": os.getloadavg()[0], "package": journal.__file__}))


def _baseline_tree(revision: str, into: Path) -> tuple[str, Path]:
    """The short commit of *revision* and its ``journal`` package, extracted under *into*."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "journal"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit, into


def _verify(tree: Path, root: Path, work: Path) -> dict[str, Any]:
    # Started in the work directory: the child's own directory (bench/) holds no journal package, so PYTHONPATH's is the one imported.
    done = subprocess.run([sys.executable, __file__, "--child", str(root)], env={**os.environ, "PYTHONPATH": str(tree)}, cwd=work,
                          capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert Path(result.pop("package")).is_relative_to(tree), f"{tree} did not run its own packages"
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", help="the git revision whose journal package is the baseline")
    parser.add_argument("--sizes", default="10000,100000", help="journal sizes, comma-separated (default 10000,100000)")
    parser.add_argument("--rounds", type=int, default=1, help="verifies per tree and size (default 1)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--child", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(Path(args.child))
        return 0
    if not args.baseline:
        parser.error("--baseline REV is required: the revision to measure this tree against (d5c1783, HEAD, ...)")
    from bench_carry import _build  # not in the child: it would import this tree's journal package there

    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    work = Path(tempfile.mkdtemp(prefix="ghostjournal-bench-verify-"))
    try:
        commit, baseline = _baseline_tree(args.baseline, work / "baseline")
        trees = {f"baseline {commit}": baseline, "this tree": REPO}
        print(f"verify, {args.rounds} round(s) per tree, the trees taking turns; peak RSS is the child's VmHWM", flush=True)
        print(f"{'entries':>8}  {'tree':<18} {'seconds':>8} {'CPU s':>8} {'peak MiB':>9} {'problems':>9}  load average", flush=True)
        for size in sizes:
            root = work / f"j{size}"
            _build(root, size, args.seed)
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for round_ in range(args.rounds):
                for name, tree in list(trees.items())[:: 1 if round_ % 2 == 0 else -1]:
                    run = _verify(tree, root, work)
                    runs[name].append(run)
                    print(f"{size:>8}  {name:<18} {run['seconds']:>8.1f} {run['cpu_seconds']:>8.1f} {run['peak_mib']:>9.1f} "
                          f"{run['problems']:>9}  {run['load_average']:.1f}", flush=True)
            (base_s, ours_s), (base_mib, ours_mib) = (
                [statistics.median(run[key] for run in runs[name]) for name in trees] for key in ("seconds", "peak_mib"))
            print(f"{size:>8}  this tree against the baseline: {ours_s / base_s:.2f}x the time, {ours_mib / base_mib:.2f}x the peak "
                  f"memory (medians)", flush=True)
            shutil.rmtree(root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
