"""Supersede proposals: an entry that may update an earlier one of its agent, found when either is indexed.

A proposal is derived state, like every table of the index: it is made when an
entry is inserted (by an append, a catch-up or a rebuild) and rebuilt from the
entry files by ``reindex``; no entry file changes. A pair of entries of one
agent is proposed, the newer as possibly updating the older, when

- they share a subject their writer stated on purpose: a tag or the focus
  (``signals.focus``), compared case-folded (:func:`subjects`). A theme is no
  subject: a harness or a runner often fills it with a label every entry of a
  session shares ("conversation on 8 May"), which says nothing of what one
  entry is about;
- their words are alike: the share of the smaller entry's content words
  (tags, focus and voice, stop words left out, see :func:`words`) that the
  other holds is at least :data:`PROPOSAL_THRESHOLD`;
- the newer one says something the older did not: at least
  :data:`NOVELTY_THRESHOLD` of its content words are not the older's (a
  restatement repeats, an update states a new value);
- the newer one does not continue the older, directly or along a chain of
  ``continuity_refs``: a conversation going on, or an entry building on
  another, is not a replacement (one that replaces says so in ``supersedes``);
- neither is of origin ``untrusted``: text taken from outside may not mark an
  agent's own entry as outdated.

An append looks among the entries of each shared subject nearest to it in
time, on either side; a rebuild pairs every entry, in order of time, with the
nearest earlier ones, in one pass over the subjects, which is what appends in
that order make. A pair whose newer entry already names the older in
``supersedes`` is no proposal: it is decided. The thresholds are chosen on the
freshness set and checked on conversations and restatements, as
``docs/retrieval.md`` tells.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from journal.files.entry import Entry, utc_key

__all__ = [
    "DECISIONS",
    "NOVELTY_THRESHOLD",
    "PROPOSAL_TABLES",
    "PROPOSAL_THRESHOLD",
    "SUPERSESSIONS_FOLLOWED",
    "Proposal",
    "decision_of",
    "forget_proposals",
    "pending_for",
    "proposals_of",
    "propose",
    "propose_all",
    "similarity",
    "subjects",
    "verdict",
    "words",
]

#: The least share of the smaller entry's content words the other must hold (see docs/retrieval.md for how it was chosen).
PROPOSAL_THRESHOLD: Final = 0.15
#: The least score of a proposal a runner agent with ``accept_proposals = "auto"`` accepts (see docs/retrieval.md): the
#: lowest at which accepting every proposal cost no recency trap of the freshness set's tune split its right answer.
AUTO_ACCEPT_THRESHOLD: Final = 0.4
#: The least share of the newer entry's content words the older must lack: below it, the newer restates the older.
NOVELTY_THRESHOLD: Final = 0.5
# How many entries of each shared subject an insert compares with, on each side of it in time (the nearest ones):
# keeps an append's cost flat as a subject grows. An update is made near the version it updates.
_NEAREST: Final = 2
# How far back along continuity_refs the chain test walks: a conversation's session, not a whole journal.
_CHAIN_STEPS: Final = 256

PROPOSAL_TABLES: Final = """
CREATE TABLE subjects (
    agent TEXT NOT NULL, subject TEXT NOT NULL, ts_utc TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (agent, subject, ts_utc, id)
) WITHOUT ROWID;
CREATE INDEX subjects_id ON subjects (id);
CREATE TABLE proposals (
    older TEXT NOT NULL,
    newer TEXT NOT NULL,
    agent TEXT NOT NULL,
    score REAL NOT NULL,
    subject TEXT NOT NULL,
    PRIMARY KEY (older, newer)
) WITHOUT ROWID;
CREATE INDEX proposals_newer ON proposals (newer);
CREATE INDEX proposals_agent ON proposals (agent);
CREATE TABLE decisions (
    older TEXT NOT NULL, newer TEXT NOT NULL, agent TEXT NOT NULL, decision TEXT NOT NULL, entry TEXT NOT NULL,
    PRIMARY KEY (older, newer, entry)
) WITHOUT ROWID;
CREATE INDEX decisions_entry ON decisions (entry);
"""
PROPOSAL_DROP: Final = "DROP TABLE IF EXISTS proposals; DROP TABLE IF EXISTS subjects; DROP TABLE IF EXISTS decisions;"
#: The supersessions reads follow, as a table of (src, dst): those the entries declare, and for each correction an accepted
#: proposal appended, those of the entry it copies. The correction stands for its newer entry, so whatever later corrects
#: that entry corrects the copy too; else, once the newer entry of an accepted proposal is itself superseded, the copy
#: still answers with the outdated text (v1 accepted as updated by v2, then v2 by v3: the copy of v2 ranked above v3).
SUPERSESSIONS_FOLLOWED: Final = (
    "(SELECT src, dst FROM supersessions UNION SELECT s.src, d.entry FROM decisions d JOIN supersessions s ON s.dst = d.newer"
    " WHERE d.decision = 'accepted' AND s.src <> d.entry)"
)
#: What an entry deciding a proposal says in ``meta.proposal.decision``.
DECISIONS: Final = ("accepted", "rejected")

_WORD: Final = re.compile(r"[^\W_]+", re.UNICODE)
# Words that say nothing of what an entry is about.
_STOP: Final = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "below",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "still",
        "today",
        "got",
        "get",
        "one",
        "two",
        "new",
        "last",
        "back",
    ]
)


@dataclass(frozen=True, slots=True)
class Proposal:
    """The *newer* entry may update the *older* one, of the same *agent*: *score* is their word likeness, *subject* what they share.

    ``older_ts`` and ``newer_ts`` are the two entries' times as written.
    """

    older: str
    newer: str
    agent: str
    score: float
    subject: str
    older_ts: str
    newer_ts: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "older": self.older,
            "older_ts": self.older_ts,
            "newer": self.newer,
            "newer_ts": self.newer_ts,
            "agent": self.agent,
            "score": round(self.score, 4),
            "subject": self.subject,
        }


def subjects(tags: Iterable[str], focus: str | None) -> set[str]:
    """The subjects an entry states: ``tag:`` and ``focus:`` keys, case-folded."""
    found = {f"tag:{tag.casefold().strip()}" for tag in tags if tag.strip()}
    if focus and focus.strip():
        found.add(f"focus:{focus.casefold().strip()}")
    return found


def words(*texts: str | None) -> frozenset[str]:
    """The content words of *texts*: case-folded, stop words and one-letter words left out."""
    return frozenset(w for text in texts if text for w in _WORD.findall(text.casefold()) if len(w) > 1 and w not in _STOP)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of the smaller set's words the other holds (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def verdict(older: frozenset[str], newer: frozenset[str]) -> float | None:
    """The score of *newer* as an update of *older* (their content words), or None: unlike, or a restatement."""
    score = similarity(older, newer)
    if score < PROPOSAL_THRESHOLD or len(newer - older) < NOVELTY_THRESHOLD * len(newer):
        return None
    return score


@dataclass(frozen=True, slots=True)
class _Said:
    """What pairing reads of an indexed entry: its time key, the subjects it states and its content words."""

    key: tuple[str, str]
    subjects: frozenset[str]
    words: frozenset[str]


def _said(ts_utc: str, entry_id: str, tags: Sequence[str], focus: str | None, voice: str) -> _Said:
    return _Said((ts_utc, entry_id), frozenset(subjects(tags, focus)), words(" ".join(tags), focus, voice))


_SAID_SQL: Final = "SELECT e.id, e.ts_utc, e.tags, e.focus, f.voice FROM entries e JOIN fts f ON f.rowid = e.rowid"


def _read_said(rows: Iterable[tuple[str, str, str, str | None, str]]) -> dict[str, _Said]:
    return {entry_id: _said(ts_utc, entry_id, json.loads(tags), focus, voice) for entry_id, ts_utc, tags, focus, voice in rows}


def _shared(one: frozenset[str], other: frozenset[str]) -> str:
    """The subject two entries share that best names it: a focus, then the first tag."""
    return min(one & other, key=lambda key: (not key.startswith("focus:"), key))


def _focus_of(entry: Entry) -> str | None:
    focus = (entry.signals or {}).get("focus")
    return focus if isinstance(focus, str) else None


def decision_of(entry: Entry) -> tuple[str, str, str] | None:
    """The decision *entry* records on a proposal, from its ``meta.proposal``: (decision, older, newer), or None.

    A ``meta.proposal`` of another shape (meta is free-form) decides nothing.
    """
    said = entry.meta.get("proposal")
    if not isinstance(said, dict):
        return None
    decision, older, newer = said.get("decision"), said.get("older"), said.get("newer")
    if decision not in DECISIONS or not isinstance(older, str) or not isinstance(newer, str):
        return None
    return decision, older, newer


def propose(conn: sqlite3.Connection, entry: Entry, *, pair: bool = True) -> None:
    """Record *entry*'s subjects and (with *pair*) the proposals between it and its nearest entries of each; inside an open transaction.

    An append looks on both sides in time (an entry may be dated before others already written); a
    rebuild records every entry's subjects first, then pairs them all with :func:`propose_all`.
    """
    decided = decision_of(entry)
    if decided is not None:
        # An entry deciding a proposal is no new statement of its own: it records the decision and proposes nothing.
        conn.execute(
            "INSERT OR IGNORE INTO decisions (older, newer, agent, decision, entry) VALUES (?, ?, ?, ?, ?)",
            (decided[1], decided[2], entry.agent, decided[0], entry.id),
        )
        return
    if entry.origin == "untrusted":
        return
    focus = _focus_of(entry)
    mine = _said(utc_key(entry.timestamp), entry.id, entry.tags, focus, entry.voice)
    if not mine.subjects:
        return
    conn.executemany(
        "INSERT OR IGNORE INTO subjects (agent, subject, ts_utc, id) VALUES (?, ?, ?, ?)",
        ((entry.agent, s, *mine.key) for s in mine.subjects),
    )
    if not pair:
        return
    near: set[str] = set()
    for subject in mine.subjects:
        for side in (_OLDER, _NEWER):
            near.update(
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM subjects WHERE agent = ? AND subject = ? AND {side} LIMIT ?",
                    (entry.agent, subject, *mine.key, _NEAREST),
                )
            )
    if not near:
        return
    others = _read_said(conn.execute(f"{_SAID_SQL} WHERE e.id IN ({','.join('?' * len(near))})", sorted(near)))
    found = []
    for other in others.values():
        older, newer = (other, mine) if other.key < mine.key else (mine, other)
        score = verdict(older.words, newer.words)
        if score is not None:
            found.append((older.key[1], newer.key[1], entry.agent, score, _shared(older.subjects, newer.subjects)))
    _record(conn, found, _Links(conn))


def propose_all(conn: sqlite3.Connection) -> None:
    """Pair every indexed entry with the nearest earlier entries of its subjects, in order of time: what appends in that order make.

    One pass over the subjects finds every candidate pair; each entry's words are read once.
    """
    lags = ", ".join(f"LAG(id, {n}) OVER w" for n in range(1, _NEAREST + 1))
    candidates: dict[tuple[str, str], str] = {}
    for agent, newer, *olders in conn.execute(
        f"SELECT agent, id, {lags} FROM subjects WINDOW w AS (PARTITION BY agent, subject ORDER BY ts_utc, id)"
    ):
        for older in olders:
            if older is not None:
                candidates[(older, newer)] = agent
    if not candidates:
        return
    said = _read_said(conn.execute(f"{_SAID_SQL} WHERE e.id IN (SELECT id FROM subjects)"))
    found = []
    for (older_id, newer_id), agent in candidates.items():
        older, newer = said[older_id], said[newer_id]
        score = verdict(older.words, newer.words)
        if score is not None:
            found.append((older_id, newer_id, agent, score, _shared(older.subjects, newer.subjects)))
    _record(conn, found, _Links(conn, every=True))


_OLDER: Final = "(ts_utc, id) < (?, ?) ORDER BY ts_utc DESC, id DESC"
_NEWER: Final = "(ts_utc, id) > (?, ?) ORDER BY ts_utc, id"


class _Links:
    """The entries of one's own agent each entry continues (``continuity_refs``): read as asked, or (*every*) all at once for a rebuild.

    A ref to another agent's entry, or to none, is no step of a chain: what one agent's proposals are must not depend
    on another agent's entries (a journal of alice alone makes the ones a journal of alice and bob makes for her).
    """

    def __init__(self, conn: sqlite3.Connection, *, every: bool = False) -> None:
        self._conn = conn
        self._known: dict[str, list[tuple[str, str]]] | None = None
        if every:
            known: dict[str, list[tuple[str, str]]] = {}
            for src, dst, agent in conn.execute("SELECT l.src, l.dst, d.agent FROM links l JOIN entries d ON d.id = l.dst"):
                known.setdefault(src, []).append((dst, agent))
            self._known = known

    def of(self, entry_id: str, agent: str) -> list[str]:
        if self._known is not None:
            found = self._known.get(entry_id, [])
        else:
            query = "SELECT l.dst, d.agent FROM links l JOIN entries d ON d.id = l.dst WHERE l.src = ?"
            found = list(self._conn.execute(query, (entry_id,)))
        return [dst for dst, owner in found if owner == agent]

    def continues(self, newer: str, older: str, agent: str) -> bool:
        """Whether *newer* reaches *older* along *agent*'s own continuity_refs (within :data:`_CHAIN_STEPS` entries)."""
        seen = {newer}
        todo = [newer]
        while todo and len(seen) <= _CHAIN_STEPS:
            for ref in self.of(todo.pop(), agent):
                if ref == older:
                    return True
                if ref not in seen:
                    seen.add(ref)
                    todo.append(ref)
        return False


