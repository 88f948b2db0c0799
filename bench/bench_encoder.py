"""Cost of the packaged model's encoders: ONNX Runtime (journal.encoding.onnx_minilm), NumPy (journal.encoding.numpy_minilm) and sentence-transformers (a benchmark, not a test).

    python bench/bench_encoder.py                 # cold starts x5, 600 texts
    python bench/bench_encoder.py --repeat 9 --texts 2000
    python bench/bench_encoder.py --reindex-baseline REV [--reindex-entries N] [--rounds R]

One run prints, side by side:

1. Cold start of a process that opens a journal of ``--entries`` entries
   (vectors already stored) and runs one search: without NN (lexical), with
   the ONNX Runtime encoder, the NumPy encoder and sentence-transformers (each
   hybrid). Wall
   time from spawn to exit and the child's peak RSS (its VmHWM), the median
   of ``--repeat`` runs taken in turn, and each NN process's cost over the
   process without NN (target: at most 1.5 s and 250 MB).
2. Encode throughput in texts per second, the three encoders on the same texts
   (journal-shaped: 5 to 400 words), the better of two passes each, and how
   closely their vectors agree with sentence-transformers'.

With ``--reindex-baseline REV``, instead: ``reindex()`` with NN (every
entry embedded again) of a journal of ``--reindex-entries`` journal-shaped
entries, by the packages of git revision REV and by this tree's, in fresh
processes taking turns, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from journal import Journal
from journal.encoding import DEFAULT_MODEL, load_encoder, resolve_model
from journal.encoding.numpy_minilm import MiniLMEncoder
from journal.encoding.onnx_minilm import OnnxMiniLMEncoder
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder

REPO = Path(__file__).resolve().parent.parent
QUERY = "the new puppy I adopted"
MODES = ("without NN", "ONNX Runtime encoder", "NumPy encoder", "sentence-transformers")
CHILD = """
import sys
from pathlib import Path
from journal import Journal
from journal.encoding import DEFAULT_MODEL, load_encoder, resolve_model
from journal.encoding.numpy_minilm import MiniLMEncoder
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
mode, root, query = sys.argv[1:]
if mode == "without NN":
    journal = Journal(root, create=False)
else:
    # As Journal(root, enable_nn=True) does: the hash of the model files is remembered in the journal's models/.
    models = Path(root) / "models"
    if mode == "ONNX Runtime encoder":
        encoder = load_encoder(cache_dir=models)  # what a journal opened with NN gets, with the onnx extra
    elif mode == "NumPy encoder":
        encoder = MiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL, cache_dir=models)
    else:
        encoder = SentenceTransformerEncoder(cache_dir=models)
    journal = Journal(root, enable_nn=True, encoder=encoder, create=False)
hits = journal.search(query, k=5)
journal.close()
# The peak RSS of this program: ru_maxrss (getrusage, wait4) would also count
# the parent's pages at fork, which survive into the child across exec.
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(len(hits), int(status["VmHWM"].split()[0]))
"""
WORDS = [
    "harbor", "ferry", "tide", "lantern", "puppy", "adopted", "shoes", "release", "rollback", "queue", "stalled", "soup",
    "insomnia", "ceiling", "tax", "canal", "heron", "bridge", "weekend", "ticket", "vendor", "garden", "tomato", "violin",
    "rehearsal", "marathon", "knee", "grandmother", "recipe", "train", "platform", "umbrella", "thunderstorm", "museum",
    "sculpture", "morning", "walked", "quietly", "remembered", "because", "after", "before", "although", "meeting", "letter",
    ").split(",
]


def journal_texts(count: int, seed: int) -> list[str]:
    """Entry-like texts of 5 to 400 words (a tenth of them over the model's 256 word pieces)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(300, 400) if rng.random() < 0.1 else rng.randint(5, 80))) + "."
            for _ in range(count)]


def build_journal(root: Path, entries: int) -> None:
    """A journal with *entries* notes and their vectors, so that no child embeds more than its query."""
    with Journal(root, enable_nn=True, encoder=load_encoder()) as journal:
        for n, text in enumerate(journal_texts(entries, seed=1)):
            journal.append({"kind": "note", "agent": "motoko", "theme": f"day {n}", "voice": text})
        journal.append({"kind": "note", "agent": "motoko", "theme": "pets", "voice": "I adopted a puppy last week; she chews my shoes."})


