"""Cost of the packaged model's two encoders: NumPy (journal._minilm) against sentence-transformers (a benchmark, not a test).

    python bench/bench_encoder.py                 # cold starts x5, 600 texts
    python bench/bench_encoder.py --repeat 9 --texts 2000

One run prints, side by side:

1. Cold start of a process that opens a journal of ``--entries`` entries
   (vectors already stored) and runs one search: without NN (lexical), with
   the NumPy encoder (hybrid) and with sentence-transformers (hybrid). Wall
   time from spawn to exit and the child's peak RSS (its VmHWM), the median
   of ``--repeat`` runs taken in turn, and each NN process's cost over the
   process without NN (target: at most 1.5 s and 250 MB).
2. Encode throughput in texts per second, both encoders on the same texts
   (journal-shaped: 5 to 400 words), the better of two passes each, and how
   closely their vectors agree.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from journal import Journal
from journal.embed import SentenceTransformerEncoder, load_encoder

REPO = Path(__file__).resolve().parent.parent
QUERY = "the new puppy I adopted"
MODES = ("without NN", "NumPy encoder", "sentence-transformers")
CHILD = """
import sys
from pathlib import Path
from journal import Journal
from journal.embed import SentenceTransformerEncoder, load_encoder
mode, root, query = sys.argv[1:]
if mode == "without NN":
    journal = Journal(root, create=False)
else:
    # As Journal(root, enable_nn=True) does: the hash of the model files is remembered in the journal's models/.
    models = Path(root) / "models"
    encoder = load_encoder(cache_dir=models) if mode == "NumPy encoder" else SentenceTransformerEncoder(cache_dir=models)
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
    fast = MODES[1]
    ok = wall[fast] - wall[base] <= 1.5 and rss[fast] - rss[base] <= 250
    print(f"NumPy encoder over no NN: target <= 1.5 s and <= 250 MB: {'met' if ok else 'NOT met'}")


def bench_throughput(count: int) -> None:
    import numpy as np

    texts = journal_texts(count, seed=2)
    encoders = {"NumPy encoder": load_encoder(), "sentence-transformers": SentenceTransformerEncoder()}
    best: dict[str, float] = {}
    vectors = {}
    for encoder in encoders.values():
        encoder.encode(texts[:8])  # warm: first-call costs belong to the cold start
    for _ in range(2):
        for name, encoder in encoders.items():
            start = time.perf_counter()
            vectors[name] = encoder.encode(texts)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    print(f"\nencode throughput: {count} journal-shaped texts, best of 2 passes")
    for name, seconds in best.items():
        print(f"{name:<24}{count / seconds:>9.1f} texts/s ({seconds:.1f} s)")
    cosines = (vectors["NumPy encoder"] * vectors["sentence-transformers"]).sum(axis=1)
    print(f"cosine NumPy vs sentence-transformers: min {float(np.min(cosines)):.6f}, mean {float(np.mean(cosines)):.7f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="cold-start processes per encoder (default 5)")
    parser.add_argument("--entries", type=int, default=300, help="entries in the cold-start journal (default 300)")
    parser.add_argument("--texts", type=int, default=600, help="texts for the throughput figures (default 600)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "journal"
        build_journal(root, args.entries)
        bench_cold_start(root, args.repeat)
    bench_throughput(args.texts)


if __name__ == "__main__":
    main()