def _record(conn: sqlite3.Connection, found: Sequence[tuple[str, str, str, float, str]], links: _Links) -> None:
    """Insert the proposals *found* but those already decided (the newer supersedes the older) and those along a chain."""
    if not found:
        return
    decided: set[tuple[str, str]] = set()
    newers = sorted({row[1] for row in found})
    for start in range(0, len(newers), 500):
        part = newers[start : start + 500]
        decided.update(conn.execute(f"SELECT src, dst FROM supersessions WHERE src IN ({','.join('?' * len(part))})", part).fetchall())
    conn.executemany(
        "INSERT OR REPLACE INTO proposals (older, newer, agent, score, subject) VALUES (?, ?, ?, ?, ?)",
        (row for row in found if (row[1], row[0]) not in decided and not links.continues(row[1], row[0], row[2])),
    )


def forget_proposals(conn: sqlite3.Connection, entry_id: str) -> None:
    """Remove an entry's subjects and every proposal it is part of; inside an open transaction."""
    conn.execute("DELETE FROM subjects WHERE id = ?", (entry_id,))
    conn.execute("DELETE FROM proposals WHERE older = ? OR newer = ?", (entry_id, entry_id))
    conn.execute("DELETE FROM decisions WHERE entry = ?", (entry_id,))


def _pending_where() -> str:
    # A proposal stays pending until an entry of the agent supersedes the older one explicitly (an accepted proposal's
    # correction does), or an entry of the agent records a decision on this very pair (a rejection).
    return (
        "NOT EXISTS (SELECT 1 FROM supersessions s JOIN entries x ON x.id = s.src WHERE s.dst = p.older AND x.agent = p.agent)"
        " AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.older = p.older AND d.newer = p.newer AND d.agent = p.agent)"
    )


