"""The freshness suites of ``bench/bench_retrieval.py freshness``: updated facts and recency traps.

``bench/freshness_set.json`` holds scenarios in motoko's voice, plain
entries with no ``supersedes`` link:

- *updated-fact*: two or three versions of one fact, weeks or months apart;
  the newest is the answer. Each is probed with a neutral question and with
  one that presupposes the outdated state, in the old version's words.
- *recency-trap*: one old entry, the only one about its subject, is the
  answer; two to four newer entries share the probe's words but are about
  something else.

A probe passes when the answer is among the hits and ranks above every
other entry of its scenario that is (an entry left out ranks below all).
Every scenario goes into one journal, on top of a runner-written background
(``ghostrunner simulate`` of the default agent) unless ``background`` is 0,
so the scenarios compete with each other and with a year of reflections.
The two splits, ``tune`` and ``check``, were written apart over disjoint
subjects, so that a rule chosen on one can be checked on the other.

With ``--locomo``, the bench also tries the rule every link-free approach
here comes down to, a newer hit very similar to an older one goes above it
(:func:`newer_first`), on the suites and on LoCoMo's recall.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from journal import Journal

__all__ = ["DEPTH", "build_journal", "evaluate", "load_scenarios", "pair_cosines", "print_results", "print_separation", "probe_passes", "run_freshness"]

AGENT: Final = "motoko"
#: How many hits a probe reads: an answer below this rank is not found.
DEPTH: Final = 20
SET_PATH: Final = Path(__file__).resolve().parent / "freshness_set.json"


def load_scenarios(path: Path = SET_PATH) -> list[dict[str, Any]]:
    """The scenarios of *path*, checked for the shape the evaluation reads."""
    scenarios: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["scenarios"]
    for scenario in scenarios:
        ids = [entry["id"] for entry in scenario["entries"]]
        if scenario["answer"] not in ids or scenario["shape"] not in ("updated-fact", "recency-trap"):
            raise ValueError(f"scenario {scenario['id']!r}: its answer must be one of its entries and its shape known")
    return scenarios


def build_journal(root: Path, scenarios: Sequence[dict[str, Any]], background: int) -> None:
    """Write every scenario's entries into the journal at *root*, on a runner-written journal of about *background* entries."""
    if background:
        from journal_sets import simulate_background

        simulate_background(root, background)
    with Journal(root) as journal:
        for scenario in scenarios:
            for entry in scenario["entries"]:
                journal.append({"agent": AGENT, **entry})


def probe_passes(ranked: Sequence[str], scenario: dict[str, Any]) -> bool:
    """Whether the answer is in *ranked* above every other entry of *scenario* found there."""
    answer = scenario["answer"]
    if answer not in ranked:
        return False
    position = ranked.index(answer)
    return all(entry["id"] not in ranked[:position] for entry in scenario["entries"])


