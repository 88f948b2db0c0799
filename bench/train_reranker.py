"""Trains the learned reranker (journal/ranking/reranker.json) and judges it on conversations it was not trained on (a benchmark, not a test).

    python bench/train_reranker.py ../shared/data/locomo-dev --write journal/ranking/reranker.json

Trained only on the LoCoMo dev split (conv-26, conv-30, stored as the
held-out harness stores it: ``load_locomo``'s ``journal`` layout) and judged
on the journal-shaped set ``bench/journal_set.json`` as well. Each question
is one ``search(question, k=50, agent=<its conversation>)``; for its
candidates the bench records the features the journal itself computes when
a reranker is on (``journal.ranking.reranker.candidate_features``: each
arm's score and rank, the fused score before and after the neighbours'
stage, the fused scores of the entries next to it, whether it holds every
searched word, recency, links), so the shipped weights meet at search time
exactly the numbers they were fitted on.

The model is a logistic model over those features, trained listwise (a
softmax over each question's candidates against its evidence turns).
Cross-validation across conversations: for each conversation, the L2
strength is chosen by 3-fold cross-validation on the other conversation's
questions, the model is fitted on all of them, and only then scored on the
conversation held apart. The figures that count are those held apart,
against the neighbours' stage (the journal's ranking) on the same questions.
The shipped weights are then fitted on all of LoCoMo dev; the file turns the
reranker on by default only if, held apart, it raised recall@10 in every
mode by at least MARGIN and lost nothing on the journal set.
"""

from __future__ import annotations

import argparse
import json
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

from journal import Journal
from journal.ranking.reranker import DEPTH, FEATURES, FORMAT, MODES, VERSION, Reranker, candidate_features

L2 = (0.01, 0.1, 1.0)
KS = (5, 10, 25)
#: How much held-apart recall@10 the model must add in every mode to be on by default.
MARGIN = 0.005


class _Recorder:
    """Stands in for the journal's reranker: records each ranking's candidates and features, and changes nothing."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[list[float]]]] = []

    def rerank(self, index: Any, query: Any, window: Any, mode: str, **lists: Any) -> list[tuple[str, float]]:
        self.seen.append(candidate_features(index, query, window, **lists))
        return list(lists["lifted"])


def collect(name: str, payloads: list[dict[str, Any]], queries: list[dict[str, Any]], modes: Sequence[str]) -> list[dict[str, Any]]:
    """Each question's served ranking (the journal's, neighbours' stage on) and its candidates' features, per mode."""
    gold = {entry_id for q in queries for entry_id in q["relevant"]}
    if leaks := gold_leaks(payloads, gold):
        raise SystemExit(f"{name}: a gold marker would reach the index in {len(leaks)} entries, e.g. {leaks[0]}")
    items = []
    with tempfile.TemporaryDirectory() as tmp:
        with Journal(Path(tmp) / "j") as writer:
            for payload in payloads:
                writer.append(payload)
        with Journal(Path(tmp) / "j", enable_nn="hybrid" in modes) as journal:
            recorder = _Recorder()
            journal._ranker.reranker = recorder  # type: ignore[assignment]
            for q in queries:
                for mode in modes:
                    recorder.seen.clear()
                    served = [hit.entry_id for hit in journal.search(q["query"], k=DEPTH, agent=q["agent"], mode=mode)]
                    ids, rows = recorder.seen[-1] if recorder.seen else ([], [])
                    if ids[: len(served)] != served:
                        raise SystemExit(f"{name}: the recorded ranking is not the one served for {q['query']!r}")
                    items.append({"q": q, "mode": mode, "served": served, "ids": ids, "rows": rows})
    return items


def fit(items: Sequence[dict[str, Any]], l2: float, steps: int = 300) -> np.ndarray:
    """Listwise logistic weights: a softmax over each question's candidates, its evidence the target (Adam, L2 on the weights)."""
    lists = []
    for item in items:
        labels = np.array([1.0 if entry_id in item["q"]["relevant"] else 0.0 for entry_id in item["ids"]])
        if item["ids"] and labels.sum() > 0:
            lists.append((np.array(item["rows"]), labels / labels.sum()))
    weights = np.zeros(len(FEATURES))
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


def reordered(item: dict[str, Any], weights: np.ndarray) -> list[str]:
    """The order the journal serves with *weights* (``Reranker.order``: ties keep the served order)."""
    if not item["ids"]:
        return list(item["served"])
    return Reranker({item["mode"]: tuple(weights)}, True, "").order(item["mode"], item["ids"], item["rows"])


def mean_recall(items: Sequence[dict[str, Any]], rankings: Sequence[Sequence[str]], k: int) -> float:
    return statistics.fmean(recall_at(ranked, item["q"]["relevant"], k) for item, ranked in zip(items, rankings, strict=True))


