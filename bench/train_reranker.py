"""A learned reranker over the neighbours' stage, trained and judged on conversations it was not trained on (a benchmark, not a test).

    python bench/train_reranker.py ../shared/data/locomo-dev

Trained only on the LoCoMo dev split (conv-26, conv-30, stored as the
held-out harness stores it: ``load_locomo``'s ``journal`` layout) and judged
on the journal-shaped set ``bench/journal_set.json`` as well. Each question
is one ``search(question, k=50, agent=<its conversation>)``; the bench
records, for its 50 hits, the fused ranking before the neighbours' stage and
after it (the journal's own, captured as it ranks), each arm's scores and
the index's neighbours, and computes cheap features per candidate: fused
score and rank before and after the stage, BM25 score and rank, cosine and
rank (hybrid), the fused score of the entry it continues, of the one that
continues it and of those just before or after it, whether it holds every
searched word, the share of the searched words it holds, how recent it is
among the candidates and how many links it has.

The model is a logistic model over those features trained listwise (a
softmax over each question's 50 candidates against its evidence turns), in
two variants: *after* the neighbours' stage (its scores are features) and
*instead* of it (only the neighbours' scores are). Cross-validation across
conversations: for each conversation, the variant and L2 strength are chosen
by 3-fold cross-validation on the other conversation's questions, the model
is fitted on all of them, and only then scored on the conversation held
apart. The figures that count are those held apart, against the neighbours'
stage (the journal's ranking) on the same questions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent))

from retrieval_sets import gold_leaks, load_journal_set, load_locomo, recall_at

import journal.ranking.search as ranking_search
from journal import Journal
from journal.indexing import QueryWords
from journal.indexing._fts import query_terms
from journal.indexing.index import Window
from journal.ranking.neighbours import NEIGHBOURS

FEATURES = (
    "base_share", "base_rank", "lifted_share", "lifted_rank", "lexical_share", "lexical_rank", "cosine", "cosine_rank",
    "continues_share", "continued_share", "adjacent_share", "every_word", "coverage", "recency", "links",
)
#: The features the *instead* variant leaves out: the neighbours' stage's own scores.
STAGE_FEATURES = ("lifted_share", "lifted_rank")
VARIANTS = ("after", "instead")
L2 = (0.01, 0.1, 1.0)
KS = (5, 10, 25)
DEPTH = 50


def _shares(ranked: Sequence[tuple[str, float]]) -> dict[str, float]:
    top = max((score for _, score in ranked), default=0.0)
    return {entry_id: (score / top if top > 0 else 0.0) for entry_id, score in ranked}


def _ranks(ranked: Sequence[tuple[str, float]]) -> dict[str, float]:
    return {entry_id: 1.0 / (1 + rank) for rank, (entry_id, _) in enumerate(ranked)}


def candidate_features(
    journal: Journal, query: str, window: Window, stage: dict[str, list[tuple[str, float]]], semantic: list[tuple[str, float]], texts: dict[str, str]
) -> tuple[list[str], list[list[float]]]:
    """The ids of the best DEPTH candidates after the neighbours' stage and each one's features (in FEATURES order)."""
    index = journal._keeper.index
    words = QueryWords.of(query)
    base, lifted = stage["base"], stage["lifted"]
    ids = [entry_id for entry_id, _ in lifted[:DEPTH]]
    lexical = [(r.row.id, r.score) for r in index.search(words, k=DEPTH, window=window, with_snippets=False)]
    base_share, base_rank, lifted_share, lifted_rank = _shares(base), _ranks(base), _shares(lifted), _ranks(lifted)
    lexical_share, lexical_rank, cosine, cosine_rank = _shares(lexical), _ranks(lexical), dict(semantic), _ranks(semantic)
    near = index.neighbours(ids, within_seconds=NEIGHBOURS.window_seconds, window=window)
    times = {row.id: row.ts_utc for row in index.rows(window, ids=sorted(set(ids).union(*near.linked.values())))}
    hits = [entry_id for entry_id in ids if entry_id in lexical_share]
    partial = index.partial_matches(words, hits, window) if hits else set()
    asked = set(words.terms)
    newest = sorted(ids, key=lambda entry_id: times.get(entry_id, ""), reverse=True)
    recency = {entry_id: 1.0 - n / max(1, len(ids) - 1) for n, entry_id in enumerate(newest)}
    rows = []
    for entry_id in ids:
        own, linked = times.get(entry_id, ""), near.linked.get(entry_id, set())
        rows.append([
            base_share.get(entry_id, 0.0), base_rank.get(entry_id, 0.0), lifted_share.get(entry_id, 0.0), lifted_rank.get(entry_id, 0.0),
            lexical_share.get(entry_id, 0.0), lexical_rank.get(entry_id, 0.0), cosine.get(entry_id, 0.0), cosine_rank.get(entry_id, 0.0),
            max((base_share.get(o, 0.0) for o in linked if times.get(o, "") < own), default=0.0),
            max((base_share.get(o, 0.0) for o in linked if times.get(o, "") > own), default=0.0),
            max((base_share.get(o, 0.0) for o in near.adjacent.get(entry_id, ())), default=0.0),
            1.0 if entry_id in lexical_share and entry_id not in partial else 0.0,
            len(asked & set(query_terms(texts.get(entry_id, "")))) / max(1, len(asked)),
            recency[entry_id],
            min(len(linked), 3) / 3,
        ])
    return ids, rows


def collect(name: str, payloads: list[dict[str, Any]], queries: list[dict[str, Any]], modes: Sequence[str]) -> list[dict[str, Any]]:
    """Each question's served ranking (the journal's, neighbours' stage on) and its candidates' features, per mode."""
    gold = {entry_id for q in queries for entry_id in q["relevant"]}
    if leaks := gold_leaks(payloads, gold):
        raise SystemExit(f"{name}: a gold marker would reach the index in {len(leaks)} entries, e.g. {leaks[0]}")
    texts = {p["id"]: " ".join((p.get("theme", ""), p.get("voice", ""), *p.get("tags", ()))) for p in payloads}
    captured: list[dict[str, list[tuple[str, float]]]] = []
    plain = ranking_search.with_neighbours

    def capturing(index: Any, ranked: Any, window: Any, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        lifted = plain(index, ranked, window, *args, **kwargs)
        captured.append({"base": list(ranked), "lifted": lifted})
        return lifted

    items = []
    with tempfile.TemporaryDirectory() as tmp:
        with Journal(Path(tmp) / "j") as writer:
            for payload in payloads:
                writer.append(payload)
        ranking_search.with_neighbours = capturing  # type: ignore[assignment]
        try:
            with Journal(Path(tmp) / "j", enable_nn="hybrid" in modes) as journal:
                semantic_index = journal._keeper.semantic
                for q in queries:
                    window = Window(agent=q["agent"])
                    for mode in modes:
                        captured.clear()
                        served = [hit.entry_id for hit in journal.search(q["query"], k=DEPTH, agent=q["agent"], mode=mode)]
                        ids: list[str] = []
                        rows: list[list[float]] = []
                        if captured:
                            semantic = semantic_index.rank(semantic_index.query_vector(q["query"]), DEPTH, window) if mode == "hybrid" and semantic_index else []
                            ids, rows = candidate_features(journal, q["query"], window, captured[-1], semantic, texts)
                            if ids[: len(served)] != served:
                                raise SystemExit(f"{name}: the captured ranking is not the one served for {q['query']!r}")
                        items.append({"q": q, "mode": mode, "served": served, "ids": ids, "rows": rows})
        finally:
            ranking_search.with_neighbours = plain  # type: ignore[assignment]
    return items


def _columns(variant: str) -> list[int]:
    return [n for n, name in enumerate(FEATURES) if variant == "after" or name not in STAGE_FEATURES]


def fit(items: Sequence[dict[str, Any]], variant: str, l2: float, steps: int = 300) -> np.ndarray:
    """Listwise logistic weights: a softmax over each question's candidates, its evidence the target (Adam, L2 on the weights)."""
    columns = _columns(variant)
    lists = []
    for item in items:
        labels = np.array([1.0 if entry_id in item["q"]["relevant"] else 0.0 for entry_id in item["ids"]])
        if item["ids"] and labels.sum() > 0:
            lists.append((np.array(item["rows"])[:, columns], labels / labels.sum()))
    weights = np.zeros(len(columns))
    first, second = np.zeros_like(weights), np.zeros_like(weights)
    for step in range(1, steps + 1):
        gradient = l2 * weights
        for features, target in lists:
            scores = features @ weights
            shares = np.exp(scores - scores.max())
            gradient += features.T @ (shares / shares.sum() - target) / len(lists)
        first = 0.9 * first + 0.1 * gradient
        second = 0.999 * second + 0.001 * gradient**2
        weights -= 0.05 * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return weights


