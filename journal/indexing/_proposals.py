"""Supersede proposals: an entry that may update an earlier one of its agent, found when either is indexed.

A proposal is derived state, like every table of the index: it is made when an
entry is inserted (by an append, a catch-up or a rebuild) and rebuilt from the
entry files by ``reindex``; no entry file changes. A pair of entries of one
agent is proposed, the newer as possibly updating the older, when

- they share a subject: the same theme, the same focus, or a tag, compared
  case-folded (:func:`subjects`), and
- their words are alike: the share of the smaller entry's content words
  (theme, tags, focus and voice, stop words left out, see :func:`words`) that
  the other holds is at least :data:`PROPOSAL_THRESHOLD`.

An append looks among the entries of each shared subject nearest to it in
time, on either side; a rebuild pairs every entry, in order of time, with the
nearest earlier ones, which is what appends made in that order make. A pair whose newer entry
already names the older in ``supersedes`` is no proposal: it is decided.
The threshold is chosen on the freshness set, as ``docs/retrieval.md`` tells.
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
    "PROPOSAL_TABLES",
    "PROPOSAL_THRESHOLD",
    "Proposal",
    "forget_proposals",
    "pending_for",
    "proposals_of",
    "propose",
    "propose_all",
    "similarity",
    "subjects",
    "words",
]

#: The least share of the smaller entry's content words the other must hold (see docs/retrieval.md for how it was chosen).
PROPOSAL_THRESHOLD: Final = 0.15
# How many entries of each shared subject an insert compares with, on each side of it in time (the nearest ones):
# keeps an append's cost flat as a subject grows. An update is made near the version it updates.
_NEAREST: Final = 2

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
"""
PROPOSAL_DROP: Final = "DROP TABLE IF EXISTS proposals; DROP TABLE IF EXISTS subjects;"

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


def subjects(theme: str, tags: Iterable[str], focus: str | None) -> set[str]:
    """The subjects an entry is on: ``theme:``, ``tag:`` and ``focus:`` keys, case-folded."""
    found = {f"tag:{tag.casefold().strip()}" for tag in tags if tag.strip()}
    if theme.strip():
        found.add(f"theme:{theme.casefold().strip()}")
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


def _shared(one: set[str], other: set[str]) -> str:
    """The subject two entries share that best names it: a theme, then a focus, then the first tag."""
    common = sorted(one & other, key=lambda key: (not key.startswith("theme:"), not key.startswith("focus:"), key))
    return common[0]


def propose(conn: sqlite3.Connection, entry: Entry, *, pair: bool = True) -> None:
    """Record *entry*'s subjects and (with *pair*) the proposals between it and its nearest entries of each; inside an open transaction.

    An append looks on both sides in time (an entry may be dated before others already written); a
    rebuild records every entry's subjects first, then pairs them all with :func:`propose_all`.
    """
    signals = entry.signals or {}
    focus = signals.get("focus")
    focus = focus if isinstance(focus, str) else None
    mine = subjects(entry.theme, entry.tags, focus)
    if not mine:
        return
    my_key = (utc_key(entry.timestamp), entry.id)
    conn.executemany(
        "INSERT OR IGNORE INTO subjects (agent, subject, ts_utc, id) VALUES (?, ?, ?, ?)", ((entry.agent, s, *my_key) for s in mine)
    )
    if pair:
        _pair(conn, entry.agent, my_key, mine, words(entry.theme, " ".join(entry.tags), focus, entry.voice), both_sides=True)


def propose_all(conn: sqlite3.Connection) -> None:
    """Pair every indexed entry with the nearest earlier entries of its subjects, in order of time: what appends in that order make."""
    rows = conn.execute(
        "SELECT e.id, e.ts_utc, e.agent, e.theme, e.tags, e.focus, f.voice FROM entries e JOIN fts f ON f.rowid = e.rowid ORDER BY e.ts_utc, e.id"
    ).fetchall()
    for entry_id, ts_utc, agent, theme, tags_json, focus, voice in rows:
        tags = json.loads(tags_json)
        mine = subjects(theme, tags, focus)
        if mine:
            _pair(conn, agent, (ts_utc, entry_id), mine, words(theme, " ".join(tags), focus, voice), both_sides=False)


