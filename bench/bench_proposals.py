"""Supersede proposals on the freshness set: how many updates are proposed, and how many entries that are no update are marked.

Each scenario of ``bench/freshness_set.json`` goes into a journal of its own
(the same agent, so only its own entries can be proposed), appended oldest
first through the ordinary append path; the proposals are then read back.

- *recall*: of the updated-fact scenarios, the share in which every older
  version carries a proposal pointing at a newer one;
- *pairs proposed*: of all (older, newer) pairs of versions, the share proposed;
- *traps marked*: of the recency-trap scenarios, the share whose answer (the
  one entry about its subject; the newer entries share its words but are about
  something else) is marked as possibly outdated;
- *false pairs*: of all (older, newer) pairs in the recency-trap scenarios,
  the share proposed.

Printed per split (``tune``, where the thresholds were chosen, and ``check``).
Then ``bench/restatement_set.json``: each scenario an entry and a later one
on the same tags that restates it, so every proposal there is false
(*restatements proposed*, the share of scenarios with one).

With ``--locomo PATH`` (the locomo-dev directory), the LoCoMo dev
conversations are appended as the held-out harness stores them (each turn an
entry, the theme ``conversation on <date>``, ``continuity_refs`` naming the
previous turn; see ``retrieval_sets.load_locomo``), and again tagged with the
speaker's name (a subject every turn of a speaker shares), with and without
the links: *turns marked* is the share of turns a proposal names as possibly
outdated (and *auto-accept would supersede*, the share a runner agent with
``accept_proposals = "auto"`` would take). No turn updates another, so every
mark there is false.

Then, per split, the share of the freshness set's probes whose top search
hit is the newest version of an updated fact (*fresh-wins*) or a recency
trap's right, older answer (*trap correct-wins*), with the proposals left
pending, auto-accepted as each entry is appended (``Journal.auto_accept``, as
a runner agent with ``accept_proposals = "auto"``: score at least
``AUTO_ACCEPT_THRESHOLD``, or at least ``AUTO_ACCEPT_CHANGE_THRESHOLD`` when
the newer entry says that something changed), and all accepted.

With ``--nn``, every journal is opened with the MiniLM encoder (the ``nn``
extra and the model), so entries are also paired by meaning, auto-accepting
also takes a proposal whose cosine is at least ``AUTO_ACCEPT_COSINE``, and
the probes are searched in hybrid mode.

Run: ``python bench/bench_proposals.py [--nn] [--locomo PATH]``.

With ``--explain SPLIT``, it prints instead, for each proposal made in that
split's scenarios, whether it joins two versions of a fact or takes a recency
trap's answer, its evidence (word score, cosine, whether the newer entry
states a change) and why ``auto`` takes it or not.

With ``--append-cost``, it times appends to a journal of 10,000 entries
(lexical; canonical files written directly, then reindexed) that alternate
between proposals on and off (the index's ``propose`` swapped for a no-op),
so the machine's load falls on both alike, and prints the two medians; then
it times ``reindex`` of those entries with proposals on and off, alternating.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval_sets import load_locomo

import journal.indexing.index as index_module
from journal import Journal, ProposalNotFoundError
from journal.encoding import Encoder, load_encoder
from journal.files.entry import Entry
from journal.files.store import EntryStore
from journal.indexing import (
    AUTO_ACCEPT_CHANGE_THRESHOLD,
    AUTO_ACCEPT_COSINE,
    AUTO_ACCEPT_THRESHOLD,
    MEANING_THRESHOLD,
    NOVELTY_THRESHOLD,
    PROPOSAL_THRESHOLD,
    auto_acceptable,
)
from journal.indexing._proposals import states_change

SET = Path(__file__).resolve().parent / "freshness_set.json"
RESTATEMENTS = Path(__file__).resolve().parent / "restatement_set.json"
#: The encoder every journal is opened with (``--nn``), or None: lexical.
ENCODER: Encoder | None = None


def _open(root: Path) -> Journal:
    return Journal(root) if ENCODER is None else Journal(root, enable_nn=True, encoder=ENCODER)


def _proposed(entries: list[dict[str, object]], root: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """The scenario's ids oldest first, and its proposed (older, newer) pairs, by the set's own ids."""
    ordered = sorted(entries, key=lambda e: str(e["ts"]))
    ids: dict[str, str] = {}
    with _open(root) as journal:
        for e in ordered:
            payload = {k: e[k] for k in ("ts", "kind", "theme", "tags", "voice")}
            ids[journal.append({**payload, "agent": "motoko"}).id] = str(e["id"])
        pairs = {(ids[p.older], ids[p.newer]) for p in journal.proposals()}
    return [str(e["id"]) for e in ordered], pairs


def _top_answers(entries: list[dict[str, object]], probes: list[dict[str, str]], root: Path, accept: str) -> list[str | None]:
    """The set's id of each probe's top search hit (a correction counts as the entry it copies), with proposals decided per *accept*.

    *accept*: ``none`` (left pending), ``auto`` (each entry's, at append, as a runner agent with ``accept_proposals = "auto"``)
    or ``all`` (every proposal accepted).
    """
    ids: dict[str, str] = {}
    with _open(root) as journal:
        for e in sorted(entries, key=lambda e: str(e["ts"])):
            stored = journal.append({**{k: e[k] for k in ("ts", "kind", "theme", "tags", "voice")}, "agent": "motoko"})
            ids[stored.id] = str(e["id"])
            if accept == "auto":
                journal.auto_accept(stored.id)
        if accept == "all":
            for proposal in journal.proposals():
                # Accepting one supersedes its older entry, which ends that entry's other proposals.
                with contextlib.suppress(ProposalNotFoundError):
                    journal.accept_proposal(proposal.older, proposal.newer)
        tops: list[str | None] = []
        for probe in probes:
            hits = journal.search(probe["query"], agent="motoko", k=5)
            entry = hits[0].entry if hits else None
            copied = (entry.meta.get("proposal") or {}).get("newer") if entry is not None else None
            tops.append(None if entry is None else ids.get(entry.id) or ids.get(str(copied)))
    return tops


def fresh_wins(scenarios: list[dict[str, object]]) -> None:
    """Per split: the share of probes whose top hit is the newest version (updates), or the right older answer (traps)."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory() as tmp:
        for n, scenario in enumerate(scenarios):
            kind = "fresh-wins" if scenario["shape"] == "updated-fact" else "trap correct-wins"
            for accept in ("none", "auto", "all"):
                tops = _top_answers(scenario["entries"], scenario["probes"], Path(tmp) / f"{n}-{accept}", accept)  # type: ignore[arg-type]
                c = counts[(str(scenario["split"]), kind, accept)]
                c[0] += sum(top == scenario["answer"] for top in tops)
                c[1] += len(tops)
    how = "lexical" if ENCODER is None else f"hybrid; auto-accepted also at cosine >= {AUTO_ACCEPT_COSINE}"
    auto = f"score >= {AUTO_ACCEPT_THRESHOLD}, or >= {AUTO_ACCEPT_CHANGE_THRESHOLD} with a change stated"
    print(f"top search hit (k=5, {how}), proposals left pending / auto-accepted ({auto}) / all accepted")
    for split in ("tune", "check"):
        for kind in ("fresh-wins", "trap correct-wins"):
            cells = [f"{c[0] / c[1]:.2f} ({c[0]}/{c[1]})" for c in (counts[(split, kind, a)] for a in ("none", "auto", "all"))]
            print(f"{split:<6} {kind:<18} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}")


def explain(scenarios: list[dict[str, object]], split: str) -> None:
    """Each proposal of *split*'s scenarios: what it joins, its evidence, and why a runner agent's ``auto`` takes it or not."""
    with tempfile.TemporaryDirectory() as tmp:
        for n, scenario in enumerate(s for s in scenarios if s["split"] == split):
            entries = {str(e["id"]): e for e in scenario["entries"]}  # type: ignore[attr-defined]
            ids: dict[str, str] = {}
            with _open(Path(tmp) / str(n)) as journal:
                for e in sorted(entries.values(), key=lambda e: str(e["ts"])):
                    ids[journal.append({**{k: e[k] for k in ("ts", "kind", "theme", "tags", "voice")}, "agent": "motoko"}).id] = str(
                        e["id"]
                    )
                for p in journal.proposals():
                    older, newer = ids[p.older], ids[p.newer]
                    voice = str(entries[newer]["voice"])
                    if scenario["shape"] == "updated-fact":
                        what = "versions"
                    else:
                        what = "TRAP ANSWER" if older == scenario["answer"] else "trap others"
                    print(f"{what:<12} {older:>8} <- {newer:<8} {_evidence(p.score, p.cosine, states_change(voice))}")


def _evidence(score: float, cosine: float | None, change: bool) -> str:
    """A proposal's evidence and the first reason ``auto`` takes it, or every reason it does not."""
    shown = f"score {score:.2f} cosine {'-' if cosine is None else f'{cosine:.2f}'} change {'yes' if change else 'no '}"
    if score >= AUTO_ACCEPT_THRESHOLD:
        return f"{shown}  auto: takes it, score >= {AUTO_ACCEPT_THRESHOLD}"
    if cosine is not None and cosine >= AUTO_ACCEPT_COSINE:
        return f"{shown}  auto: takes it, cosine >= {AUTO_ACCEPT_COSINE}"
    if change and score >= AUTO_ACCEPT_CHANGE_THRESHOLD:
        return f"{shown}  auto: takes it, a change stated and score >= {AUTO_ACCEPT_CHANGE_THRESHOLD}"
    why = [f"score < {AUTO_ACCEPT_THRESHOLD}"]
    if cosine is not None:
        why.append(f"cosine < {AUTO_ACCEPT_COSINE}")
    why.append(f"score < {AUTO_ACCEPT_CHANGE_THRESHOLD} with the change" if change else "no change stated")
    return f"{shown}  auto: no ({', '.join(why)})"


def append_cost(entries: int = 10_000, appends: int = 600) -> None:
    """Median append with proposals on and off, alternating, in a journal of *entries* on a few recurring subjects."""
    rng = random.Random(7)
    vocabulary = [
        "studio",
        "harbor",
        "light",
        "ferry",
        "tide",
        "garden",
        "kitchen",
        "office",
        "train",
        "rain",
        "market",
        "river",
        "bridge",
        "tower",
        "camera",
        "lens",
        "print",
        "paper",
        "ink",
        "shop",
    ]
    subjects = ["studio", "harbor", "garden", "office", "camera", "river", "market", "print"]

    def payload(i: int) -> dict[str, object]:
        voice = " ".join(rng.choice(vocabulary) for _ in range(25))
        theme, tags = rng.choice(subjects), rng.sample(subjects, 2)
        return {"kind": "note", "agent": rng.choice(["motoko", "batou"]), "theme": theme, "tags": tags, "voice": f"Entry {i}: {voice}."}

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "j"
        Journal(root).close()
        for i in range(entries):
            entry = Entry.from_payload(
                {**payload(i), "ts": f"2025-{1 + i // 900:02d}-{1 + i // 30 % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"}
            )
            path = root / "entries" / EntryStore.rel_path_for(entry)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(entry.to_json_bytes())
        real, off = index_module.propose, index_module.propose_all
        with Journal(root) as journal:
            journal.reindex()
            timings: dict[bool, list[float]] = {True: [], False: []}
            for i in range(appends):
                on = i % 2 == 0
                index_module.propose = real if on else (lambda conn, entry, pair=True: None)  # type: ignore[assignment]
                start = time.perf_counter()
                journal.append(payload(entries + i))
                timings[on].append(time.perf_counter() - start)
            index_module.propose = real  # type: ignore[assignment]
            with_p, without = statistics.median(timings[True]) * 1000, statistics.median(timings[False]) * 1000
            print(f"append p50 at {entries} entries: {with_p:.2f} ms with proposals, {without:.2f} ms without ({with_p - without:+.2f} ms)")
            rebuilds: dict[bool, list[float]] = {True: [], False: []}
            for i in range(6):
                on = i % 2 == 0
                index_module.propose = real if on else (lambda conn, entry, pair=True: None)  # type: ignore[assignment]
                index_module.propose_all = off if on else (lambda conn: None)  # type: ignore[assignment]
                start = time.perf_counter()
                journal.reindex()
                rebuilds[on].append(time.perf_counter() - start)
            index_module.propose, index_module.propose_all = real, off  # type: ignore[assignment]
    with_r, without_r = min(rebuilds[True]), min(rebuilds[False])
    print(
        f"reindex of {entries + appends} entries (best of 3): {with_r:.2f} s with proposals, {without_r:.2f} s without ({with_r / without_r:.2f}x)"
    )


def locomo(path: Path) -> None:
    """The share of LoCoMo dev turns marked as possibly outdated: as the harness stores them, then tagged with the speaker."""
    payloads, _ = load_locomo(path)
    variants = {
        "as the harness stores them": lambda p: p,
        "tagged with the speaker, linked": lambda p: {**p, "tags": [p["voice"].split(" said")[0]]},
        "tagged with the speaker, no links": lambda p: {
            **{k: v for k, v in p.items() if k != "signals"},
            "tags": [p["voice"].split(" said")[0]],
        },
    }
    print(f"LoCoMo dev: {len(payloads)} turns")
    for name, shape in variants.items():
        with tempfile.TemporaryDirectory() as tmp, _open(Path(tmp) / "j") as journal:
            journal.append_many([shape(p) for p in payloads])
            proposals = journal.proposals()
            marked = {p.older for p in proposals}
            taken = {p.older for p in proposals if auto_acceptable(p, journal.get(p.newer).voice)}
        print(
            f"  {name:<36} turns marked {len(marked) / len(payloads):.3f} ({len(marked)}/{len(payloads)}),"
            f" auto-accept would supersede {len(taken) / len(payloads):.3f} ({len(taken)}/{len(payloads)})"
        )


def restatements() -> None:
    """The share of restatement scenarios in which the restating entry is proposed as an update (every one is false)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory() as tmp:
        for n, scenario in enumerate(json.loads(RESTATEMENTS.read_text())["scenarios"]):
            _, pairs = _proposed(scenario["entries"], Path(tmp) / str(n))
            counts[scenario["split"]][0] += bool(pairs)
            counts[scenario["split"]][1] += 1
    for split in ("tune", "check"):
        marked, total = counts[split]
        print(f"{split:<6} restatements proposed {marked / total:.2f} ({marked}/{total})")


def main() -> None:
    parser = argparse.ArgumentParser(description="Supersede proposals on the freshness set, or what they add to an append.")
    parser.add_argument("--append-cost", action="store_true", help="time appends and reindex at 10,000 entries with proposals on and off")
    parser.add_argument(
        "--nn", action="store_true", help="open every journal with the MiniLM encoder: pair by meaning, search in hybrid mode"
    )
    parser.add_argument("--locomo", type=Path, help="also count the LoCoMo dev turns marked (the locomo-dev directory)")
    parser.add_argument(
        "--explain", choices=("tune", "check"), help="print each proposal of that split with its evidence, and why auto takes it"
    )
    args = parser.parse_args()
    global ENCODER  # noqa: PLW0603 - one encoder for every journal of the run, chosen by the command line
    ENCODER = load_encoder() if args.nn else None
    if args.append_cost:
        append_cost()
        return
    scenarios = json.loads(SET.read_text())["scenarios"]
    if args.explain:
        explain(scenarios, args.explain)
        return
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    with tempfile.TemporaryDirectory() as tmp:
        for n, scenario in enumerate(scenarios):
            order, pairs = _proposed(scenario["entries"], Path(tmp) / str(n))
            c = counts[scenario["split"]]
            every_pair = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
            if scenario["shape"] == "updated-fact":
                c["recall"][0] += all(any((older, newer) in pairs for newer in order[i + 1 :]) for i, older in enumerate(order[:-1]))
                c["recall"][1] += 1
                c["pairs proposed"][0] += sum(pair in pairs for pair in every_pair)
                c["pairs proposed"][1] += len(every_pair)
            else:
                c["traps marked"][0] += any(older == scenario["answer"] for older, _ in pairs)
                c["traps marked"][1] += 1
                c["false pairs"][0] += sum(pair in pairs for pair in every_pair)
                c["false pairs"][1] += len(every_pair)
    meaning = "" if ENCODER is None else f", cosine {MEANING_THRESHOLD}"
    print(f"threshold {PROPOSAL_THRESHOLD}{meaning}, novelty {NOVELTY_THRESHOLD}")
    print(f"{'split':<6} {'recall':>14} {'pairs proposed':>16} {'traps marked':>14} {'false pairs':>14}")
    for split in ("tune", "check"):
        c = counts[split]
        cells = [
            f"{c[name][0] / c[name][1]:.2f} ({c[name][0]}/{c[name][1]})"
            for name in ("recall", "pairs proposed", "traps marked", "false pairs")
        ]
        print(f"{split:<6} {cells[0]:>14} {cells[1]:>16} {cells[2]:>14} {cells[3]:>14}")
    restatements()
    fresh_wins(scenarios)
    if args.locomo:
        locomo(args.locomo)


if __name__ == "__main__":
    main()
