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

Printed per split (``tune``, where the threshold was chosen, and ``check``).
Run: ``python bench/bench_proposals.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from journal import Journal
from journal.indexing import PROPOSAL_THRESHOLD

SET = Path(__file__).resolve().parent / "freshness_set.json"


def _proposed(entries: list[dict[str, object]], root: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """The scenario's ids oldest first, and its proposed (older, newer) pairs, by the set's own ids."""
    ordered = sorted(entries, key=lambda e: str(e["ts"]))
    ids: dict[str, str] = {}
    with Journal(root) as journal:
        for e in ordered:
            payload = {k: e[k] for k in ("ts", "kind", "theme", "tags", "voice")}
            ids[journal.append({**payload, "agent": "motoko"}).id] = str(e["id"])
        pairs = {(ids[p.older], ids[p.newer]) for p in journal.proposals()}
    return [str(e["id"]) for e in ordered], pairs


def main() -> None:
    scenarios = json.loads(SET.read_text())["scenarios"]
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
    print(f"threshold {PROPOSAL_THRESHOLD}")
    print(f"{'split':<6} {'recall':>14} {'pairs proposed':>16} {'traps marked':>14} {'false pairs':>14}")
    for split in ("tune", "check"):
        c = counts[split]
        cells = [f"{c[name][0] / c[name][1]:.2f} ({c[name][0]}/{c[name][1]})" for name in ("recall", "pairs proposed", "traps marked", "false pairs")]
        print(f"{split:<6} {cells[0]:>14} {cells[1]:>16} {cells[2]:>14} {cells[3]:>14}")


if __name__ == "__main__":
    main()
