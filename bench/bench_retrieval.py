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

``--plain`` ranks without the neighbours' stage (``search(..., rerank=False)``).
The LoCoMo rows of ``quality`` store each turn as the paper indexes it
(``layout="paper"``, below).

LoCoMo as the held-out harness stores it (``load_locomo``'s ``journal``
layout: a turn is ``<speaker> said, "<text>"``, its session's date in the
theme, linked to the turn before it), one ``search(question, k=50)`` a
question, turn recall@5/10/25 with and without the neighbours' stage, and
the neighbour weight cross-validated across conversations:

    python bench/bench_retrieval.py locomo ../shared/data/locomo-dev

Search CPU time at 10k entries with and without the neighbours' stage:

    python bench/bench_retrieval.py stages-speed --entries 10000

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

from retrieval_sets import gold_leaks, load_journal_set, load_locomo, ndcg_at, recall_at, reciprocal_rank

from journal import Journal
from journal.encoding import document_text
from journal.ranking.fusion import FusionParams, fuse

KS = (3, 5, 10, 25, 50)
MODES = ("lexical", "semantic", "hybrid")


def _groups(q: dict[str, Any], per_agent: bool) -> tuple[str, ...]:
    return ("overall", q["category"], *([f"agent {q['agent']}"] if per_agent else []))


def evaluate(
    journal: Journal, queries: Sequence[dict[str, Any]], arms: dict[str, list[Any]] | None = None, *, rerank: bool = True
) -> dict[str, dict[str, dict[str, float]]]:
    """``{mode: {group: {metric: value}}}`` with groups ``overall``, each category and, with several agents, each agent.

    *arms*, when given, receives each query's lexical and semantic ``(id, score)`` lists, and under
    ``"partial"`` the lexical hits that lack one of the searched words (what evidence fusion's floor reads).
    ``rerank=False`` (``quality --plain``) ranks without the neighbours' stage.
    """
    from journal.indexing.index import Window

    depth = max(KS)
    per_agent = len({q["agent"] for q in queries}) > 1
    results: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for q in queries:
            # Ranking quality; the floor has its own figures.
            hits = journal.search(q["query"], k=depth, agent=q["agent"], mode=mode, floor=False, rerank=rerank)
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