def choose(items: Sequence[dict[str, Any]], seed: int) -> float:
    """The L2 strength with the best recall@10 in 3-fold cross-validation over *items* (one conversation's questions)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    folds = [order[n::3] for n in range(3)]
    best = (-1.0, L2[0])
    for l2 in L2:
        held: list[float] = []
        for fold in folds:
            inside = set(fold)
            weights = fit([items[n] for n in order if n not in inside], l2)
            held += [recall_at(reordered(items[n], weights), items[n]["q"]["relevant"], 10) for n in fold]
        if (score := statistics.fmean(held)) > best[0]:
            best = (score, l2)
    return best[1]


def report(label: str, items: Sequence[dict[str, Any]], rankings: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Prints recall@5/10/25 of the neighbours' stage -> *rankings*, overall and per category; returns the overall figures."""
    groups: dict[str, list[int]] = defaultdict(list)
    for n, item in enumerate(items):
        groups["overall"].append(n)
        groups[item["q"]["category"]].append(n)
    overall: dict[str, dict[str, float]] = {}
    for group in ["overall", *sorted(g for g in groups if g != "overall")]:
        picked = groups[group]
        chosen = [items[n] for n in picked]
        served = {k: mean_recall(chosen, [items[n]["served"] for n in picked], k) for k in KS}
        learned = {k: mean_recall(chosen, [rankings[n] for n in picked], k) for k in KS}
        print(f"  {label:<12} {group:<16} {len(picked):>4}  " + "  ".join(f"R@{k} {served[k]:.3f} -> {learned[k]:.3f}" for k in KS))
        if group == "overall":
            overall = {"neighbours": {f"R@{k}": round(served[k], 3) for k in KS}, "reranker": {f"R@{k}": round(learned[k], 3) for k in KS}}
    return overall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("locomo", type=Path, help="the locomo-dev directory (or its JSON file)")
    parser.add_argument("--journal-set", type=Path, default=Path(__file__).resolve().parent / "journal_set.json")
    parser.add_argument("--seed", type=int, default=7, help="seed of the inner cross-validation's folds")
    parser.add_argument(
        "--write", type=Path, metavar="FILE", help="write the weights fitted on all of LoCoMo dev here (journal/ranking/reranker.json)"
    )
    args = parser.parse_args()
    locomo = collect("LoCoMo dev", *load_locomo(args.locomo), MODES)
    journal_set = collect("journal set", *load_journal_set(args.journal_set), MODES)
    print(
        f"LoCoMo dev as the held-out harness stores it: {len(locomo) // len(MODES)} questions; journal set: {len(journal_set) // len(MODES)} questions"
    )
    print("recall of the neighbours' stage -> the learned reranker, on questions the model was not trained on")
    shipped: dict[str, list[float]] = {}
    held_apart: dict[str, Any] = {}
    gains = []
    for mode in MODES:
        items = [item for item in locomo if item["mode"] == mode]
        held: list[list[str]] = [[] for _ in items]
        for apart in sorted({item["q"]["agent"] for item in items}):
            train = [item for item in items if item["q"]["agent"] != apart]
            l2 = choose(train, args.seed)
            weights = fit(train, l2)
            for n, item in enumerate(items):
                if item["q"]["agent"] == apart:
                    held[n] = reordered(item, weights)
            print(f"{mode}: held apart {apart}: L2 {l2} chosen on the other conversation")
        figures = report(mode, items, held)
        l2 = choose(items, args.seed)
        weights = fit(items, l2)
        shipped[mode] = [round(float(w), 4) for w in weights]
        print(
            f"{mode}: fitted on all of LoCoMo dev, L2 {l2}: "
            + ", ".join(f"{name} {w:+.2f}" for name, w in zip(FEATURES, weights, strict=True))
        )
        others = [item for item in journal_set if item["mode"] == mode]
        jset = report(f"{mode} jset", others, [reordered(item, weights) for item in others])
        held_apart[mode] = {"locomo_dev_across_conversations": figures, "journal_set": jset}
        gains.append(
            figures["reranker"]["R@10"] - figures["neighbours"]["R@10"] >= MARGIN and jset["reranker"]["R@10"] >= jset["neighbours"]["R@10"]
        )
    enabled = all(gains)
    print(
        f"on by default: {'yes' if enabled else 'no'} (held apart, recall@10 must rise by {MARGIN} in every mode and not fall on the journal set)"
    )
    if args.write:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "enabled": enabled,
            "trained_on": "LoCoMo dev (conv-26, conv-30) as the held-out harness stores it; judged on bench/journal_set.json",
            "script": "python bench/train_reranker.py ../shared/data/locomo-dev --write journal/ranking/reranker.json",
            "features": list(FEATURES),
            "weights": shipped,
            "held_apart": held_apart,
        }
        args.write.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