def reordered(item: dict[str, Any], variant: str, weights: np.ndarray) -> list[str]:
    if not item["ids"]:
        return list(item["served"])
    scores = np.array(item["rows"])[:, _columns(variant)] @ weights
    return [item["ids"][n] for n in np.argsort(-scores, kind="stable")]


def mean_recall(items: Sequence[dict[str, Any]], rankings: Sequence[Sequence[str]], k: int) -> float:
    return statistics.fmean(recall_at(ranked, item["q"]["relevant"], k) for item, ranked in zip(items, rankings, strict=True))


def choose(items: Sequence[dict[str, Any]], seed: int) -> tuple[str, float]:
    """The variant and L2 strength with the best recall@10 in 3-fold cross-validation over *items* (one conversation's questions)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    folds = [order[n::3] for n in range(3)]
    best: tuple[float, str, float] = (-1.0, "after", L2[0])
    for variant in VARIANTS:
        for l2 in L2:
            held: list[float] = []
            for fold in folds:
                inside = set(fold)
                weights = fit([items[n] for n in order if n not in inside], variant, l2)
                held += [recall_at(reordered(items[n], variant, weights), items[n]["q"]["relevant"], 10) for n in fold]
            if (score := statistics.fmean(held)) > best[0]:
                best = (score, variant, l2)
    return best[1], best[2]


def report(label: str, items: Sequence[dict[str, Any]], rankings: Sequence[Sequence[str]]) -> None:
    """Recall@5/10/25 of the neighbours' stage and of *rankings*, overall and per category."""
    groups: dict[str, list[int]] = defaultdict(list)
    for n, item in enumerate(items):
        groups["overall"].append(n)
        groups[item["q"]["category"]].append(n)
    for group in ["overall", *sorted(g for g in groups if g != "overall")]:
        picked = groups[group]
        served = [items[n]["served"] for n in picked]
        learned = [rankings[n] for n in picked]
        chosen = [items[n] for n in picked]
        figures = "  ".join(f"R@{k} {mean_recall(chosen, served, k):.3f} -> {mean_recall(chosen, learned, k):.3f}" for k in KS)
        print(f"  {label:<10} {group:<12} {len(picked):>4}  {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("locomo", type=Path, help="the locomo-dev directory (or its JSON file)")
    parser.add_argument("--journal-set", type=Path, default=Path(__file__).resolve().parent / "journal_set.json")
    parser.add_argument("--modes", default="lexical,hybrid", help="comma-separated modes (default lexical,hybrid)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the inner cross-validation's folds")
    args = parser.parse_args()
    modes = args.modes.split(",")
    locomo = collect("LoCoMo dev", *load_locomo(args.locomo), modes)
    journal_set = collect("journal set", *load_journal_set(args.journal_set), modes)
    print(f"LoCoMo dev as the held-out harness stores it: {len(locomo) // len(modes)} questions; journal set: {len(journal_set) // len(modes)} questions")
    print("recall of the neighbours' stage -> the learned reranker, on questions the model was not trained on")
    for mode in modes:
        items = [item for item in locomo if item["mode"] == mode]
        held: list[list[str]] = [[] for _ in items]
        for apart in sorted({item["q"]["agent"] for item in items}):
            train = [item for item in items if item["q"]["agent"] != apart]
            variant, l2 = choose(train, args.seed)
            weights = fit(train, variant, l2)
            for n, item in enumerate(items):
                if item["q"]["agent"] == apart:
                    held[n] = reordered(item, variant, weights)
            print(f"{mode}: held apart {apart}: chosen on the other conversation: {variant} the neighbours' stage, L2 {l2}")
        report(mode, items, held)
        variant, l2 = choose(items, args.seed)
        weights = fit(items, variant, l2)
        print(f"{mode}: trained on all of LoCoMo dev: {variant}, L2 {l2}; "
              + ", ".join(f"{name} {w:+.2f}" for name, w in zip([FEATURES[n] for n in _columns(variant)], weights, strict=True)))
        others = [item for item in journal_set if item["mode"] == mode]
        report(f"{mode} jset", others, [reordered(item, variant, weights) for item in others])


if __name__ == "__main__":
    main()
