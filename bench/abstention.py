"""The relevance floor of ``bench/bench_retrieval.py abstention``: its calibration, and how well it says "nothing relevant".

Every cosine here is a semantic-mode score (the journal's public search,
``floor=False``), so it is exactly what the floor is compared with.

- Calibration: the floor is the highest cosine, in steps of 0.01, that at
  most 1 % of answerable questions' best relevant entry falls below. The
  answerable questions are LoCoMo's (categories 1 to 4, with evidence), the
  journal-shaped set's and a runner-written journal's planted ones.
- Separation: how well a question's top cosine tells answerable questions
  from unanswerable ones, as AUROC (0.5 is chance, 1 is perfect), on:
  - LoCoMo's adversarial questions (category 5): their answer is absent, but
    each asks about a detail of the conversation told of the other speaker,
    so the history holds text about just that;
  - other conversations' questions: each LoCoMo question asked of the other
    conversation, its speakers' names replaced by that conversation's (in
    the order the conversation names them), so a question reads as if about
    this history but its answer is not in it;
  - LoCoMo's questions asked of the runner-written journal, against that
    journal's own planted questions.
- Cost: at the journal's floor, the share of unanswerable questions left
  with no semantic hit (abstained), and Recall@10 of the answerable ones
  with the floor and without it, in semantic and hybrid mode.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from journal import Journal

__all__ = ["auroc", "calibrate", "run_abstention"]

#: The share of answerable questions whose best relevant entry the floor may drop.
DROP_RATE: Final = 0.01
STEP: Final = 0.01
_ALL: Final = 10_000


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The chance that a random positive scores above a random negative (ties count half)."""
    ordered = sorted([(value, 1) for value in positive] + [(value, 0) for value in negative])
    # Mann-Whitney U from average ranks, so ties share their rank.
    ranks: list[float] = [0.0] * len(ordered)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1][0] == ordered[start][0]:
            end += 1
        for i in range(start, end + 1):
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    positive_ranks = sum(rank for rank, (_, label) in zip(ranks, ordered, strict=True) if label)
    n_pos, n_neg = len(positive), len(negative)
    return (positive_ranks - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def calibrate(best_relevant: Sequence[float], rate: float = DROP_RATE, step: float = STEP) -> float:
    """The highest multiple of *step* that at most *rate* of *best_relevant* fall below."""
    allowed = int(rate * len(best_relevant))
    candidate = 0.0
    for n in range(int(1 / step) + 1):
        value = round(n * step, 6)
        if sum(1 for cosine in best_relevant if cosine < value) > allowed:
            break
        candidate = value
    return candidate


def _cosines(journal: Journal, query: str, agent: str) -> list[tuple[str, float]]:
    return [(hit.entry_id, hit.score) for hit in journal.search(query, k=_ALL, agent=agent, mode="semantic", floor=False)]


def _best_relevant(journal: Journal, queries: Sequence[dict[str, Any]]) -> list[float]:
    found = []
    for q in queries:
        ranked = _cosines(journal, q["query"], q["agent"])
        found.append(next(score for entry_id, score in ranked if entry_id in q["relevant"]))
    return found


def _top(journal: Journal, queries: Sequence[dict[str, Any]]) -> list[float]:
    return [journal.search(q["query"], k=1, agent=q["agent"], mode="semantic", floor=False)[0].score for q in queries]


def _recall(journal: Journal, queries: Sequence[dict[str, Any]], mode: str, floor: bool) -> float:
    values = []
    for q in queries:
        ranked = [hit.entry_id for hit in journal.search(q["query"], k=10, agent=q["agent"], mode=mode, floor=floor)]
        values.append(sum(1 for entry_id in q["relevant"] if entry_id in ranked) / len(q["relevant"]))
    return statistics.fmean(values)


def _abstained(journal: Journal, queries: Sequence[dict[str, Any]]) -> float:
    return statistics.fmean(0.0 if journal.search(q["query"], k=1, agent=q["agent"], mode="semantic") else 1.0 for q in queries)


def _swap_names(question: str, source: tuple[str, str], target: tuple[str, str]) -> str:
    placeholders = {name: f"\x00{n}\x00" for n, name in enumerate(source)}
    for name, mark in placeholders.items():
        question = re.sub(rf"\b{re.escape(name)}\b", mark, question)
    for n, name in enumerate(target):
        question = question.replace(f"\x00{n}\x00", name)
    return question


def _locomo_sets(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """LoCoMo's payloads, answerable questions, adversarial questions and other conversations' questions."""
    from retrieval_sets import load_locomo

    payloads, queries = load_locomo(path, layout="paper")
    source = path / "locomo-dev.json" if path.is_dir() else path
    speakers = {c["sample_id"]: (c["conversation"]["speaker_a"], c["conversation"]["speaker_b"]) for c in json.loads(source.read_text(encoding="utf-8"))}
    answerable = [q for q in queries if q["category"] != "adversarial" and q["relevant"]]
    adversarial = [q for q in queries if q["category"] == "adversarial"]
    crossed = [
        {"agent": other, "query": _swap_names(q["query"], speakers[q["agent"]], speakers[other]), "relevant": {}}
        for q in answerable for other in speakers if other != q["agent"]
    ]
    return payloads, answerable, adversarial, crossed


def run_abstention(locomo: Path, journal_set: Path, runner_size: int, seed: int) -> None:
    from journal_sets import build_runner_set
    from retrieval_sets import load_journal_set

    from journal.encoding.semantic import RELEVANCE_FLOORS

    payloads, answerable, adversarial, crossed = _locomo_sets(locomo)
    set_payloads, set_queries = load_journal_set(journal_set)
    set_answerable = [q for q in set_queries if q["relevant"]]
    with tempfile.TemporaryDirectory() as tmp:
        roots = {name: Path(tmp) / name for name in ("locomo", "set", "runner")}
        for name, rows in (("locomo", payloads), ("set", set_payloads)):
            with Journal(roots[name]) as writer:
                for payload in rows:
                    writer.append(payload)
        runner_queries = build_runner_set(roots["runner"], runner_size, seed=seed)
        foreign = [{"agent": "motoko", "query": q["query"], "relevant": {}} for q in answerable]
        journals = {name: Journal(root, enable_nn=True) for name, root in roots.items()}
        try:
            sets = {"LoCoMo": (journals["locomo"], answerable), "journal set": (journals["set"], set_answerable),
                    f"runner {runner_size}": (journals["runner"], runner_queries)}
            best = {name: _best_relevant(journal, queries) for name, (journal, queries) in sets.items()}
            pooled = [cosine for values in best.values() for cosine in values]
            floor = calibrate(pooled)
            used = journals["locomo"].relevance_floor
            print(f"\nrelevance floor: calibrated {floor:.2f} from {len(pooled)} answerable questions "
                  f"(at most {DROP_RATE:.0%} of best relevant cosines below it); the journal uses {used} ({RELEVANCE_FLOORS})")
            for name, values in best.items():
                below = sum(1 for cosine in values if cosine < (used or 0))
                print(f"  {name:<14} n {len(values):>4}  best relevant cosine: min {min(values):.3f}  p5 "
                      f"{sorted(values)[len(values) // 20]:.3f}  median {statistics.median(values):.3f}  below the floor {below}")
            print("\nseparation by top cosine (AUROC) and abstention at the floor")
            rows = [
                ("LoCoMo adversarial (cat. 5)", journals["locomo"], answerable, adversarial),
                ("LoCoMo other conversations'", journals["locomo"], answerable, crossed),
                ("LoCoMo questions, runner log", journals["runner"], runner_queries, foreign),
            ]
            for label, journal, positives, negatives in rows:
                pos, neg = _top(journal, positives), _top(journal, negatives)
                print(f"  {label:<30} answerable {len(pos):>4}  unanswerable {len(neg):>4}  AUROC {auroc(pos, neg):.3f}  "
                      f"unanswerable with no hit {_abstained(journal, negatives):6.1%}")
            print("\nrecall cost: Recall@10 of answerable questions, without the floor -> with it")
            for name, (journal, queries) in sets.items():
                cells = [f"{mode} {_recall(journal, queries, mode, False):.3f} -> {_recall(journal, queries, mode, True):.3f}" for mode in ("semantic", "hybrid")]
                print(f"  {name:<14} n {len(queries):>4}  " + "   ".join(cells))
        finally:
            for journal in journals.values():
                journal.close()
