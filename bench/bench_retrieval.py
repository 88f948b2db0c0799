"""Retrieval quality and speed of lexical, semantic and hybrid ranking (a benchmark, not a test).

Quality: loads a labelled set into a fresh journal through the public API and
prints Recall@k, MRR and NDCG@10 for the three modes side by side, overall,
per category and (LoCoMo) per conversation, and checks that hybrid is at
least as good as each arm alone in every row at every k:

    python bench/bench_retrieval.py quality --locomo ../shared/data/locomo-dev
    python bench/bench_retrieval.py quality --journal-set bench/journal_set.json
    python bench/bench_retrieval.py quality --runner 1000,3000,10000

``--runner`` builds runner-written journals of those sizes at bench time
(``bench/journal_sets.py``: ``ghostrunner simulate`` output with planted
paraphrase and rare-word entries, seeded).

LoCoMo: each turn is one entry (agent = the conversation, so questions are
scoped to their conversation; voice = ``(date) speaker said, "text"`` plus the
shared image's caption); each question is a query; recall@k is the paper's
turn-level recall (fraction of evidence turns in the top k, 1 when a question
has no evidence). MRR and NDCG@10 are over the questions that have evidence.

Freshness (``bench/freshness.py``): the updated-fact and recency-trap
suites of ``bench/freshness_set.json``, pass rates per mode:

    python bench/bench_retrieval.py freshness

Abstention (``bench/abstention.py``): the relevance floor's calibration, how
well the top cosine separates answerable from unanswerable questions
(AUROC), and the floor's recall cost:

    python bench/bench_retrieval.py abstention --locomo ../shared/data/locomo-dev

Speed (one run, side by side):

    python bench/bench_retrieval.py speed --entries 100000

reindex embedding throughput against the model's own batch ``encode`` on the
same texts; search p50/p95 at N entries, lexical next to hybrid (with the
semantic arm's parts: query embedding, cosine over the cached matrix, and a
cold load of the matrix from SQLite); append latency with NN on and off.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent))

from retrieval_sets import load_journal_set, load_locomo, ndcg_at, recall_at, reciprocal_rank

from journal import Journal
from journal.encoding import document_text
from journal.ranking.fusion import FusionParams, fuse

KS = (3, 5, 10, 25, 50)
MODES = ("lexical", "semantic", "hybrid")


def _groups(q: dict[str, Any], per_agent: bool) -> tuple[str, ...]:
    return ("overall", q["category"], *([f"agent {q['agent']}"] if per_agent else []))


def evaluate(journal: Journal, queries: Sequence[dict[str, Any]], arms: dict[str, list[Any]] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """``{mode: {group: {metric: value}}}`` with groups ``overall``, each category and, with several agents, each agent.

    *arms*, when given, receives each query's lexical and semantic ``(id, score)`` lists, and under
    ``"partial"`` the lexical hits that lack one of the searched words (what evidence fusion's floor reads).
    """
    from journal.indexing.index import Window

    depth = max(KS)
    per_agent = len({q["agent"] for q in queries}) > 1
    results: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for q in queries:
            hits = journal.search(q["query"], k=depth, agent=q["agent"], mode=mode, floor=False)  # ranking quality; the floor has its own figures
            if arms is not None and mode != "hybrid":
                arms.setdefault(mode, []).append([(hit.entry_id, hit.score) for hit in hits])
                if mode == "lexical":
                    ids = [hit.entry_id for hit in hits]
                    arms.setdefault("partial", []).append(journal._keeper.index.partial_matches(q["query"], ids, Window(agent=q["agent"])))
            ranked = [hit.entry_id for hit in hits]
            for group in _groups(q, per_agent):
                for k in KS:
                    sums[group][f"R@{k}"].append(recall_at(ranked, q["relevant"], k))
                if any(grade > 0 for grade in q["relevant"].values()):
                    sums[group]["MRR"].append(reciprocal_rank(ranked, q["relevant"]))
                    sums[group]["NDCG@10"].append(ndcg_at(ranked, q["relevant"], 10))
        results[mode] = {group: {m: statistics.fmean(v) for m, v in metrics.items()} | {"n": len(metrics["R@5"])} for group, metrics in sums.items()}
    return results


def print_table(title: str, results: dict[str, dict[str, dict[str, float]]]) -> None:
    metrics = [*(f"R@{k}" for k in KS), "MRR", "NDCG@10"]
    print(f"\n{title}")
    groups = ["overall", *sorted(g for g in results["hybrid"] if g != "overall")]
    header = f"{'group':<20}{'n':>5}  " + "  ".join(f"{m:>7}" for m in metrics)
    for group in groups:
        print(header if group == "overall" else "", end="\n" if group == "overall" else "")
        for mode in MODES:
            row = results[mode][group]
            values = "  ".join(f"{row[m]:7.3f}" if m in row else f"{'-':>7}" for m in metrics)
            print(f"{group + ' ' + mode[:3]:<20}{int(row['n']):>5}  {values}")
    behind = [f"{group} R@{k} ({results['hybrid'][group][f'R@{k}']:.3f} < {mode} {results[mode][group][f'R@{k}']:.3f})"
              for group in groups for k in KS for mode in ("lexical", "semantic")
              if results["hybrid"][group][f"R@{k}"] < results[mode][group][f"R@{k}"] - 1e-9]
    print("hybrid >= each arm at every k in every row" if not behind else "hybrid behind an arm: " + "; ".join(behind))


def run_quality(name: str, payloads: list[dict[str, Any]], queries: list[dict[str, Any]], model: str | None, compare: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with Journal(Path(tmp) / "j") as writer:  # appended without NN, embedded in batches on the NN open
            for payload in payloads:
                writer.append(payload)
        evaluate_root(name, Path(tmp) / "j", queries, model, compare)


def evaluate_root(name: str, root: Path, queries: list[dict[str, Any]], model: str | None, compare: bool = False) -> None:
    """Open the journal at *root* with NN (embedding what lacks a vector) and print its quality table."""
    arms: dict[str, list[Any]] = {}
    started = time.perf_counter()
    options = {"model": model} if model else {}
    with Journal(root, enable_nn=True, **options) as journal:
        opened = time.perf_counter() - started
        entries = journal.digest().count
        started = time.perf_counter()
        results = evaluate(journal, queries, arms)
        elapsed = time.perf_counter() - started
    print_table(f"{name}: {entries} entries, {len(queries)} queries (NN open + embedding {opened:.1f} s; "
                f"{3 * len(queries)} searches in {elapsed:.1f} s)", results)
    if compare:
        compare_fusions(queries, arms, results)


#: Fusions compared with the journal's own by ``--compare`` (on the same arm lists).
ALTERNATIVES: dict[str, FusionParams | None] = {
    "evidence, short-list floor 0": None,  # the journal's fusion without the partial hits' floor (its former rule)
    "min-max 0.6/0.4 (former)": FusionParams(method="minmax", lexical_weight=0.6, semantic_weight=0.4),
    "RRF k=60": FusionParams(method="rrf", rrf_k=60, lexical_weight=1, semantic_weight=1),
    "RRF k=5, 0.6/0.4": FusionParams(method="rrf", rrf_k=5, lexical_weight=0.6, semantic_weight=0.4),
    "evidence floor 10": FusionParams(lexical_floor_rank=10),
    "evidence floor 30": FusionParams(lexical_floor_rank=30),
    "evidence floor 50": FusionParams(lexical_floor_rank=50),
    "evidence 0.6/0.4": FusionParams(lexical_weight=0.6, semantic_weight=0.4),
    "evidence 0.4/0.6": FusionParams(lexical_weight=0.4, semantic_weight=0.6),
}


def compare_fusions(queries: Sequence[dict[str, Any]], arms: dict[str, list[Any]], results: dict[str, dict[str, dict[str, float]]]) -> None:
    """Recall@k of other fusions of the same two lists, and the rows where each falls behind an arm."""
    per_agent = len({q["agent"] for q in queries}) > 1
    print(f"  fusion alternatives (overall {' '.join(f'R@{k}' for k in KS)}; rows where hybrid falls behind an arm)")
    for label, params in ALTERNATIVES.items():
        sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for q, lexical, semantic, partial in zip(queries, arms["lexical"], arms["semantic"], arms["partial"], strict=True):
            fused = fuse(lexical, semantic) if params is None else fuse(lexical, semantic, params, partial=partial)
            ranked = [entry_id for entry_id, _ in fused]
            for group in _groups(q, per_agent):
                for k in KS:
                    sums[group][k].append(recall_at(ranked, q["relevant"], k))
        behind = sorted({group for group, by_k in sums.items() for k, values in by_k.items()
                         if statistics.fmean(values) < max(results[m][group][f"R@{k}"] for m in ("lexical", "semantic")) - 1e-9})
        overall = " ".join(f"{statistics.fmean(sums['overall'][k]):.3f}" for k in KS)
        print(f"    {label:<28} {overall}   {', '.join(behind) or '-'}")


def run_runner_sets(sizes: Sequence[int], model: str | None, seed: int, compare: bool) -> None:
    from journal_sets import build_runner_set

    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            queries = build_runner_set(Path(tmp) / "journal", size, seed=seed)
            evaluate_root(f"runner journal of {size} runs (seed {seed})", Path(tmp) / "journal", queries, model, compare)


# -- speed ---------------------------------------------------------------------------

_WORDS = ["harbor", "light", "ferry", "tide", "rain", "studio", "lens", "grain", "shadow", "neon", "market", "alley", "river", "bridge", "archive", "signal", "memory", "dream", "code", "deploy", "server", "latency", "queue", "pulse", "evening", "digest", "theme", "focus", "mood", "novelty", "crow", "kettle", "lantern", "balcony", "garden", "moss", "stone", "typewriter", "letter", "train", "platform", "station", "ticket", "fog", "mirror", "window", "paper", "ink"]


def synthetic_payloads(count: int, *, agents: int = 4, seed: int = 7) -> list[dict[str, Any]]:
    """Journal-like entries with realistic word reuse; deterministic."""
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    payloads = []
    for i in range(count):
        words = rng.choices(_WORDS, k=rng.randint(18, 60))
        payloads.append({
            "kind": "pulse", "agent": f"agent{i % agents}", "ts": (start + timedelta(minutes=7 * i)).isoformat(),
            "theme": " ".join(rng.sample(_WORDS, 2)), "tags": rng.sample(_WORDS, 2),
            "voice": " ".join(words).capitalize() + f". Marker token q{i:06d}.",
        })
    return payloads


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(call: Callable[[], Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def run_speed(entries: int, embed_entries: int, model: str | None) -> None:
    import numpy as np

    from journal.encoding.semantic import to_blob
    from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
    from journal.indexing.index import Window

    encoder = SentenceTransformerEncoder(model) if model else SentenceTransformerEncoder()
    print(f"model {encoder.identity}, device cpu")
    with tempfile.TemporaryDirectory() as tmp:
        # 1. reindex embedding throughput against the model's own batch encode on the same texts.
        root = Path(tmp) / "embed"
        payloads = synthetic_payloads(embed_entries)
        with Journal(root) as plain:
            for payload in payloads:
                plain.append(payload)
        texts = [document_text(p["theme"], p["tags"], None, p["voice"]) for p in payloads]
        started = time.perf_counter()
        encoder._model.encode(texts, batch_size=encoder.batch_size, convert_to_numpy=True, normalize_embeddings=True)
        raw = time.perf_counter() - started
        marks: list[float] = []
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            started = time.perf_counter()
            journal.reindex(on_progress=lambda done, total: marks.append(time.perf_counter()))
            whole = time.perf_counter() - started
        fill = marks[-1] - marks[0]
        print(f"\nembedding {embed_entries} entries: model.encode {embed_entries / raw:7.0f} texts/s ({raw:.1f} s); "
              f"reindex embedding phase {embed_entries / fill:7.0f} texts/s ({fill:.1f} s) = {raw / fill:.2f} of encode; "
              f"whole reindex (files, FTS, vectors) {embed_entries / whole:7.0f} entries/s ({whole:.1f} s)")

        # 2. append latency, NN off and on.
        root = Path(tmp) / "append"
        extra = synthetic_payloads(400, seed=11)
        with Journal(root) as plain:
            off = [t for p in extra[:200] for t in _timed(lambda p=p: plain.append(p), 1)]
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            on = [t for p in extra[200:] for t in _timed(lambda p=p: journal.append(p), 1)]
        print(f"\nappend latency (ms)   p50     p95\n  NN off          {_pct(off, .5):7.2f} {_pct(off, .95):7.2f}\n  NN on           {_pct(on, .5):7.2f} {_pct(on, .95):7.2f}")

        # 3. search at scale. Entries go in through append; their vectors are random unit
        # vectors stored under the real model's identity (embedding 100k texts on this CPU
        # takes minutes and does not change the cost of a query); queries use the real model.
        root = Path(tmp) / "scale"
        started = time.perf_counter()
        payloads = synthetic_payloads(entries, seed=3)
        with Journal(root) as plain:
            for payload in payloads:
                plain.append(payload)
        loaded = time.perf_counter() - started
        rng = np.random.default_rng(5)

        class _RandomDocuments:
            identity = encoder.identity

            def encode(self, texts: Sequence[str]) -> Any:
                vectors = rng.standard_normal((len(texts), encoder.dimension)).astype(np.float32)
                return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

        started = time.perf_counter()
        with Journal(root, enable_nn=True, encoder=_RandomDocuments()) as journal:
            journal.embed()
        filled = time.perf_counter() - started
        print(f"\nsearch at {entries} entries ({entries // 4} per agent; appended in {loaded:.0f} s, random vectors stored in {filled:.0f} s)")
        queries = ["harbor light at night", "what did I think about the train station?", "fog mirror", "memory of rain on the studio window",
                   "server latency again", "q004242 marker", "letters written in ink", "the garden after the rain"]
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            semantic = journal._keeper.semantic
            assert semantic is not None
            started = time.perf_counter()
            journal.search("warm up the cache", k=8, mode="semantic")
            cold = (time.perf_counter() - started) * 1000
            print("                                    p50 ms   p95 ms")
            for label, agent in (("one agent", "agent1"), ("all agents", None)):
                for mode in ("lexical", "hybrid"):
                    times = [t for q in queries for t in _timed(lambda q=q, agent=agent, mode=mode: journal.search(q, k=8, agent=agent, mode=mode), 5)]
                    print(f"  search {mode:<8} {label:<12}      {_pct(times, .5):7.2f}  {_pct(times, .95):7.2f}")
            vector = semantic.query_vector("harbor light at night")
            # The encoder itself: the journal's query memo would answer four of each five calls (the searches above use it so).
            embed = [t for q in queries for t in _timed(lambda q=q: semantic.encoder.encode([q]), 5)]
            recalled = [t for q in queries for t in _timed(lambda q=q: semantic.query_vector(q), 5)]
            cosine = _timed(lambda: semantic.rank(vector, 50, Window(agent="agent1")), 40)
            cosine_all = _timed(lambda: semantic.rank(vector, 50), 40)
            print(f"  parts: query embedding          {_pct(embed, .5):7.2f}  {_pct(embed, .95):7.2f}")
            print(f"         a query recalled         {_pct(recalled, .5):7.2f}  {_pct(recalled, .95):7.2f}")
            print(f"         cosine top-50, one agent {_pct(cosine, .5):7.2f}  {_pct(cosine, .95):7.2f}")
            print(f"         cosine top-50, all       {_pct(cosine_all, .5):7.2f}  {_pct(cosine_all, .95):7.2f}")
            print(f"         first query (cold matrix load from SQLite): {cold:.0f} ms")
            blob = to_blob(vector)
            started = time.perf_counter()
            rows = journal._keeper.index.vectors_after(encoder.identity, 0)
            matrix = np.frombuffer(b"".join(r.vector for r in rows if r.agent == "agent1"), dtype="<f4").reshape(-1, len(blob) // 4)
            _ = matrix @ vector
            print(f"         without the cache (read every blob per query): {(time.perf_counter() - started) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    quality = sub.add_parser("quality", help="Recall@k, MRR, NDCG@10 per mode")
    quality.add_argument("--locomo", type=Path, help="the locomo-dev directory (or its JSON file)")
    quality.add_argument("--journal-set", type=Path, help="a journal-shaped labelled set (bench/journal_set.json)")
    quality.add_argument("--runner", help="comma-separated sizes of runner-written journals to build, e.g. 1000,3000,10000")
    quality.add_argument("--seed", type=int, default=11, help="seed of the planted entries of --runner (default 11)")
    quality.add_argument("--compare", action="store_true", help="also score other fusions of the same two arm lists")
    quality.add_argument("--model", help="model name or directory (default: the journal's default)")
    fresh = sub.add_parser("freshness", help="updated facts and recency traps: does the newest version win, is the old truth kept?")
    fresh.add_argument("--set", type=Path, default=Path(__file__).resolve().parent / "freshness_set.json", help="the suites (bench/freshness_set.json)")
    fresh.add_argument("--background", type=int, default=1000, help="entries of the runner-written journal beneath them (0: none)")
    fresh.add_argument("--show-failed", action="store_true", help="list the probes that fail")
    fresh.add_argument("--locomo", type=Path, help="also try the newer-near-duplicates-first rule on the suites and on LoCoMo's recall")
    abstain = sub.add_parser("abstention", help="the relevance floor: its calibration, AUROC on unanswerable questions, recall cost")
    abstain.add_argument("--locomo", type=Path, required=True, help="the locomo-dev directory (or its JSON file)")
    abstain.add_argument("--journal-set", type=Path, default=Path(__file__).resolve().parent / "journal_set.json")
    abstain.add_argument("--runner", type=int, default=1000, help="size of the runner-written journal with planted questions")
    abstain.add_argument("--seed", type=int, default=11)
    speed = sub.add_parser("speed", help="embedding throughput, search latency, append latency")
    speed.add_argument("--entries", type=int, default=100_000)
    speed.add_argument("--embed-entries", type=int, default=4000)
    speed.add_argument("--model")
    args = parser.parse_args()
    if args.command == "quality":
        if not args.locomo and not args.journal_set and not args.runner:
            parser.error("pass --locomo PATH, --journal-set PATH and/or --runner SIZES")
        if args.journal_set:
            run_quality(f"journal set {args.journal_set.name}", *load_journal_set(args.journal_set), args.model, args.compare)
        if args.locomo:
            run_quality("LoCoMo dev (conv-26, conv-30)", *load_locomo(args.locomo), args.model, args.compare)
        if args.runner:
            run_runner_sets([int(size) for size in args.runner.split(",")], args.model, args.seed, args.compare)
    elif args.command == "freshness":
        from freshness import run_freshness

        run_freshness(args.set, args.background, show_failed=args.show_failed, locomo=args.locomo)
    elif args.command == "abstention":
        from abstention import run_abstention

        run_abstention(args.locomo, args.journal_set, args.runner, args.seed)
    else:
        run_speed(args.entries, args.embed_entries, args.model)


if __name__ == "__main__":
    main()
