"""search and prompt_context beside a baseline revision: p50/p95 of both trees in one run, for common-word and ordinary queries.

Run:  python bench/bench_search.py --baseline REV [--baseline REV2 ...] [--sizes 1000,10000,100000] [--hybrid-sizes 1000,10000] [--queries 50] [--rounds 2] [--agent]

One journal of synthetic reflections (bench_journal.py's generator, its
files written directly) grows to each size. At each size every tree, each
baseline's packages (a git revision, exported, or a checkout's directory)
and this one's, indexes a copy of it (hard links to the same files) and
answers the same queries in fresh processes taking turns, so all are
measured under the same load. The queries search the whole journal
(no ``agent=``): "common" ones are two words of the ten most frequent, found in
nearly every entry, "ordinary" ones are bench_journal.py's rare, mixed and
theme queries. With ``--agent``, as many more of each class are asked scoped
to one agent each (``agent=``, as the runner asks), drawn as the generator
draws an entry's agent: the classes "common@agent" and "ordinary@agent". Each call is timed (wall and CPU); the table gives each
tree's p50/p95 wall milliseconds side by side, and its median CPU
milliseconds, which move less with the machine's load, with the ratio of
each baseline's to this tree's (above 1: this tree is faster). Lexical at
every size; hybrid (the real model; ``ghostjournal download-model`` first)
at ``--hybrid-sizes``, where each tree embeds every entry once.
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CALLS = ("search", "prompt_context")
CLASSES = ("common", "ordinary")
#: The classes --agent adds: queries of each class above, scoped to an agent.
AGENT_CLASSES = tuple(f"{cls}@agent" for cls in CLASSES)
#: Queries answered before the timed ones (caches, the model's first call).
WARM = 5


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Open the journal at spec's root with this process's ``journal`` package and time every query; only the public API is used."""
    import journal
    from journal import Journal

    began = time.perf_counter()
    result: dict[str, Any] = {"package": str(Path(journal.__file__).parent.parent)}
    with Journal(spec["root"], enable_nn=spec["hybrid"]) as opened:
        result["open_s"] = time.perf_counter() - began
        if spec["hybrid"]:
            began = time.perf_counter()
            opened.embed()
            result["embed_s"] = time.perf_counter() - began
        result["entries"] = opened.digest().count
        mode = "hybrid" if spec["hybrid"] else "lexical"
        calls = {"search": lambda text: opened.search(text, mode=mode), "prompt_context": opened.prompt_context}
        for text in spec["warm"]:
            for call in calls.values():
                call(text)
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {}
        scoped = {"search": lambda text, agent: opened.search(text, mode=mode, agent=agent), "prompt_context": opened.prompt_context}
        for cls, texts in spec["queries"].items():
            for name, call in calls.items():
                timed = samples.setdefault(cls, {}).setdefault(name, [])
                for text in texts:
                    wall, cpu = time.perf_counter(), time.process_time()
                    if isinstance(text, list):  # an agent-scoped query: [text, agent]
                        scoped[name](text[0], agent=text[1])
                    else:
                        call(text)
                    timed.append((time.perf_counter() - wall, time.process_time() - cpu))
        result["samples"] = samples
    result["load_average"] = os.getloadavg()[0]
    return result


def queries(count: int, seed: int, agent: bool = False) -> tuple[dict[str, list[Any]], list[str]]:
    """*count* common-word and *count* ordinary queries from bench_journal.py's generator, all different; and the warm-up queries.

    No timed query repeats another or a warm-up one: a tree that remembers a query's embedding would
    answer a repeat from memory. Common ones are two of the ten most frequent words (three beyond the
    90 pairs), warm-up ones four. With *agent*, *count* more of each class, each as ``[text, agent]``
    with its agent drawn by the generator's weights.
    """
    from bench_journal import AGENT_WEIGHTS, AGENTS, Synth

    synth = Synth(seed=seed)
    rng = random.Random(seed + 11)
    top = synth.vocab[:10]
    pairs = [f"{a} {b}" for a in top for b in top if a != b]
    rng.shuffle(pairs)
    wanted = 2 * count if agent else count
    common = pairs[:wanted] + [" ".join(rng.sample(top, 3)) for _ in range(wanted - len(pairs))]
    ordinary = list(dict.fromkeys(text for text, _, cls in synth.queries(wanted * 8) if cls != "common"))[:wanted]
    warm = [" ".join(rng.sample(top, 4)) for _ in range(WARM)] + [text for text, _, _ in Synth(seed=seed + 1).queries(WARM)]
    asked: dict[str, list[Any]] = {"common": common[:count], "ordinary": ordinary[:count]}
    if agent:
        for cls, texts in (("common", common), ("ordinary", ordinary)):
            asked[f"{cls}@agent"] = [[text, rng.choices(AGENTS, weights=AGENT_WEIGHTS)[0]] for text in texts[count:]]
    return asked, warm


