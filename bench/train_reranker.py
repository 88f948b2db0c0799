"""Trains the learned reranker (journal/ranking/reranker.json) and judges it on conversations it was not trained on (a benchmark, not a test).

    python bench/train_reranker.py ../shared/data/locomo-dev --write journal/ranking/reranker.json

Four sets, so that the model does not fit one conversation: the LoCoMo dev
split (conv-26, conv-30, stored as the held-out harness stores it:
``load_locomo``'s ``journal`` layout), synthetic conversations with known
evidence turns in the same layout (``conversation_sets.py``, 8 by default),
the journal-shaped set ``bench/journal_set.json`` and a runner-written
journal with planted paraphrases and rare words (``journal_sets.py``, 1,000
runs). Each question is one ``search(question, k=50, agent=<its agent>)``;
for its candidates the bench records the features the journal itself
computes when a reranker is on (``journal.ranking.reranker.candidate_features``),
so the shipped weights meet at search time exactly the numbers they were
fitted on.

The model is a logistic model over those features, trained listwise (a
softmax over each question's candidates against its evidence turns), its L2
penalty pulling it towards the served order (the neighbours' stage) rather
than towards zero. Held apart: every conversation (each LoCoMo one, each
synthetic one) and each of the two journal sets in turn is scored by a model
that never saw it: fitted on every other group, its L2 strength chosen by
3-fold cross-validation on them (folds by conversation). The figures that
count are those held apart, against the neighbours' stage on the same
questions. The shipped weights are then fitted on every set; the file turns
the reranker on by default only if, held apart, it raised LoCoMo recall@10
by at least MARGIN in every mode and lost on no set at any k.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent))

from conversation_sets import synthetic_conversations
from journal_sets import build_runner_set
from retrieval_sets import gold_leaks, load_journal_set, load_locomo, recall_at

from journal import Journal
from journal.ranking.reranker import DEPTH, FEATURES, FORMAT, MODES, VERSION, Reranker, candidate_features

L2 = (0.01, 0.1, 1.0, 10.0)
#: Synthetic conversations learned from by default.
SYNTHETIC = 8
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


def collect(
    name: str, write: Callable[[Path], list[dict[str, Any]]], modes: Sequence[str], group: Callable[[dict[str, Any]], str]
) -> list[dict[str, Any]]:
    """Each question's served ranking (the journal's, neighbours' stage on) and its candidates' features, per mode.

    *write* fills a journal at the path it is given and returns the questions;
    *group* names the conversation (or set) a question belongs to, the unit held apart.
    """
    items = []
    with tempfile.TemporaryDirectory() as tmp:
        queries = write(Path(tmp) / "j")
        with Journal(Path(tmp) / "j", enable_nn="hybrid" in modes) as journal:
            if "hybrid" in modes:
                journal.embed()
            recorder = _Recorder()
            journal._ranker.reranker = recorder  # type: ignore[assignment]
            for q in queries:
                for mode in modes:
                    recorder.seen.clear()
                    served = [hit.entry_id for hit in journal.search(q["query"], k=DEPTH, agent=q["agent"], mode=mode)]
                    ids, rows = recorder.seen[-1] if recorder.seen else ([], [])
                    if ids[: len(served)] != served:
                        raise SystemExit(f"{name}: the recorded ranking is not the one served for {q['query']!r}")
                    items.append({"q": q, "mode": mode, "served": served, "ids": ids, "rows": rows, "set": name, "group": group(q)})
    return items


def appended(name: str, payloads: list[dict[str, Any]], queries: list[dict[str, Any]]) -> Callable[[Path], list[dict[str, Any]]]:
    """A writer of *payloads* into a journal, refusing a set whose entries name an evidence id."""
    gold = {entry_id for q in queries for entry_id in q["relevant"]}
    if leaks := gold_leaks(payloads, gold):
        raise SystemExit(f"{name}: a gold marker would reach the index in {len(leaks)} entries, e.g. {leaks[0]}")

    def write(root: Path) -> list[dict[str, Any]]:
        with Journal(root) as writer:
            for payload in payloads:
                writer.append(payload)
        return queries

    return write


def fit(items: Sequence[dict[str, Any]], l2: float, steps: int = 400) -> np.ndarray:
    """Listwise logistic weights: a softmax over each question's candidates, its evidence the target (Adam).

    The L2 penalty pulls the weights towards the served order (a multiple of
    ``lifted_share`` alone, fitted first), not towards zero: the stronger it is,
    the closer the model stays to the neighbours' ranking it reorders.
    """
    lists = [item for item in items if item["ids"] and any(entry_id in item["q"]["relevant"] for entry_id in item["ids"])]
    width = max((len(item["ids"]) for item in lists), default=1)
    features = np.zeros((len(lists), width, len(FEATURES)))
    target = np.zeros((len(lists), width))
    present = np.zeros((len(lists), width), dtype=bool)
    for n, item in enumerate(lists):
        features[n, : len(item["ids"])] = item["rows"]
        labels = np.array([1.0 if entry_id in item["q"]["relevant"] else 0.0 for entry_id in item["ids"]])
        target[n, : len(labels)] = labels / labels.sum()
        present[n, : len(labels)] = True
    served = np.zeros(len(FEATURES))
    served[FEATURES.index("lifted_share")] = 1.0
    prior = _adam(features, target, present, np.zeros(len(FEATURES)), 0.0, steps, mask=served) if lists else served
    return _adam(features, target, present, prior, l2, steps) if lists else prior


def _adam(
    features: np.ndarray, target: np.ndarray, present: np.ndarray, centre: np.ndarray, l2: float, steps: int, mask: np.ndarray | None = None
) -> np.ndarray:
    """Weights from *centre* minimising the lists' softmax loss plus ``l2 * |w - centre|^2 / 2``; *mask* leaves only some weights free."""
    weights = centre.copy()
    first, second = np.zeros_like(weights), np.zeros_like(weights)
    for step in range(1, steps + 1):
        scores = np.where(present, features @ weights, -np.inf)
        shares = np.exp(scores - scores.max(axis=1, keepdims=True))
        shares /= shares.sum(axis=1, keepdims=True)
        gradient = l2 * (weights - centre) + np.einsum("lc,lcf->f", shares - target, features) / len(features)
        if mask is not None:
            gradient *= mask
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
    """The L2 strength with the best recall@10 in 3-fold cross-validation over *items*, folds split by conversation where there are enough."""
    groups = sorted({item["group"] for item in items})
    random.Random(seed).shuffle(groups)
    fold_of = {group: n % 3 for n, group in enumerate(groups)}
    if len(groups) < 3:  # too few conversations: split their questions instead
        order = list(range(len(items)))
        random.Random(seed).shuffle(order)
        folds = [set(order[n::3]) for n in range(3)]
    else:
        folds = [{n for n, item in enumerate(items) if fold_of[item["group"]] == f} for f in range(3)]
    best = (-1.0, L2[0])
    for l2 in L2:
        held: list[float] = []
        for fold in folds:
            weights = fit([item for n, item in enumerate(items) if n not in fold], l2)
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
    parser.add_argument(
        "--synthetic",
        type=int,
        default=SYNTHETIC,
        metavar="N",
        help=f"synthetic conversations to make and learn from (default {SYNTHETIC})",
    )
    parser.add_argument(
        "--runner", type=int, default=1000, metavar="RUNS", help="size of the runner-written journal with planted paraphrases (0: none)"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the inner cross-validation's folds")
    parser.add_argument(
        "--write", type=Path, metavar="FILE", help="write the weights fitted on every set here (journal/ranking/reranker.json)"
    )
    args = parser.parse_args()
    by_agent: Callable[[dict[str, Any]], str] = lambda q: q["agent"]  # noqa: E731 - one conversation, one agent
    sets = [collect("LoCoMo dev", appended("LoCoMo dev", *load_locomo(args.locomo)), MODES, by_agent)]
    if args.synthetic:
        sets.append(collect("synthetic", appended("synthetic", *synthetic_conversations(args.synthetic)), MODES, by_agent))
    sets.append(collect("journal set", appended("journal set", *load_journal_set(args.journal_set)), MODES, lambda q: "journal set"))
    if args.runner:
        sets.append(collect("runner", lambda root: build_runner_set(root, args.runner, seed=11), MODES, lambda q: "runner"))
    everything = [item for items in sets for item in items]
    print(
        "sets: "
        + "; ".join(
            f"{items[0]['set']} {len(items) // len(MODES)} questions in {len({i['group'] for i in items})} groups" for items in sets
        )
    )
    print("recall of the neighbours' stage -> the learned reranker, each group scored by a model trained on every other group")
    shipped: dict[str, list[float]] = {}
    held_apart: dict[str, Any] = {}
    gains = []
    for mode in MODES:
        items = [item for item in everything if item["mode"] == mode]
        held: list[list[str]] = [[] for _ in items]
        for apart in sorted({item["group"] for item in items}):
            train = [item for item in items if item["group"] != apart]
            l2 = choose(train, args.seed)
            weights = fit(train, l2)
            for n, item in enumerate(items):
                if item["group"] == apart:
                    held[n] = reordered(item, weights)
            print(f"{mode}: held apart {apart}: L2 {l2} chosen without it")
        figures = {}
        for items_of_set in sets:
            name = items_of_set[0]["set"]
            picked = [n for n, item in enumerate(items) if item["set"] == name]
            figures[name] = report(f"{mode} {name}"[:20], [items[n] for n in picked], [held[n] for n in picked])
        l2 = choose(items, args.seed)
        weights = fit(items, l2)
        shipped[mode] = [round(float(w), 4) for w in weights]
        print(f"{mode}: fitted on every set, L2 {l2}: " + ", ".join(f"{name} {w:+.2f}" for name, w in zip(FEATURES, weights, strict=True)))
        held_apart[mode] = figures
        locomo = figures["LoCoMo dev"]
        gains.append(
            locomo["reranker"]["R@10"] - locomo["neighbours"]["R@10"] >= MARGIN
            and all(f["reranker"][f"R@{k}"] >= f["neighbours"][f"R@{k}"] for f in figures.values() for k in KS)
        )
    enabled = all(gains)
    print(
        f"on by default: {'yes' if enabled else 'no'} (held apart, LoCoMo recall@10 must rise by {MARGIN} in every mode and no set lose at any k)"
    )
    if args.write:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "enabled": enabled,
            "trained_on": (
                f"LoCoMo dev (conv-26, conv-30) as the held-out harness stores it, {args.synthetic} synthetic conversations"
                f" (bench/conversation_sets.py), bench/journal_set.json, a runner-written journal of {args.runner} runs (bench/journal_sets.py)"
            ),
            "script": "python bench/train_reranker.py ../shared/data/locomo-dev --write journal/ranking/reranker.json",
            "features": list(FEATURES),
            "weights": shipped,
            "held_apart": held_apart,
        }
        args.write.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