def cold_start(mode: str, root: Path) -> tuple[float, float]:
    """Wall seconds from spawn to exit and peak RSS in MB of one child process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(root), QUERY], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"the {mode} child failed with exit code {result.returncode}:\n{result.stderr}")
    hits, peak_kib = result.stdout.split()
    if int(hits) == 0:
        raise SystemExit(f"the {mode} child found nothing")
    return wall, int(peak_kib) / 1024


def bench_cold_start(root: Path, repeat: int) -> None:
    figures: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(repeat):
        for mode in MODES:  # in turn, so that each sees the same machine
            figures[mode].append(cold_start(mode, root))
    wall = {mode: statistics.median(w for w, _ in runs) for mode, runs in figures.items()}
    rss = {mode: statistics.median(r for _, r in runs) for mode, runs in figures.items()}
    base = MODES[0]
    print(f"\ncold start: open a journal and search once ({QUERY!r}), median of {repeat} processes")
    print(f"{'process':<24}{'wall s':>9}{'peak RSS MB':>13}{'+wall s':>10}{'+RSS MB':>10}")
    for mode in MODES:
        extra = "" if mode == base else f"{wall[mode] - wall[base]:>10.2f}{rss[mode] - rss[base]:>10.0f}"
        print(f"{mode:<24}{wall[mode]:>9.2f}{rss[mode]:>13.0f}{extra}")
    for fast in MODES[1:3]:
        ok = wall[fast] - wall[base] <= 1.5 and rss[fast] - rss[base] <= 250
        print(f"{fast} over no NN: target <= 1.5 s and <= 250 MB: {'met' if ok else 'NOT met'}")


def bench_throughput(count: int) -> None:
    import numpy as np

    texts = journal_texts(count, seed=2)
    path = resolve_model(DEFAULT_MODEL)
    encoders = {"ONNX Runtime encoder": OnnxMiniLMEncoder(path, DEFAULT_MODEL), "NumPy encoder": MiniLMEncoder(path, DEFAULT_MODEL),
                "sentence-transformers": SentenceTransformerEncoder()}
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}  # CPU seconds of the best pass: on a busy machine they move far less than the wall time
    vectors = {}
    for encoder in encoders.values():
        encoder.encode(texts[:8])  # warm: first-call costs belong to the cold start
    for _ in range(2):
        for name, encoder in encoders.items():
            start, started_cpu = time.perf_counter(), time.process_time()
            vectors[name] = encoder.encode(texts)
            seconds = time.perf_counter() - start
            if seconds < best.get(name, float("inf")):
                best[name], cpu[name] = seconds, time.process_time() - started_cpu
    print(f"\nencode throughput: {count} journal-shaped texts, best of 2 passes, load average {os.getloadavg()[0]:.1f}")
    for name, seconds in best.items():
        print(f"{name:<24}{count / seconds:>9.1f} texts/s ({seconds:.1f} s, {cpu[name]:.1f} s CPU: {count / cpu[name]:.1f} texts a CPU second)")
    for name in ("ONNX Runtime encoder", "NumPy encoder"):
        cosines = (vectors[name] * vectors["sentence-transformers"]).sum(axis=1)
        print(f"cosine {name} vs sentence-transformers: min {float(np.min(cosines)):.6f}, mean {float(np.mean(cosines)):.7f}")


REINDEX_CHILD = """
import json, os, shutil, sys, time
from pathlib import Path
import journal
from journal import Journal
source, copy = sys.argv[1:]
shutil.copytree(source, copy)
with Journal(copy, enable_nn=True) as opened:  # the model loads here, outside the timing
    began, cpu = time.perf_counter(), time.process_time()
    count = opened.reindex()
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    assert opened.embed().missing == 0
print(json.dumps({"entries": count, "seconds": seconds, "cpu_seconds": cpu, "load_average": os.getloadavg()[0],
                  "package": str(Path(journal.__file__).parent.parent)}))
"""


def bench_reindex(entries: int, baseline: str, rounds: int) -> None:
    """``reindex()`` with NN (every entry embedded again) by *baseline*'s packages and this tree's, fresh processes taking turns."""
    from bench_runner import export_tree

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = work / "journal"
        with Journal(source) as journal:
            for n, text in enumerate(journal_texts(entries, seed=4)):
                journal.append({"kind": "note", "agent": f"agent{n % 4}", "theme": f"day {n % 97}", "tags": [f"t{n % 13}"], "voice": text})
        commit = subprocess.run(["git", "rev-parse", "--short", baseline], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        trees = {f"baseline {commit}": export_tree(commit, work / "baseline"), "this tree": REPO}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for round_ in range(rounds):
            for name, tree in list(trees.items())[:: 1 if round_ % 2 == 0 else -1]:
                copy = work / f"reindex-{round_}-{name.split()[0]}"
                # Started in the work directory: python -c puts the current directory first on sys.path.
                out = subprocess.run([sys.executable, "-c", REINDEX_CHILD, str(source), str(copy)], env={**os.environ, "PYTHONPATH": str(tree)},
                                     cwd=work, capture_output=True, text=True, check=True)
                result = json.loads(out.stdout.splitlines()[-1])
                assert Path(result.pop("package")).is_relative_to(tree), f"{name} did not run its own packages"
                results[name].append(result)
                shutil.rmtree(copy)
    print(f"\nreindex() with NN of {entries} journal-shaped entries (every one embedded again), {rounds} round(s), taking turns")
    for name, runs in results.items():
        for run in runs:
            print(f"{name:<20}{run['seconds']:>9.1f} s{run['cpu_seconds']:>9.1f} s CPU{entries / run['seconds']:>9.1f} entries/s"
                  f"   load average {run['load_average']:.1f}")
    base, ours = (statistics.median(run["seconds"] for run in runs) for runs in results.values())
    print(f"this tree against the baseline: {base / ours:.2f}x as fast (median wall time; target >= 1.6x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="cold-start processes per encoder (default 5)")
    parser.add_argument("--entries", type=int, default=300, help="entries in the cold-start journal (default 300)")
    parser.add_argument("--texts", type=int, default=600, help="texts for the throughput figures (default 600)")
    parser.add_argument("--reindex-baseline", metavar="REV", help="only time reindex() with NN by git revision REV's packages and this tree's")
    parser.add_argument("--reindex-entries", type=int, default=2000, help="--reindex-baseline: entries in the journal (default 2000)")
    parser.add_argument("--rounds", type=int, default=1, help="--reindex-baseline: reindexes per tree (default 1)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if args.reindex_baseline:
        bench_reindex(args.reindex_entries, args.reindex_baseline, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "journal"
        build_journal(root, args.entries)
        bench_cold_start(root, args.repeat)
    bench_throughput(args.texts)


if __name__ == "__main__":
    main()
