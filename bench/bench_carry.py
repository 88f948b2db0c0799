"""Checking and carrying a journal: verify, export and import, their times and peak memory at several sizes.

Each size's journal is written straight to its entry files (``fast_fill`` of
``bench_journal.py``, the same synthetic agents) and indexed with
``reindex()``, whose time is printed as the baseline of the same run. Every
measured command then runs in a fresh child process, which reports its wall
time and its own peak RSS, so that no figure carries another's memory:

    python bench/bench_carry.py                  # sizes 10000,100000
    python bench/bench_carry.py --sizes 2000     # a smoke run
    python bench/bench_carry.py --import-up-to 10000   # import only at 10k

With ``--baseline TREE`` (a checkout of another version, say a ``git
worktree`` of an older commit) every command runs twice, once with this
tree's ``journal`` and once with TREE's (through ``PYTHONPATH``), one after
the other on the same journal and the same export, and each row says which
tree it is, with the load average when it ended; ``--operations`` picks the
commands:

    python bench/bench_carry.py --operations import --baseline /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_journal import Synth, fast_fill

from journal import Journal
from journal.indexing import IndexSnapshot


def _verify(root: Path, scratch: Path) -> dict[str, Any]:
    # The check of each entry's words (the text indexes' postings) is timed on its own: the ratio is verify's time to its time without it.
    spent = [0.0]

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        return run

    for name in ("postings", "postings_by_row"):
        setattr(IndexSnapshot, name, timed(getattr(IndexSnapshot, name)))
    started = time.perf_counter()
    with Journal(root, repair_index=False) as journal:
        report = journal.verify()
    seconds = time.perf_counter() - started
    return {
        "problems": len(report.problems),
        "entries": report.entries,
        "words_s": round(spent[0], 2),
        "ratio_to_verify_without_words": round(seconds / (seconds - spent[0]), 2),
    }


def _export(root: Path, scratch: Path) -> dict[str, Any]:
    with Journal(root) as journal, (scratch / "export.jsonl").open("wb") as out:
        manifest = journal.export(out)
    return {"entries": manifest.entries, "bytes": (scratch / "export.jsonl").stat().st_size}


def _import(root: Path, scratch: Path) -> dict[str, Any]:
    # A new journal each time, so that the trees compared each import into an empty one (removed by _child once timed).
    with Journal(scratch / "imported") as journal, (scratch / "export.jsonl").open("rb") as source:
        summary = journal.import_stream(source)
    return {"appended": summary.appended, "duplicate": summary.duplicate, "conflict": summary.conflict}


#: What a child measures, in this order: name -> function of (journal root, the size's scratch directory) returning facts to print.
#: The import reads the export's file into a new journal.
OPERATIONS: dict[str, Callable[[Path, Path], dict[str, Any]]] = {"verify": _verify, "export": _export, "import": _import}


def _child(operation: str, root: Path, scratch: Path) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    facts = OPERATIONS[operation](root, scratch)
    seconds = time.perf_counter() - started
    # The process's own CPU time (every thread's, user and system): what the command costs whatever else shares the machine.
    facts["cpu_s"] = round(time.process_time() - cpu, 2)
    shutil.rmtree(scratch / "imported", ignore_errors=True)
    # VmHWM, not getrusage's ru_maxrss: after a vfork and exec, Linux's ru_maxrss still counts the parent's memory.
    status = Path("/proc/self/status").read_text(encoding="ascii")
    peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    # The read and write calls the process made (every thread's): SQLite reads and writes a page a call, so these count the
    # index pages an import moved, a figure no load changes.
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines())
    facts["read_calls"], facts["write_calls"] = int(io["syscr"]), int(io["syscw"])
    print(json.dumps({"seconds": round(seconds, 2), "peak_mib": round(peak_kib / 1024, 1), **facts}))


def _measure(operation: str, root: Path, scratch: Path, tree: Path) -> dict[str, Any]:
    """Run *operation* in a child whose ``journal`` is *tree*'s; its facts, with the load average when it ended."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", operation, str(root), str(scratch)], capture_output=True, text=True, check=False, env=env
    )
    load = "/".join(f"{value:.1f}" for value in os.getloadavg())
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}", "load": load}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if operation == "import":
        result["entries_per_s"] = round((result["appended"] + result["duplicate"] + result["conflict"]) / result["seconds"])
    return {**result, "load": load}


def _build(root: Path, count: int, seed: int) -> float:
    Journal(root).close()
    fast_fill(root, Synth(seed=seed), count)
    started = time.perf_counter()
    with Journal(root) as journal:
        journal.reindex()
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="journal sizes, comma-separated (default 10000,100000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--import-up-to", type=int, default=None, metavar="N", help="measure import only at sizes up to N")
    parser.add_argument(
        "--operations", default=",".join(OPERATIONS), help=f"commands to measure, comma-separated (default {','.join(OPERATIONS)})"
    )
    parser.add_argument("--baseline", type=Path, default=None, metavar="TREE", help="also measure each command with TREE's journal package")
    parser.add_argument("--child", nargs=3, metavar=("OPERATION", "ROOT", "SCRATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        operation, root, scratch = args.child
        _child(operation, Path(root), Path(scratch))
        return 0
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    operations = [name for name in args.operations.split(",") if name.strip()]
    unknown = sorted(set(operations) - set(OPERATIONS))
    if unknown:
        parser.error(f"--operations: expected names among {', '.join(OPERATIONS)}, got {', '.join(unknown)}")
    if "import" in operations and "export" not in operations:
        operations.insert(0, "export")  # the import reads the export's file
    here = Path(__file__).resolve().parent.parent
    trees = [("this", here)] + ([("baseline", args.baseline.resolve())] if args.baseline is not None else [])
    base = Path(tempfile.mkdtemp(prefix="ghostjournal-bench-carry-"))
    try:
        print(
            f"{'entries':>8}  {'reindex':>9}  {'tree':>8}  "
            + "  ".join(f"{name + ' s, peak MiB':>24}" for name in operations)
            + f"  {'import entries/s':>16}  {'import CPU s':>12}  {'import reads/writes':>19}  {'load (1/5/15 min)':>17}",
            flush=True,
        )
        for size in sizes:
            root = base / f"j{size}"
            reindex = _build(root, size, args.seed)
            scratch = base / f"work-{size}"
            scratch.mkdir()
            for label, tree in trees:
                cells, rate, cpu, calls, load = [], "", "", "", ""
                for name in operations:
                    if name == "import" and args.import_up_to is not None and size > args.import_up_to:
                        cells.append("not measured")
                        continue
                    measured = _measure(name, root, scratch, tree)
                    cells.append(measured.get("error") or f"{measured['seconds']:>8.1f} s {measured['peak_mib']:>8.1f} MiB")
                    rate = str(measured.get("entries_per_s", rate))
                    cpu = str(measured["cpu_s"]) if name == "import" and "cpu_s" in measured else cpu
                    if name == "import" and "read_calls" in measured:
                        calls = f"{measured['read_calls'] / 1e6:.2f}M/{measured['write_calls'] / 1e6:.2f}M"
                    load = measured["load"]
                    print(f"  {name} at {size} with {label} ({tree}): {json.dumps(measured)}", file=sys.stderr, flush=True)
                print(
                    f"{size:>8}  {reindex:>7.1f} s  {label:>8}  "
                    + "  ".join(f"{cell:>24}" for cell in cells)
                    + f"  {rate:>16}  {cpu:>12}  {calls:>19}  {load:>17}",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
