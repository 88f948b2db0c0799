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
The scenarios of split ``tune`` were used to choose the journal's rule;
split ``check`` was written apart and held out.
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
    from journal.embed import document_text

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


def run_freshness(path: Path, background: int, *, show_failed: bool = False) -> None:
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
    print_results(f"freshness suites: {len(scenarios)} scenarios in a journal of {count} entries "
                  f"(pass: the answer ranks above every other entry of its scenario within the top {DEPTH})", results, show_failed=show_failed)
    print_separation(*separation)