_OLDER: Final = "(ts_utc, id) < (?, ?) ORDER BY ts_utc DESC, id DESC"
_NEWER: Final = "(ts_utc, id) > (?, ?) ORDER BY ts_utc, id"


def _pair(
    conn: sqlite3.Connection, agent: str, my_key: tuple[str, str], mine: set[str], my_words: frozenset[str], *, both_sides: bool
) -> None:
    """Propose the pairs of the entry at *my_key* with the nearest entries of each of its subjects *mine* whose words are alike."""
    entry_id = my_key[1]
    near: set[str] = set()
    for subject in mine:
        for side in (_OLDER, _NEWER) if both_sides else (_OLDER,):
            near.update(
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM subjects WHERE agent = ? AND subject = ? AND {side} LIMIT ?", (agent, subject, *my_key, _NEAREST)
                )
            )
    if not near:
        return
    rows = conn.execute(
        "SELECT e.id, e.ts_utc, e.theme, e.tags, e.focus, f.voice FROM entries e JOIN fts f ON f.rowid = e.rowid"
        f" WHERE e.id IN ({','.join('?' * len(near))})",
        sorted(near),
    ).fetchall()
    found = []
    for other_id, ts_utc, theme, tags_json, other_focus, voice in rows:
        tags = json.loads(tags_json)
        score = similarity(my_words, words(theme, " ".join(tags), other_focus, voice))
        if score < PROPOSAL_THRESHOLD:
            continue
        older, newer = (other_id, entry_id) if (ts_utc, other_id) < my_key else (entry_id, other_id)
        found.append((older, newer, agent, score, _shared(mine, subjects(theme, tags, other_focus))))
    if not found:
        return
    # A pair the newer entry already decides (it names the older in supersedes) is no proposal.
    decided = set(
        conn.execute(
            f"SELECT src, dst FROM supersessions WHERE src = ? OR dst = ? OR src IN ({','.join('?' * len(found))})",
            (entry_id, entry_id, *(newer for _, newer, *_ in found)),
        ).fetchall()
    )
    conn.executemany(
        "INSERT OR REPLACE INTO proposals (older, newer, agent, score, subject) VALUES (?, ?, ?, ?, ?)",
        (row for row in found if (row[1], row[0]) not in decided),
    )


def forget_proposals(conn: sqlite3.Connection, entry_id: str) -> None:
    """Remove an entry's subjects and every proposal it is part of; inside an open transaction."""
    conn.execute("DELETE FROM subjects WHERE id = ?", (entry_id,))
    conn.execute("DELETE FROM proposals WHERE older = ? OR newer = ?", (entry_id, entry_id))


def _pending_where() -> str:
    # A proposal stays pending until the newer entry (or any entry of the agent) supersedes the older one explicitly.
    return "NOT EXISTS (SELECT 1 FROM supersessions s JOIN entries x ON x.id = s.src WHERE s.dst = p.older AND x.agent = p.agent)"


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


def proposals_of(conn: sqlite3.Connection, agent: str | None) -> list[Proposal]:
    """Every pending proposal (of *agent*, when given), by the newer entry's time, then the older's."""
    scoped = "" if agent is None else "p.agent = ? AND "
    return [
        Proposal(*row)
        for row in conn.execute(
            "SELECT p.older, p.newer, p.agent, p.score, p.subject, o.ts, n.ts FROM proposals p JOIN entries n ON n.id = p.newer"
            f" JOIN entries o ON o.id = p.older WHERE {scoped}{_pending_where()} ORDER BY n.ts_utc, n.id, o.ts_utc, o.id",
            [] if agent is None else [agent],
        )
    ]
