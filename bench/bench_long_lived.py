"""Memory of a long-lived process that opens, searches and closes many NN journals (a benchmark, not a test).

    python bench/bench_long_lived.py                    # 500 journals, RSS every 50
    python bench/bench_long_lived.py --journals 100 --every 10

A web view or a server that opens a journal per request must not grow with
every open. The bench makes ``--journals`` small journals (``--entries``
notes each, appended without NN), then, in this one process, opens each with
NN, searches it twice (hybrid, then semantic, the second query repeated, so
the query memo is used), and closes it. It does this two ways, side by side:

- ``shared encoder``: one encoder built once and handed to every ``Journal``
  (``Journal(root, enable_nn=True, encoder=encoder)``), what a server does;
- ``own encoder``: ``Journal(root, enable_nn=True)``, which loads the model
  at every open.

It prints the process's resident set every ``--every`` journals (after a
``gc.collect()``), split as ``/proc/self/status`` splits it: ``RssAnon``, the
heap and every other private page, where a leak would show, and ``RssFile``,
file pages mapped in, mostly the model's weights (the NumPy encoder maps
``model.safetensors``; a new query touches the embedding rows of its word
pieces, so this part grows towards the file's size and stays there). Then, for
each way, the growth of both over the run's second half: a plateau shows as a
growth near zero.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from journal import Journal
from journal.encoding import Encoder, load_encoder

WAYS = ("shared encoder", "own encoder")
VOICES = ("the ferry ran late in the fog", "we brought a puppy home", "rewrote the parser tests", "soup on a cold evening")


def rss_mib() -> tuple[float, float]:
    """This process's resident anonymous and file pages (RssAnon, RssFile), in MiB, after a full garbage collection."""
    gc.collect()
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(status["RssAnon"].split()[0]) / 1024, int(status["RssFile"].split()[0]) / 1024


def shown(rss: tuple[float, float]) -> str:
    return f"anon {rss[0]:.1f} + file {rss[1]:.1f} MiB"


def make_journals(base: Path, count: int, entries: int) -> list[Path]:
    """*count* journals of *entries* notes each, appended without NN (their vectors are embedded by the first NN search)."""
    roots = []
    for n in range(count):
        root = base / f"journal-{n:04d}"
        with Journal(root) as journal:
            for i in range(entries):
                journal.append({"kind": "note", "agent": "motoko", "theme": "day", "voice": f"{VOICES[(n + i) % len(VOICES)]} ({n}.{i})"})
        roots.append(root)
    return roots


def run(roots: list[Path], way: str, every: int, encoder: Encoder | None) -> list[tuple[int, tuple[float, float]]]:
    """Open, search and close every journal; the RSS after every *every* of them."""
    figures = [(0, rss_mib())]
    for done, root in enumerate(roots, 1):
        with Journal(root, enable_nn=True, encoder=encoder if way == "shared encoder" else None) as journal:
            journal.search("a new canine companion", k=3)
            journal.search("what happened on the ferry?", k=3, mode="semantic")
            journal.search("what happened on the ferry?", k=3, mode="semantic")
        if done % every == 0 or done == len(roots):
            figures.append((done, rss_mib()))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journals", type=int, default=500, help="journals opened, searched and closed per way (default 500)")
    parser.add_argument("--entries", type=int, default=4, help="entries per journal (default 4)")
    parser.add_argument("--every", type=int, default=50, help="print the RSS after this many journals (default 50)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-long-lived-") as tmp:
        began = time.perf_counter()
        roots = make_journals(Path(tmp), args.journals, args.entries)
        print(f"{args.journals} journals of {args.entries} entries made in {time.perf_counter() - began:.1f} s; RSS {shown(rss_mib())}")
        encoder = load_encoder()
        print(f"one encoder loaded: RSS {shown(rss_mib())}")
        results = {}
        for way in WAYS:
            began = time.perf_counter()
            results[way] = run(roots, way, args.every, encoder)
            print(f"{way}: {args.journals} journals in {time.perf_counter() - began:.1f} s")
    print("\nRSS (MiB, anonymous + file pages) after n journals opened, searched three times and closed, in one process")
    print(f"{'n':>6} " + " ".join(f"{way:>22}" for way in WAYS))
    for row in zip(*(results[way] for way in WAYS), strict=True):
        print(f"{row[0][0]:>6} " + " ".join(f"{anon:>10.1f} + {file:>9.1f}" for _, (anon, file) in row))
    for way in WAYS:
        figures = results[way]
        (middle, (anon_mid, file_mid)), (last, (anon_end, file_end)) = figures[len(figures) // 2], figures[-1]
        print(f"{way}: from journal {middle} to {last}, anonymous {anon_end - anon_mid:+.1f} MiB, file {file_end - file_mid:+.1f} MiB")


if __name__ == "__main__":
    main()