def run_quality(name: str, payloads: list[dict[str, Any]], queries: list[dict[str, Any]], model: str | None, compare: bool, rerank: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with Journal(Path(tmp) / "j") as writer:  # appended without NN, embedded in batches on the NN open
            for payload in payloads:
                writer.append(payload)
        evaluate_root(name, Path(tmp) / "j", queries, model, compare, rerank)


def evaluate_root(name: str, root: Path, queries: list[dict[str, Any]], model: str | None, compare: bool = False, rerank: bool = True) -> None:
    """Open the journal at *root* with NN (embedding what lacks a vector) and print its quality table."""
    arms: dict[str, list[Any]] = {}
    started = time.perf_counter()
    options = {"model": model} if model else {}
    with Journal(root, enable_nn=True, **options) as journal:
        opened = time.perf_counter() - started
        entries = journal.digest().count
        started = time.perf_counter()
        results = evaluate(journal, queries, arms, rerank=rerank)
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


def run_runner_sets(sizes: Sequence[int], model: str | None, seed: int, compare: bool, rerank: bool = True) -> None:
    from journal_sets import build_runner_set

    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            queries = build_runner_set(Path(tmp) / "journal", size, seed=seed)
            evaluate_root(f"runner journal of {size} runs (seed {seed})", Path(tmp) / "journal", queries, model, compare, rerank)


# -- LoCoMo as the held-out harness stores it ---------------------------------------------

#: The recall cut-offs of the held-out convention; each question is one ``search(question, k=50)``.
HELD_OUT_KS = (5, 10, 25)
HELD_OUT_DEPTH = 50
NEIGHBOUR_WEIGHTS = tuple(round(0.1 * step, 1) for step in range(11))


def _recalls(ranked: Sequence[str], relevant: dict[str, float]) -> dict[str, float]:
    return {f"R@{k}": recall_at(ranked, relevant, k) for k in HELD_OUT_KS}


def _table(rows: dict[str, list[tuple[dict[str, Any], dict[str, float]]]]) -> None:
    """Print mean recall per variant, overall and per category: *rows* maps a variant to its (query, recalls) pairs."""
    for label, scored in rows.items():
        groups: dict[str, list[dict[str, float]]] = defaultdict(list)
        for q, recalls in scored:
            for group in ("overall", q["category"], q["agent"]):
                groups[group].append(recalls)
        for group in ["overall", *sorted(g for g in groups if g != "overall")]:
            means = "  ".join(f"{statistics.fmean(r[f'R@{k}'] for r in groups[group]):6.3f}" for k in HELD_OUT_KS)
            print(f"  {label:<26} {group:<12} {len(groups[group]):>4}  {means}")


def run_locomo(path: Path, model: str | None, modes: Sequence[str]) -> None:
    """LoCoMo dev stored as the held-out harness stores it; turn recall@5/10/25 with and without the new stages, and the neighbour weight cross-validated."""
    from journal.indexing.index import Window
    from journal.ranking.neighbours import NEIGHBOURS

    payloads, queries = load_locomo(path)
    if leaks := gold_leaks(payloads):
        raise SystemExit(f"an evidence id would reach the index in {len(leaks)} entries, e.g. {leaks[0]}")
    print(f"LoCoMo dev as the held-out harness stores it: {len(payloads)} turns, {len(queries)} questions; no evidence id in any entry's text")
    print(f"  {'variant':<26} {'group':<12} {'n':>4}  " + "  ".join(f"{'R@' + str(k):>6}" for k in HELD_OUT_KS))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "j"
        with Journal(root) as writer:
            for payload in payloads:
                writer.append(payload)
        options = {"model": model} if model else {}
        with Journal(root, enable_nn="hybrid" in modes, **options) as journal:
            index = journal._keeper.index
            for mode in modes:
                rows: dict[str, list[tuple[dict[str, Any], dict[str, float]]]] = defaultdict(list)
                bases: list[list[tuple[str, float]]] = []
                near: list[Any] = []
                for q in queries:
                    for rerank in (False, True):
                        hits = journal.search(q["query"], k=HELD_OUT_DEPTH, agent=q["agent"], mode=mode, rerank=rerank)
                        rows[f"{mode}{' + stages' if rerank else ''}"].append((q, _recalls([h.entry_id for h in hits], q["relevant"])))
                        if not rerank:
                            bases.append([(h.entry_id, h.score) for h in hits])
                            near.append(index.neighbours([h.entry_id for h in hits], within_seconds=NEIGHBOURS.window_seconds, window=Window(agent=q["agent"])))
                _table(rows)
                _cross_validate(mode, queries, bases, near)


def _cross_validate(mode: str, queries: Sequence[dict[str, Any]], bases: Sequence[list[tuple[str, float]]], near: Sequence[Any]) -> None:
    """The neighbour weight chosen on all but one conversation, scored on that one (recall@10), for each conversation."""
    from dataclasses import replace

    from journal.ranking.neighbours import NEIGHBOURS, lift

    def recall10(weight: float, picked: Sequence[int]) -> float:
        params = replace(NEIGHBOURS, weight=weight)
        return statistics.fmean(recall_at([i for i, _ in lift(bases[n], near[n].linked, params, adjacent=near[n].adjacent)], queries[n]["relevant"], 10) for n in picked)

    conversations = sorted({q["agent"] for q in queries})
    grid = "  ".join(f"{w:.1f}:{recall10(w, range(len(queries))):.3f}" for w in NEIGHBOUR_WEIGHTS)
    print(f"  {mode}: R@10 by neighbour weight, all questions  {grid}")
    held: list[float] = []
    for apart in conversations:
        train = [n for n, q in enumerate(queries) if q["agent"] != apart]
        test = [n for n, q in enumerate(queries) if q["agent"] == apart]
        best = max(NEIGHBOUR_WEIGHTS, key=lambda w: (recall10(w, train), -w))
        held += [recall10(best, [n]) for n in test]
        print(f"  {mode}: weight chosen without {apart}: {best:.1f}; {apart} R@10 {recall10(best, test):.3f} (weight 0: {recall10(0.0, test):.3f})")
    print(f"  {mode}: held-apart R@10 over all {len(held)} questions {statistics.fmean(held):.3f}")


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


def _cpu_ms(call: Callable[[], Any]) -> float:
    """The CPU time of *call* in this process, in ms: a busy machine's waits for a core are not the search's cost."""
    started = time.process_time()
    call()
    return (time.process_time() - started) * 1000


def run_stage_speed(entries: int, runs: int) -> None:
    """p50/p95 search latency at *entries* with the neighbours' stage (the default) and without (rerank=False), and the added time per query.

    Every entry continues the one before it of its agent (the densest linking a
    journal has), four agents, entries of one agent 7 minutes apart (each is its
    neighbour's in time too). Vectors are random unit vectors stored under the
    model's identity; queries are embedded by the real model (and memoised, as
    in use). Times are the process's CPU time: on a busy machine the waits for a
    core are not the search's cost.
    """
    import numpy as np

    from journal.encoding import load_encoder

    encoder = load_encoder()
    rng = np.random.default_rng(5)

    class _RandomDocuments:
        identity = encoder.identity

        def encode(self, texts: Sequence[str]) -> Any:
            vectors = rng.standard_normal((len(texts), encoder.dimension)).astype(np.float32)
            return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    queries = ["harbor light at night", "what did I think about the train station?", "fog mirror", "memory of rain on the studio window",
               "server latency again", "letters written in ink", "the garden after the rain", "kettle on the balcony"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "stages"
        payloads = synthetic_payloads(entries, seed=3)
        start = datetime(2024, 1, 1, tzinfo=UTC)
        for i, payload in enumerate(payloads):
            payload["id"] = f"s{i:07d}"
            payload["ts"] = (start + timedelta(minutes=7 * (i // 4))).isoformat()
            if i >= 4:
                payload["signals"] = {"continuity_refs": [f"s{i - 4:07d}"]}
        with Journal(root) as plain:
            for payload in payloads:
                plain.append(payload)
        with Journal(root, enable_nn=True, encoder=_RandomDocuments()) as journal:
            journal.embed()
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            for q in queries:
                journal.search(q, k=8)  # the query vectors memoised, the matrix loaded
            print(f"\nsearch at {entries} entries ({entries // 4} per agent, each continuing the one before), k=8, {runs} runs of {len(queries)} queries")
            print("  CPU time                           p50 ms   p95 ms")
            for mode in ("lexical", "hybrid"):
                for agent in ("agent1", None):
                    times: dict[bool, list[float]] = {True: [], False: []}
                    added: list[float] = []
                    for _ in range(runs):
                        for q in queries:
                            pair = {
                                rerank: _cpu_ms(lambda q=q, a=agent, m=mode, r=rerank: journal.search(q, k=8, agent=a, mode=m, rerank=r))
                                for rerank in (False, True)
                            }
                            for rerank, value in pair.items():
                                times[rerank].append(value)
                            added.append(pair[True] - pair[False])
                    label = f"{mode} {'one agent' if agent else 'all agents'}"
                    print(f"  {label:<20} plain       {_pct(times[False], .5):7.2f}  {_pct(times[False], .95):7.2f}")
                    print(f"  {label:<20} neighbours  {_pct(times[True], .5):7.2f}  {_pct(times[True], .95):7.2f}")
                    print(f"  {label:<20} added       {_pct(added, .5):7.2f}  {_pct(added, .95):7.2f}")


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
    quality.add_argument("--plain", action="store_true", help="rank without the neighbours' stage (search(..., rerank=False))")
    held = sub.add_parser("locomo", help="LoCoMo dev stored as the held-out harness stores it: turn recall@5/10/25, the new stages on and off")
    held.add_argument("path", type=Path, help="the locomo-dev directory (or its JSON file)")
    held.add_argument("--modes", default="lexical,hybrid", help="comma-separated modes (default lexical,hybrid)")
    held.add_argument("--model", help="model name or directory (default: the journal's default)")
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
    stages = sub.add_parser("stages-speed", help="search latency with the neighbours' stage and without (rerank=False)")
    stages.add_argument("--entries", type=int, default=10_000)
    stages.add_argument("--runs", type=int, default=5, help="rounds of the eight queries per row")
    speed = sub.add_parser("speed", help="embedding throughput, search latency, append latency")
    speed.add_argument("--entries", type=int, default=100_000)
    speed.add_argument("--embed-entries", type=int, default=4000)
    speed.add_argument("--model")
    args = parser.parse_args()
    if args.command == "quality":
        if not args.locomo and not args.journal_set and not args.runner:
            parser.error("pass --locomo PATH, --journal-set PATH and/or --runner SIZES")
        if args.journal_set:
            run_quality(f"journal set {args.journal_set.name}", *load_journal_set(args.journal_set), args.model, args.compare, not args.plain)
        if args.locomo:
            run_quality("LoCoMo dev (conv-26, conv-30)", *load_locomo(args.locomo, layout="paper"), args.model, args.compare, not args.plain)
        if args.runner:
            run_runner_sets([int(size) for size in args.runner.split(",")], args.model, args.seed, args.compare, not args.plain)
    elif args.command == "stages-speed":
        run_stage_speed(args.entries, args.runs)
    elif args.command == "locomo":
        run_locomo(args.path, args.model, args.modes.split(","))
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