def pending_for(conn: sqlite3.Connection, ids: Sequence[str], *, before: str | None = None) -> dict[str, list[Proposal]]:
    """For each of *ids* with pending proposals against it, those proposals, newest proposer first (written before *before*, a UTC key, if given)."""
    if not ids:
        return {}
    found: dict[str, list[Proposal]] = {}
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        for row in conn.execute(
            "SELECT p.older, p.newer, p.agent, p.score, p.subject, o.ts, n.ts FROM proposals p JOIN entries n ON n.id = p.newer"
            f" JOIN entries o ON o.id = p.older WHERE p.older IN ({','.join('?' * len(part))}) AND {_pending_where()}"
            f"{'' if before is None else ' AND n.ts_utc < ?'} ORDER BY n.ts_utc DESC, n.id DESC",
            [*part, *([] if before is None else [before])],
        ):
            found.setdefault(row[0], []).append(Proposal(*row))
    return found


def proposals_of(conn: sqlite3.Connection, agent: str | None, newer: str | None = None) -> list[Proposal]:
    """Every pending proposal (of *agent*, and made by the entry *newer*, when given), by the newer entry's time, then the older's."""
    scoped = "" if agent is None else "p.agent = ? AND "
    scoped += "" if newer is None else "p.newer = ? AND "
    return [
        Proposal(*row)
        for row in conn.execute(
            "SELECT p.older, p.newer, p.agent, p.score, p.subject, o.ts, n.ts FROM proposals p JOIN entries n ON n.id = p.newer"
            f" JOIN entries o ON o.id = p.older WHERE {scoped}{_pending_where()} ORDER BY n.ts_utc, n.id, o.ts_utc, o.id",
            [value for value in (agent, newer) if value is not None],
        )
    ]