def evaluate(journal: Journal, scenarios: Sequence[dict[str, Any]], modes: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{mode: {"<shape> <split>": pass rate}}``, with ``"<shape> all"`` over both splits, and the failing probes under ``"failed"``."""
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        passed: dict[str, list[bool]] = defaultdict(list)
        failed: list[str] = []
        for scenario in scenarios:
            for probe in scenario["probes"]:
                ranked = [hit.entry_id for hit in journal.search(probe["query"], k=DEPTH, agent=AGENT, mode=mode)]
                ok = probe_passes(ranked, scenario)
                passed[f"{scenario['shape']} {scenario.get('split', 'all')}"].append(ok)
                passed[f"{scenario['shape']} all"].append(ok)
                if not ok:
                    failed.append(f"{scenario['id']} {probe['style']}: {probe['query']}")
        results[mode] = {group: statistics.fmean(values) for group, values in passed.items()} | {"n " + g: len(v) for g, v in passed.items()}
        results[mode]["failed"] = failed
    return results


def print_results(title: str, results: dict[str, dict[str, Any]], *, show_failed: bool = False) -> None:
    """A pass-rate table, one row per shape and split, one column per mode."""
    modes = list(results)
    groups = sorted(g for g in results[modes[0]] if not g.startswith("n ") and g != "failed")
    print(f"\n{title}")
    print(f"{'probes':<28}{'n':>5}  " + "  ".join(f"{mode:>8}" for mode in modes))
    for group in groups:
        print(f"{group:<28}{int(results[modes[0]]['n ' + group]):>5}  " + "  ".join(f"{results[m][group]:8.1%}" for m in modes))
    if show_failed:
        for mode in modes:
            for line in results[mode]["failed"]:
                print(f"  {mode} failed: {line}")


def pair_cosines(journal: Journal, scenarios: Sequence[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Cosines between the entries a rule would have to tell apart: (each older version, its newest), (each old truth, a distractor)."""
    from journal.encoding import document_text

    encoder = journal.encoder
    assert encoder is not None  # the suites' journal is opened with NN
    versions: list[float] = []
    distractors: list[float] = []
    for scenario in scenarios:
        entries = scenario["entries"]
        vectors = encoder.encode([document_text(e["theme"], e["tags"], None, e["voice"]) for e in entries])
        answer = [e["id"] for e in entries].index(scenario["answer"])
        others = [float(vectors[answer] @ vectors[i]) for i in range(len(entries)) if i != answer]
        (versions if scenario["shape"] == "updated-fact" else distractors).extend(others)
    return versions, distractors


def print_separation(versions: Sequence[float], distractors: Sequence[float]) -> None:
    """How well the cosine between two entries tells a newer version of a fact from a newer entry about something else."""
    from abstention import auroc

    print(f"\ncosine between an old entry and a newer one: {len(versions)} version pairs, {len(distractors)} distractor pairs, "
          f"AUROC {auroc(versions, distractors):.3f}")
    for threshold in (0.5, 0.6, 0.7):
        above_v = sum(1 for c in versions if c >= threshold) / len(versions)
        above_d = sum(1 for c in distractors if c >= threshold) / len(distractors)
        print(f"  cosine >= {threshold}: {above_v:6.1%} of version pairs, {above_d:6.1%} of distractor pairs")


class _Vectors:
    """Entry vectors by id, embedded once from the hits' entries (the journal's own document text)."""

    def __init__(self, journal: Journal) -> None:
        assert journal.encoder is not None  # opened with NN
        self._encoder = journal.encoder
        self._by_id: dict[str, Any] = {}

    def of(self, hits: Sequence[Any]) -> dict[str, Any]:
        from journal.encoding import document_text

        missing = [hit for hit in hits if hit.entry_id not in self._by_id]
        if missing:
            texts = [document_text(h.entry.theme, h.entry.tags, (h.entry.signals or {}).get("focus"), h.entry.voice) for h in missing]
            self._by_id.update(zip([h.entry_id for h in missing], self._encoder.encode(texts), strict=True))
        return {hit.entry_id: self._by_id[hit.entry_id] for hit in hits}


def newer_first(hits: Sequence[Any], vectors: dict[str, Any], threshold: float) -> list[str]:
    """The rule every link-free approach here comes down to: a newer hit at least *threshold* similar to an older one goes above it."""
    ids = [hit.entry_id for hit in hits]
    ts = {hit.entry_id: hit.entry.ts for hit in hits}
    newer = {x: sorted((y for y in ids if ts[y] > ts[x] and float(vectors[x] @ vectors[y]) >= threshold), key=lambda y: ts[y], reverse=True)
             for x in ids}
    order: list[str] = []
    placed: set[str] = set()

    def place(x: str, path: frozenset[str]) -> None:
        if x in placed or x in path:
            return
        for y in newer[x]:
            place(y, path | {x})
        placed.add(x)
        order.append(x)

    for x in ids:
        place(x, frozenset())
    return order


THRESHOLDS: Final = (0.6, 0.7, 0.8)


def rule_on_suites(journal: Journal, scenarios: Sequence[dict[str, Any]], vectors: _Vectors) -> dict[float, dict[str, float]]:
    """Hybrid pass rates per shape with :func:`newer_first` at each threshold."""
    passed: dict[float, dict[str, list[bool]]] = {t: defaultdict(list) for t in THRESHOLDS}
    for scenario in scenarios:
        for probe in scenario["probes"]:
            hits = journal.search(probe["query"], k=DEPTH, agent=AGENT, mode="hybrid")
            by_id = vectors.of(hits)
            for threshold in THRESHOLDS:
                passed[threshold][scenario["shape"]].append(probe_passes(newer_first(hits, by_id, threshold), scenario))
    return {t: {shape: statistics.fmean(v) for shape, v in shapes.items()} for t, shapes in passed.items()}


def rule_on_locomo(locomo: Path) -> dict[float | None, dict[str, float]]:
    """LoCoMo's hybrid Recall@3/@10 and MRR without the rule (None) and with it at each threshold."""
    import tempfile

    from retrieval_sets import load_locomo, recall_at, reciprocal_rank

    payloads, queries = load_locomo(locomo, layout="paper")
    queries = [q for q in queries if q["relevant"]]
    results: dict[float | None, dict[str, list[float]]] = {t: defaultdict(list) for t in (None, *THRESHOLDS)}
    with tempfile.TemporaryDirectory() as tmp:
        with Journal(Path(tmp) / "j") as writer:
            for payload in payloads:
                writer.append(payload)
        with Journal(Path(tmp) / "j", enable_nn=True) as journal:
            vectors = _Vectors(journal)
            for q in queries:
                hits = journal.search(q["query"], k=50, agent=q["agent"], mode="hybrid", floor=False)
                by_id = vectors.of(hits)
                for threshold in results:
                    ranked = [h.entry_id for h in hits] if threshold is None else newer_first(hits, by_id, threshold)
                    for k in (3, 10):
                        results[threshold][f"R@{k}"].append(recall_at(ranked, q["relevant"], k))
                    results[threshold]["MRR"].append(reciprocal_rank(ranked, q["relevant"]))
    return {t: {m: statistics.fmean(v) for m, v in metrics.items()} for t, metrics in results.items()}


def run_freshness(path: Path, background: int, *, show_failed: bool = False, locomo: Path | None = None) -> None:
    """Build the suites' journal and print their pass rates in lexical, semantic and hybrid mode."""
    import tempfile

    scenarios = load_scenarios(path)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "journal"
        build_journal(root, scenarios, background)
        with Journal(root, enable_nn=True) as journal:
            count = journal.digest().count
            results = evaluate(journal, scenarios, ("lexical", "semantic", "hybrid"))
            separation = pair_cosines(journal, scenarios)
            rule = rule_on_suites(journal, scenarios, _Vectors(journal)) if locomo else None
    print_results(f"freshness suites: {len(scenarios)} scenarios in a journal of {count} entries "
                  f"(pass: the answer ranks above every other entry of its scenario within the top {DEPTH})", results, show_failed=show_failed)
    print_separation(*separation)
    if locomo is not None and rule is not None:
        on_locomo = rule_on_locomo(locomo)
        base = on_locomo[None]
        print("\nnewer near-duplicates first (a newer hit with cosine >= t to an older one goes above it), hybrid:")
        print(f"  {'rule':<12} {'updated-fact':>12} {'recency-trap':>12}   LoCoMo R@3 / R@10 / MRR")
        print(f"  {'none':<12} {results['hybrid']['updated-fact all']:12.1%} {results['hybrid']['recency-trap all']:12.1%}   "
              f"{base['R@3']:.3f} / {base['R@10']:.3f} / {base['MRR']:.3f}")
        for threshold in THRESHOLDS:
            row, loc = rule[threshold], on_locomo[threshold]
            print(f"  {'t = ' + str(threshold):<12} {row['updated-fact']:12.1%} {row['recency-trap']:12.1%}   "
                  f"{loc['R@3']:.3f} / {loc['R@10']:.3f} / {loc['MRR']:.3f}")