def _copy(source: Path, into: Path) -> Path:
    """A journal root whose entries/ hard-links *source*'s files (no index): each tree builds its own."""
    into.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(source / "entries"), str(into / "entries")], check=True)
    return into


def run_child(tree: Path, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """:func:`_child` in a fresh process importing *tree*'s packages; checks that it did."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], env=env, cwd=work, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the child of {tree} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    if not Path(result.pop("package")).is_relative_to(tree):
        raise SystemExit(f"the child of {tree} did not import its own packages")
    return result


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-len(ordered) * q // 100) - 1))]


def measure(
    work: Path, trees: dict[str, Path], source: Path, size: int, hybrid: bool, texts: tuple[dict[str, list[Any]], list[str]], rounds: int
) -> list[dict[str, Any]]:
    """Both trees' samples at *size*, pooled over *rounds* rounds in which they take turns; one row per query class and call."""
    pooled: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {name: {} for name in trees}
    notes: dict[str, list[str]] = {name: [] for name in trees}
    for round_ in range(rounds):
        for name, tree in list(trees.items())[:: 1 if round_ % 2 == 0 else -1]:
            root = work / f"{size}-{list(trees).index(name)}"
            if not root.exists():
                _copy(source, root)
            result = run_child(tree, {"root": str(root), "hybrid": hybrid, "queries": texts[0], "warm": texts[1]}, work)
            if result["entries"] != size:
                raise SystemExit(f"{name} indexed {result['entries']} entries of {size}")
            note = f"open {result['open_s']:.1f} s" + (f", embed {result['embed_s']:.1f} s" if "embed_s" in result else "")
            notes[name].append(f"{note}, load {result['load_average']:.1f}")
            for cls, calls in result["samples"].items():
                for call, samples in calls.items():
                    pooled[name].setdefault(cls, {}).setdefault(call, []).extend(samples)
    rows = []
    for cls in (*CLASSES, *AGENT_CLASSES):
        if cls not in texts[0]:
            continue
        for call in CALLS:
            row: dict[str, Any] = {"entries": size, "mode": "hybrid" if hybrid else "lexical", "queries": cls, "call": call}
            for name in trees:
                samples = pooled[name][cls][call]
                walls = [wall * 1000 for wall, _ in samples]
                row[name] = {
                    "p50_ms": round(_percentile(walls, 50), 2),
                    "p95_ms": round(_percentile(walls, 95), 2),
                    "cpu_ms": round(statistics.median(cpu * 1000 for _, cpu in samples), 2),
                    "calls": len(samples),
                }
            rows.append(row)
    for name in trees:
        print(f"  {size} entries, {'hybrid' if hybrid else 'lexical'}, {name}: {'; '.join(notes[name])}", file=sys.stderr, flush=True)
    return rows


def render(rows: list[dict[str, Any]], names: list[str]) -> str:
    """The side-by-side table: each tree's p50/p95 and median CPU per size, mode, query class and call.

    Each baseline's columns end with the ratios of its p50 and its CPU median to this tree's (the last of *names*).
    """
    *bases, ours = names
    head = f"{'entries':>8}  {'mode':<8}{'queries':<16}{'call':<16}"
    for base in bases:
        head += f"{base + ' p50/p95 ms, CPU ms':>36}{'p50, CPU ratio':>16}"
    lines = [head + f"{ours + ' p50/p95 ms, CPU ms':>36}"]
    for row in rows:
        line = f"{row['entries']:>8}  {row['mode']:<8}{row['queries']:<16}{row['call']:<16}"
        o = row[ours]
        for base in bases:
            b = row[base]
            line += f"{b['p50_ms']:>19.1f} / {b['p95_ms']:<6.1f}{b['cpu_ms']:>9.1f}{b['p50_ms'] / o['p50_ms']:>8.2f}x {b['cpu_ms'] / o['cpu_ms']:>6.2f}x"
        lines.append(line + f"{o['p50_ms']:>19.1f} / {o['p95_ms']:<6.1f}{o['cpu_ms']:>9.1f}")
    return "\n".join(lines)


def _baseline(parser: argparse.ArgumentParser, given: str) -> tuple[str, Path | None]:
    """A ``--baseline``: a checkout's directory (its label is its commit) or a revision to export; the short commit and the directory."""
    where = Path(given).expanduser()
    tree = where.resolve() if (where / "journal" / "__init__.py").is_file() else None
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD" if tree else given], cwd=tree or REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        parser.error(f"--baseline {given!r} is not a revision of this repository, nor a checkout's directory")
    return done.stdout.strip(), tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline",
        action="append",
        help="a git revision, or a checkout's directory, whose packages answer the same queries beside this tree's (required; may be repeated)",
    )
    parser.add_argument("--sizes", default="1000,10000,100000", help="journal sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument(
        "--hybrid-sizes",
        default="1000,10000",
        help="sizes also measured in hybrid mode (each tree embeds every entry once; default 1000,10000)",
    )
    parser.add_argument("--queries", type=int, default=50, help="queries of each class per round (default 50)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds in which the trees take turns (default 2)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--agent", action="store_true", help="also ask as many queries of each class scoped to an agent (agent=, as the runner asks)"
    )
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return
    if not args.baseline:
        parser.error("--baseline REV is required: the revision to measure beside this tree")
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
        hybrid_sizes = {int(s) for s in args.hybrid_sizes.split(",") if s.strip()}
    except ValueError:
        parser.error(f"--sizes and --hybrid-sizes take comma-separated entry counts, got {args.sizes!r} and {args.hybrid_sizes!r}")
    if not sizes or sizes[0] < 1 or not 1 <= args.queries <= 500 or args.rounds < 1:
        parser.error("--sizes needs positive counts, --queries 1 to 500, --rounds at least 1")
    # This tree's packages write the journal's files, whatever else is installed.
    sys.path[:0] = [str(REPO), str(Path(__file__).parent)]
    from bench_journal import Synth, fast_fill
    from bench_runner import export_tree

    baselines = [_baseline(parser, given) for given in args.baseline]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "journal"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    texts = queries(args.queries, args.seed, args.agent)
    load_before = os.getloadavg()
    print(
        f"{', '.join(f'baseline {label}' for label, _ in baselines)} beside this tree ({head}{', journal/ changed' if dirty else ''}); {os.cpu_count()} CPUs; "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        work = Path(tmp)
        trees: dict[str, Path] = {}
        for n, (label, tree) in enumerate(baselines):
            # One commit given twice (a revision and its checkout) still gets a column of each.
            name = f"baseline {label}" if f"baseline {label}" not in trees else f"baseline {label}#{n + 1}"
            trees[name] = tree or export_tree(label, work / f"baseline-{n}")
        trees["this tree"] = REPO
        source = work / "source"
        (source / "entries").mkdir(parents=True)
        synth, filled = Synth(seed=args.seed), 0
        for size in sizes:
            fast_fill(source, synth, size - filled)
            filled = size
            print(f"  {size} entries written", file=sys.stderr, flush=True)
            for hybrid in (False, True) if size in hybrid_sizes else (False,):
                rows += measure(work, trees, source, size, hybrid, texts, args.rounds)
            for slot in range(len(trees)):
                shutil.rmtree(work / f"{size}-{slot}", ignore_errors=True)
    load_after = os.getloadavg()
    print(render(rows, list(trees)))
    print(
        f"{args.queries} queries of each class per round, {args.rounds} rounds; load average at the end "
        f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
    )
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
