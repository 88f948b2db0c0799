"""Supersede proposals: an entry that may update an earlier one of its agent, found when either is indexed.

A proposal is derived state, like every table of the index: it is made when an
entry is inserted (by an append, a catch-up or a rebuild) and rebuilt from the
entry files by ``reindex``; no entry file changes. A pair of entries of one
agent is proposed, the newer as possibly updating the older, when

- they share a subject their writer stated on purpose: a tag or the focus
  (``signals.focus``), compared folded (:func:`subjects`, :func:`fold`). A theme is no
  subject: a harness or a runner often fills it with a label every entry of a
  session shares ("conversation on 8 May"), which says nothing of what one
  entry is about. Nor is a subject common where the newer entry stands
  (:func:`common_subjects`): carried by more than :data:`COMMON_SHARE` of the
  agent's :data:`COMMON_WINDOW` entries up to the newer one (a speaker's name
  tagging every turn of theirs). It is decided from those entries alone, the
  ones dated up to the newer entry, so a rebuild, which meets them all, decides
  as an append in order of time did; a decision read at display time would
  instead make a mark come and go with entries written long after;
- they are alike: the share of the smaller entry's content words (tags,
  focus and voice, stop words left out, each as its stem, see :func:`stems`) that the other
  holds is at least :data:`PROPOSAL_THRESHOLD`, or, where the index holds a
  vector of one encoder for both (NN on), their cosine is at least
  :data:`MEANING_THRESHOLD`;
- the newer one states something: its text does not end in a question
  (:func:`asks`; "should I move the studio?" replaces nothing);
- the newer one says something the older did not: at least
  :data:`NOVELTY_THRESHOLD` of its content words are not the older's (a
  restatement repeats, an update states a new value);
- the newer one does not continue the older, directly or along a chain of
  ``continuity_refs``: a conversation going on, or an entry building on
  another, is not a replacement (one that replaces says so in ``supersedes``);
- neither is of origin ``untrusted``: text taken from outside may not mark an
  agent's own entry as outdated.

A pair rests only on the agent's entries dated up to its newer entry (the
nearest earlier ones of each subject, the window of :func:`common_subjects`,
the chain of ``continuity_refs`` through entries dated up to it), so the
proposals are what appends in order of time make however the index comes to
hold the entries. An append pairs its entry with the nearest earlier entries
of each of its subjects and, when it is dated before entries already held,
weighs again those whose pairs it changes (:func:`_touched_by`); a group does
the same for all its entries at once, whatever their order; an entry's removal
(an erase) weighs again the entries after it; a rebuild pairs every entry, in
order of time, with the nearest earlier ones, in one pass over the subjects.
Each entry's subjects and content words are kept in the
index (``said``) when it is inserted, so pairing reads them instead of
tokenising the neighbours' text again; a vector stored later (embedded behind
an append, or by ``embed``) pairs its entry again, by meaning too. A pair
whose newer entry already names the older in ``supersedes`` is no proposal:
it is decided. The thresholds are chosen on the
freshness set and checked on conversations and restatements, as
``docs/retrieval.md`` tells.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import sys
import unicodedata
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import mul
from typing import Any, Final

from journal.files.entry import Entry, utc_key
from journal.indexing._stem import stem
from journal.indexing._stopwords import STOP_WORDS

__all__ = [
    "AUTO_ACCEPT_CHANGE_THRESHOLD",
    "AUTO_ACCEPT_COSINE",
    "AUTO_ACCEPT_THRESHOLD",
    "COMMON_SHARE",
    "COMMON_WINDOW",
    "DECISIONS",
    "MEANING_THRESHOLD",
    "NOVELTY_THRESHOLD",
    "PROPOSAL_TABLES",
    "PROPOSAL_THRESHOLD",
    "SUPERSESSIONS_FOLLOWED",
    "Proposal",
    "asks",
    "auto_acceptable",
    "common_subjects",
    "decision_of",
    "fold",
    "forget_proposals",
    "is_restated",
    "pending_for",
    "proposals_of",
    "propose",
    "propose_again",
    "propose_again_after",
    "propose_all",
    "propose_group",
    "similarity",
    "states_change",
    "stems",
    "subjects",
    "verdict",
    "words",
]

#: The least share of the smaller entry's content words the other must hold (see docs/retrieval.md for how it was chosen).
PROPOSAL_THRESHOLD: Final = 0.15
#: The least score of a proposal a runner agent with ``accept_proposals = "auto"`` accepts (see docs/retrieval.md): the
#: lowest at which accepting every proposal cost no recency trap of the freshness set's tune split its right answer.
AUTO_ACCEPT_THRESHOLD: Final = 0.4
#: The least cosine of two entries' vectors (one encoder's) that pairs them by meaning when their words alone do not (see
#: docs/retrieval.md): on the tune split it added update pairs and no recency-trap pair.
MEANING_THRESHOLD: Final = 0.5
#: The least cosine of a proposal a runner agent with ``accept_proposals = "auto"`` accepts, whatever its word score: the
#: lowest tenth at which accepting cost no recency trap of the tune split its answer (their likest pair: 0.688).
AUTO_ACCEPT_COSINE: Final = 0.7
#: The least score of a proposal a runner agent with ``accept_proposals = "auto"`` accepts when the newer entry says that
#: something changed (:func:`states_change`): the lowest at which that cost no recency trap of the tune split its answer.
AUTO_ACCEPT_CHANGE_THRESHOLD: Final = 0.35
#: The least share of the newer entry's content words the older must lack: below it, the newer restates the older.
NOVELTY_THRESHOLD: Final = 0.5
# How many entries of each shared subject an insert compares with, on each side of it in time (the nearest ones):
# keeps an append's cost flat as a subject grows. An update is made near the version it updates.
_NEAREST: Final = 2
# How far back along continuity_refs the chain test walks: a conversation's session, not a whole journal.
_CHAIN_STEPS: Final = 256
#: How many of an agent's entries, the newer one of a pair and those just before it in time, tell whether a subject the
#: pair shares says what they are about (see :func:`common_subjects`).
COMMON_WINDOW: Final = 32
#: The share of :data:`COMMON_WINDOW` entries above which a subject carried by that many says nothing of one entry (a
#: speaker's name on every turn of theirs, a project's tag on everything an agent writes for it); judged only once the
#: agent has written at least half a window.
COMMON_SHARE: Final = 0.4

PROPOSAL_TABLES: Final = """
CREATE TABLE subjects (
    agent TEXT NOT NULL, subject TEXT NOT NULL, ts_utc TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (agent, subject, ts_utc, id)
) WITHOUT ROWID;
CREATE INDEX subjects_id ON subjects (id);
CREATE TABLE said (
    id TEXT PRIMARY KEY, agent TEXT NOT NULL, ts_utc TEXT NOT NULL, subjects TEXT NOT NULL, words TEXT NOT NULL, asks INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE proposals (
    older TEXT NOT NULL,
    newer TEXT NOT NULL,
    agent TEXT NOT NULL,
    score REAL NOT NULL,
    cosine REAL,
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
PROPOSAL_DROP: Final = (
    "DROP TABLE IF EXISTS proposals; DROP TABLE IF EXISTS subjects; DROP TABLE IF EXISTS said; DROP TABLE IF EXISTS decisions;"
)
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
# Words and phrases with which a writer says that a value changed, whatever the fact: "is now", "no longer", "moved to",
# "switched", "from 118,000 to 126,000". A newer entry on a shared subject that says one states the subject's new value;
# one about something else that shares the subject's words rarely does. "from ... to" stays within a clause.
_CHANGE: Final = re.compile(
    r"\b(?:now|no longer|no more|any ?more|instead|moved|moves|switched|changed|replaced|quit|retired|sold|took over"
    r"|taking over|handed over|postponed|rescheduled|renewed|raised|bumped|traded|from\b[^.;:]*?\bto)\b",
    re.IGNORECASE,
)
# What may follow a text's question mark and still leave it asking: spaces and invisible marks (a zero-width space, a
# variation selector), closing quotes and brackets in any script, emoji (their modifiers and joiners too), more marks ("?!",
# "?..."), and markdown's emphasis ("_why?_"). By Unicode category, so a script's own closing marks count too.
_AFTER_QUESTION: Final = frozenset(["Cf", "Mn", "Me", "Sk", "So", "Pe", "Pf", "Pi", "Zs", "Zl", "Zp", "Cc"])
_AFTER_QUESTION_MARKS: Final = frozenset("!.\"'*_~`")
# Question marks once compatibility forms are folded (the full-width and small ones are "?", U+2048 is "?!"): Latin's,
# Arabic's, the interrobang.
_QUESTION_MARKS: Final = frozenset("?\u061f\u203d")
# The combining marks the index's text search drops too (its tokenizer removes Latin diacritics): "é" is "e", "İ" is "i".
_DIACRITICS: Final = re.compile("[\u0300-\u036f]")
# Words that say nothing of what an entry is about: search's stop words, and words an update of a fact uses whatever
# the fact ("still", "new", "got", "back"), which would make any two entries about different things look alike.
_STOP: Final = STOP_WORDS | frozenset(["also", "back", "get", "got", "last", "new", "one", "still", "today", "two"])


@dataclass(frozen=True, slots=True)
class Proposal:
    """The *newer* entry may update the *older* one, of the same *agent*: *score* is their word likeness as written, *subject* what they share.

    ``older_ts`` and ``newer_ts`` are the two entries' times as written; ``cosine`` their vectors' likeness (one encoder's),
    or None when the index holds no vector of one encoder for both.
    """

    older: str
    newer: str
    agent: str
    score: float
    subject: str
    older_ts: str
    newer_ts: str
    cosine: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "older": self.older,
            "older_ts": self.older_ts,
            "newer": self.newer,
            "newer_ts": self.newer_ts,
            "agent": self.agent,
            "score": round(self.score, 4),
            "cosine": None if self.cosine is None else round(self.cosine, 4),
            "subject": self.subject,
        }


def subjects(tags: Iterable[str], focus: str | None) -> set[str]:
    """The subjects an entry states: ``tag:`` and ``focus:`` keys, folded as words are (:func:`fold`)."""
    found = {f"tag:{fold(tag).strip()}" for tag in tags if tag.strip()}
    if focus and focus.strip():
        found.add(f"focus:{fold(focus).strip()}")
    return found


def common_subjects(counts: Mapping[str, int], entries: int) -> frozenset[str]:
    """The subjects that say nothing of one entry where it stands among the *entries* last entries of its agent, up to it.

    *counts*: how many of those entries carry each subject (an entry stating none counts among *entries* too). Those
    carried by more than :data:`COMMON_SHARE` of them; none while the agent has written fewer than half of
    :data:`COMMON_WINDOW` entries (too few to tell a subject every entry shares from an agent that has so far written
    about one thing).
    """
    if entries < COMMON_WINDOW // 2:
        return frozenset()
    return frozenset(subject for subject, count in counts.items() if count > COMMON_SHARE * entries)


def fold(text: str) -> str:
    """*text* as proposals compare it: compatibility forms folded (NFKC: full-width letters and ligatures are the plain ones), case-folded,
    and Latin diacritics dropped as the index's text search drops them ("Café", "cafe" written with a combining accent,
    "İstanbul" and "istanbul" are one word)."""
    if text.isascii():
        return text.lower()
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", folded))


def words(*texts: str | None) -> frozenset[str]:
    """The content words of *texts* as written: folded (:func:`fold`), stop words and one-letter words left out."""
    found: set[str] = set()
    for text in texts:
        if text:
            found.update(_WORD.findall(fold(text)))
    return frozenset(w for w in found if len(w) > 1) - _STOP


def stems(said: frozenset[str]) -> frozenset[str]:
    """The stems (:func:`stem`) of content words *said* (see :func:`words`), stop words left out again.

    Stop words are left out before stemming ("does" is no "doe") and after it ("gets" is "get", a word any update uses).
    """
    return frozenset(map(stem, said)) - _STOP


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of the smaller set's words the other holds (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def verdict(older: frozenset[str], newer: frozenset[str], cosine: float | None = None) -> float | None:
    """The score of *newer* as an update of *older* (their content words; *cosine*, their vectors'), or None: unlike, or a restatement.

    A restatement is told by words alone, whatever the cosine: a sentence encoder reads a restatement as alike as an update.
    """
    if is_restated(older, newer):
        return None
    score = similarity(older, newer)
    if score < PROPOSAL_THRESHOLD and (cosine is None or cosine < MEANING_THRESHOLD):
        return None
    return score


def asks(text: str) -> bool:
    """Whether *text* ends in a question: a question states no new value, so updates nothing.

    Its last mark is a question mark in any of its forms (full-width, Arabic, "?!", "?..."), whatever closing quotes, brackets,
    dots, emoji and spaces, visible or not, follow it ('Jun said, "Is it still leaking?" 🤔').
    """
    for char in reversed(text):
        for last in reversed(char if char.isascii() else unicodedata.normalize("NFKC", char)):
            if last in _QUESTION_MARKS:
                return True
            if not (last.isspace() or last in _AFTER_QUESTION_MARKS or unicodedata.category(last) in _AFTER_QUESTION):
                return False
    return False


def states_change(text: str) -> bool:
    """Whether *text* says that something changed ("now", "no longer", "moved", "switched", "from X to Y"...), in whatever
    Unicode form its letters are written (:func:`fold`)."""
    return _CHANGE.search(fold(text)) is not None


def auto_acceptable(proposal: Proposal, newer_text: str) -> bool:
    """Whether a runner agent with ``accept_proposals = "auto"`` accepts *proposal*, whose newer entry's text is *newer_text*.

    It does when the two entries are alike enough that no recency trap of the tune split was as alike: a score (their
    words as written, never their stems) of at least :data:`AUTO_ACCEPT_THRESHOLD`, or a cosine of at least :data:`AUTO_ACCEPT_COSINE`; or when the newer entry says
    that something changed and the score reaches :data:`AUTO_ACCEPT_CHANGE_THRESHOLD` (a path without vectors too).
    """
    if proposal.score >= AUTO_ACCEPT_THRESHOLD or (proposal.cosine is not None and proposal.cosine >= AUTO_ACCEPT_COSINE):
        return True
    return proposal.score >= AUTO_ACCEPT_CHANGE_THRESHOLD and states_change(newer_text)


def is_restated(older: frozenset[str], newer: frozenset[str]) -> bool:
    """Whether *newer* says too little the *older* did not to update it (see :data:`NOVELTY_THRESHOLD`)."""
    return len(newer - older) < NOVELTY_THRESHOLD * len(newer)


@dataclass(frozen=True, slots=True)
class _Said:
    """What pairing reads of an indexed entry: its agent, time key, the subjects it states, its content words (kept in ``said``
    as written) and their stems, which pairing compares, and whether its text asks (:func:`asks`), kept in ``said``."""

    agent: str
    key: tuple[str, str]
    subjects: frozenset[str]
    words: frozenset[str]
    stems: frozenset[str]
    asks: bool

    def row(self) -> tuple[str, str, str, str, str, int]:
        return (self.key[1], self.agent, self.key[0], json.dumps(sorted(self.subjects)), " ".join(sorted(self.words)), int(self.asks))


_SAID_COLUMNS: Final = "id, agent, ts_utc, subjects, words, asks"


def _read_said(conn: sqlite3.Connection, ids: Sequence[str] | None = None) -> dict[str, _Said]:
    """The kept subjects and words of *ids* (of every entry that states a subject, without *ids*)."""
    which = "" if ids is None else f" WHERE id IN ({','.join('?' * len(ids))})"
    return _said_of(conn.execute(f"SELECT {_SAID_COLUMNS} FROM said{which}", list(ids or ())))


def _said_of(rows: Iterable[tuple[str, str, str, str, str, int]]) -> dict[str, _Said]:
    return {
        entry_id: _said(agent, (ts_utc, entry_id), frozenset(json.loads(stated)), said.split(), bool(asked))
        for entry_id, agent, ts_utc, stated, said, asked in rows
    }


def _said(agent: str, key: tuple[str, str], stated: frozenset[str], said: Iterable[str], asked: bool) -> _Said:
    written = frozenset(said)
    return _Said(agent, key, stated, written, stems(written), asked)


def _record_subjects(conn: sqlite3.Connection, said: Iterable[_Said]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO subjects (agent, subject, ts_utc, id) VALUES (?, ?, ?, ?)",
        # In key order: a group's subjects (random against the order its entries come in) then go in with one sweep
        # of the b-tree, each page read and written once, not once a row.
        sorted((one.agent, subject, *one.key) for one in said for subject in one.subjects),
    )


class _Vectors:
    """Stored vectors of some entries, by encoder, and the cosine of two of them.

    Plain Python, not NumPy: the index is read and rebuilt without the ``nn`` extra too. Each vector is made a unit
    vector once, so a pair costs one pass of products (a rebuild compares each entry with a few others).
    """

    def __init__(self, blobs: dict[str, dict[str, bytes]]) -> None:
        self._blobs = blobs
        self._units: dict[tuple[str, str], array[float] | None] = {}

    def cosine(self, one: str, other: str) -> float | None:
        """The cosine of two entries' vectors of one encoder (the first by key both have), or None: no encoder has both."""
        a, b = self._blobs.get(one), self._blobs.get(other)
        if not a or not b:
            return None
        shared = min(a.keys() & b.keys(), default=None)
        if shared is None:
            return None
        u, v = self._unit(one, shared), self._unit(other, shared)
        if u is None or v is None or len(u) != len(v):
            return None
        return float(sum(map(mul, u, v)))

    def _unit(self, entry_id: str, model: str) -> array[float] | None:
        key = (entry_id, model)
        if key not in self._units:
            stored = array("f", self._blobs[entry_id][model])
            if sys.byteorder == "big":  # stored little-endian (see journal.encoding.semantic.to_blob)
                stored.byteswap()
            norm = math.sqrt(sum(map(mul, stored, stored)))
            self._units[key] = array("d", (x / norm for x in stored)) if norm else None
        return self._units[key]


def _read_vectors(conn: sqlite3.Connection, ids: Sequence[str] | None = None) -> _Vectors:
    """Each of *ids*' stored vectors (of every entry that states a subject, without *ids*), by encoder."""
    which = "SELECT id FROM said" if ids is None else ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT e.id, v.model, v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry WHERE e.id IN ({which})", list(ids or ())
    )
    found: dict[str, dict[str, bytes]] = {}
    for entry_id, model, vector in rows:
        found.setdefault(entry_id, {})[model] = vector
    return _Vectors(found)


def _pair(
    older: _Said, newer: _Said, agent: str, vectors: _Vectors, common_at: Callable[[_Said], frozenset[str]]
) -> tuple[str, str, str, float, float | None, str] | None:
    """The proposal row of *newer* as an update of *older*, or None (see :func:`verdict`): also when every subject they share
    is among *common_at(newer)*, the subjects that say nothing of one entry where the newer one stands (:func:`common_subjects`),
    and when the newer one asks (:func:`asks`).

    Whether to propose is judged on stems, so an update sharing its fact's words in other forms is proposed; the score
    kept is the words' as written, which :func:`auto_acceptable` judges: accepting acts with nobody looking, and a stem
    alone ("next year" and "five years") took a recency trap's answer that the words as written did not. :func:`verdict`'s
    rule is worked out from one intersection of the two stem sets, its restatement test made once: an import pairs each
    entry with several others, and this is most of its work in Python.
    """
    if newer.asks:
        return None
    mine, theirs = newer.stems, older.stems
    alike = len(mine & theirs)
    if len(mine) - alike < NOVELTY_THRESHOLD * len(mine):  # is_restated: the newer's words the older lacks are too few
        return None
    cosine = vectors.cosine(older.key[1], newer.key[1])
    likeness = alike / min(len(mine), len(theirs)) if mine and theirs else 0.0  # similarity
    if likeness < PROPOSAL_THRESHOLD and (cosine is None or cosine < MEANING_THRESHOLD):
        return None
    # Asked last: it reads the index, and most candidates are unlike.
    shared = (older.subjects & newer.subjects) - common_at(newer)
    if not shared:
        return None
    score = similarity(older.words, newer.words)
    return (older.key[1], newer.key[1], agent, score, cosine, _shared(shared))


def _shared(shared: frozenset[str]) -> str:
    """The subject of *shared* that best names what two entries share: a focus, then the first tag."""
    focus = [key for key in shared if key.startswith("focus:")]
    return min(focus or shared)


# The subjects of an agent's entries up to one in time, newest first: what :func:`common_subjects` reads. An entry stating
# no subject (or deciding a proposal, or untrusted) has no row of ``said`` and counts as stating none.
_WINDOW_QUERY: Final = (
    "SELECT e.id, s.subjects FROM entries e LEFT JOIN said s ON s.id = e.id"
    " WHERE e.agent = ? AND (e.ts_utc, e.id) <= (?, ?) ORDER BY e.ts_utc DESC, e.id DESC"
)


class _Common:
    """:func:`common_subjects` where each asked entry stands, read from the index once an entry: the entries dated up to it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._found: dict[str, frozenset[str]] = {}

    def __call__(self, newer: _Said) -> frozenset[str]:
        found = self._found.get(newer.key[1])
        if found is None:
            counts: Counter[str] = Counter()
            entries = 0
            for _, stated in self._conn.execute(_WINDOW_QUERY + f" LIMIT {COMMON_WINDOW}", (newer.agent, *newer.key)):
                counts.update(json.loads(stated) if stated else ())
                entries += 1
            found = self._found[newer.key[1]] = common_subjects(counts, entries)
        return found


def _common_everywhere(conn: sqlite3.Connection, said: Mapping[str, _Said], wanted: set[str]) -> dict[str, frozenset[str]]:
    """:func:`common_subjects` where each of *wanted* stands, in one pass over every agent's entries in order of time."""
    found: dict[str, frozenset[str]] = {}
    window: deque[frozenset[str]] = deque()
    counts: Counter[str] = Counter()
    current = None
    for agent, entry_id in conn.execute("SELECT agent, id FROM entries ORDER BY agent, ts_utc, id"):
        if agent != current:
            current = agent
            window.clear()
            counts.clear()
        stated = said[entry_id].subjects if entry_id in said else frozenset()
        window.append(stated)
        counts.update(stated)
        if len(window) > COMMON_WINDOW:
            counts.subtract(window.popleft())
        if entry_id in wanted:
            found[entry_id] = common_subjects(counts, len(window))
    return found


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
    """Record *entry*'s subjects and words and (with *pair*) the proposals it changes; inside an open transaction.

    Those are the proposals whose newer entry is *entry*, and those of the entries dated after it that its coming changes
    (see :func:`_touched_by`): none when it is its agent's newest, as an append mostly is. A rebuild records every
    entry's subjects first, then pairs them all with :func:`propose_all`.
    """
    decided = decision_of(entry)
    if decided is not None:
        # An entry deciding a proposal is no new statement of its own: it records the decision and proposes nothing.
        conn.execute(
            "INSERT OR IGNORE INTO decisions (older, newer, agent, decision, entry) VALUES (?, ?, ?, ?, ?)",
            (decided[1], decided[2], entry.agent, decided[0], entry.id),
        )
        mine = None
    elif (mine := _said_for(entry)) is not None:
        conn.execute(_INSERT_SAID, mine.row())
        if pair:  # else a rebuild records every entry's subjects at once, in its pairing pass
            _record_subjects(conn, [mine])
    if pair:
        known = {} if mine is None else {entry.id: mine}
        touched = _touched_by(conn, [entry.id], rows=[(entry.agent, utc_key(entry.timestamp), entry.id)])
        _propose_as_newer(conn, {entry.id} | touched, known=known, fresh=known.keys())


_OLDER: Final = "(ts_utc, id) < (?, ?) ORDER BY ts_utc DESC, id DESC"


def _said_for(entry: Entry) -> _Said | None:
    """What pairing keeps of *entry* (not deciding a proposal), or None: it proposes nothing (of origin ``untrusted``, or stating no subject)."""
    if entry.origin == "untrusted":
        return None
    focus = _focus_of(entry)
    stated = subjects(entry.tags, focus)
    if not stated:
        return None
    said = words(" ".join(entry.tags), focus, entry.voice)
    return _said(entry.agent, (utc_key(entry.timestamp), entry.id), frozenset(stated), said, asks(entry.voice))


_INSERT_SAID: Final = "INSERT OR REPLACE INTO said (id, agent, ts_utc, subjects, words, asks) VALUES (?, ?, ?, ?, ?, ?)"


def propose_group(conn: sqlite3.Connection, entries: Sequence[Entry]) -> None:
    """What :func:`propose` for each of *entries* right after its insert would record, for entries just inserted: one pass for them all.

    Their rows, links and supersessions are staged in the open transaction, their subjects not yet. Whatever order the
    group comes in, its proposals are those of the whole index afterwards: each entry's with the entries dated before
    it, and again those of the entries held before the group that the group's entries, dated before them, change.
    The index is read a few times for the whole group, not for each entry.
    """
    decisions: list[tuple[str, str, str, str, str]] = []
    group: list[_Said] = []  # the entries that may propose
    for entry in entries:
        decision = decision_of(entry)
        if decision is not None:
            decisions.append((decision[1], decision[2], entry.agent, decision[0], entry.id))
        elif (said := _said_for(entry)) is not None:
            group.append(said)
    conn.executemany("INSERT OR IGNORE INTO decisions (older, newer, agent, decision, entry) VALUES (?, ?, ?, ?, ?)", decisions)
    conn.executemany(_INSERT_SAID, sorted(mine.row() for mine in group))  # by id, the table's key: see _record_subjects
    _record_subjects(conn, group)
    ours = {mine.key[1]: mine for mine in group}
    touched = _touched_by(
        conn, [entry.id for entry in entries], rows=[(entry.agent, utc_key(entry.timestamp), entry.id) for entry in entries]
    )
    _propose_as_newer(conn, ours.keys() | touched, known=ours, fresh=ours.keys())


def _propose_as_newer(
    conn: sqlite3.Connection, ids: Iterable[str], *, known: Mapping[str, _Said] | None = None, fresh: Iterable[str] = ()
) -> None:
    """Make again every proposal whose newer entry is one of *ids*, from what the index holds dated up to each of them.

    Each is paired with the :data:`_NEAREST` entries before it of each of its subjects, whether a subject is common
    read where it stands, and its chains followed through entries dated up to it: what its append made when the index
    held the entries before it and none after, which is what appends in order of time make. *known*: the kept words of
    some of *ids*, not read again; *fresh*: ids just inserted, which have no proposal to drop nor vector yet.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return
    stale = sorted(set(wanted) - set(fresh))
    for start in range(0, len(stale), 500):
        part = stale[start : start + 500]
        conn.execute(f"DELETE FROM proposals WHERE newer IN ({','.join('?' * len(part))})", part)
    known = known or {}
    said = {entry_id: known[entry_id] for entry_id in wanted if entry_id in known}
    said.update(_read_said_of(conn, [entry_id for entry_id in wanted if entry_id not in known]))
    if not said:
        return
    nearest, held = _nearest_before(conn, list(said.values()))
    others = sorted({other for near in nearest.values() for other in near})
    held.update(said)
    # An entry just inserted has no vector yet (it is stored after its rows, and pairs it again): only older ones may.
    by_meaning = not said.keys() <= set(fresh) and _any_vectors(conn)
    vectors = _read_vectors(conn, sorted(said.keys() | set(others))) if by_meaning else _Vectors({})
    common = _Common(conn)
    found = []
    for mine in said.values():
        for other_id in sorted(nearest.get(mine.key[1], ())):
            other = held.get(other_id)
            if other is None:  # a subject's row without its words: paired with nothing, as a rebuild finds it
                continue
            row = _pair(other, mine, mine.agent, vectors, common)
            if row is not None:
                found.append(row)
    _record(conn, found, _Links(conn), held)


def _any_vectors(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None


def _touched_by(
    conn: sqlite3.Connection, ids: Sequence[str], *, window: bool = True, rows: Iterable[tuple[str, str, str]] | None = None
) -> set[str]:
    """The entries dated after some of *ids* (entries of the index, about to be inserted or removed) whose proposals change with them.

    An entry's proposals rest on what is dated before it: its :data:`_NEAREST` entries before it of each subject, the
    :data:`COMMON_WINDOW` entries up to it (with *window*) and its chain of ``continuity_refs``. So an entry dated
    before others (a backfill, an import, an erase) changes the proposals of the :data:`_NEAREST` entries after it of
    each of its subjects, of the entries less than a window after it, and of those whose chains reach it. None when
    *ids* are their agents' newest entries, as appends mostly are: one statement an agent then tells so. *rows*: the
    (agent, ts_utc, id) of each of *ids*, when known, else read.
    """
    if rows is None:
        read: list[tuple[str, str, str]] = []
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            read += conn.execute(f"SELECT agent, ts_utc, id FROM entries WHERE id IN ({','.join('?' * len(part))})", part)
        rows = read
    keys: dict[str, list[tuple[str, str]]] = {}
    for agent, ts_utc, entry_id in rows:
        keys.setdefault(agent, []).append((ts_utc, entry_id))
    touched: set[str] = set()
    for agent, changed in keys.items():
        changed.sort()
        ours = {key[1] for key in changed}
        later = conn.execute(
            "SELECT ts_utc, id FROM entries WHERE agent = ? AND (ts_utc, id) > (?, ?) ORDER BY ts_utc, id", (agent, *changed[0])
        )
        found = _after(later, ours, changed[-1], COMMON_WINDOW - 1 if window else 0)
        if found is None:  # nothing held after them: the agent's newest
            continue
        touched |= found
        spans: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {}  # subject -> the first and last key of ours on it
        for one in _read_said_of(conn, sorted(ours)).values():
            for subject in one.subjects:
                first, last = spans.get(subject, (one.key, one.key))
                spans[subject] = (min(first, one.key), max(last, one.key))
        for subject, (first, last) in sorted(spans.items()):
            later = conn.execute(
                "SELECT ts_utc, id FROM subjects WHERE agent = ? AND subject = ? AND (ts_utc, id) > (?, ?) ORDER BY ts_utc, id",
                (agent, subject, *first),
            )
            touched |= _after(later, ours, last, _NEAREST) or set()
        touched |= _reaching(conn, agent, ours)
    return touched


def _after(rows: Iterable[tuple[str, str]], ours: set[str], last: tuple[str, str], reach: int) -> set[str] | None:
    """Of *rows* (keys in order of time), those not *ours* at most *reach* rows after one of *ours*; None when every row is ours.

    Stops reading once past *last* (the latest of *ours*) and *reach* rows after it.
    """
    found: set[str] = set()
    since = 0  # rows after the first of ours
    held = False
    for key in rows:
        if key[1] in ours:
            since = 0
            continue
        held = True
        since += 1
        if since <= reach:
            found.add(key[1])
        elif key > last:
            break
    return found if held else None


def _reaching(conn: sqlite3.Connection, agent: str, ids: set[str]) -> set[str]:
    """The entries of *agent* whose chains of ``continuity_refs`` reach one of *ids* (within :data:`_CHAIN_STEPS` entries)."""
    seen: set[str] = set()
    todo = sorted(ids)
    while todo and len(seen) < _CHAIN_STEPS:
        part, todo = todo[:500], todo[500:]
        query = f"SELECT l.src FROM links l JOIN entries e ON e.id = l.src WHERE l.dst IN ({','.join('?' * len(part))}) AND e.agent = ?"
        for (src,) in conn.execute(query, [*part, agent]):
            if src not in seen and src not in ids:
                seen.add(src)
                todo.append(src)
    return seen


def _nearest_before(conn: sqlite3.Connection, group: Sequence[_Said]) -> tuple[dict[str, set[str]], dict[str, _Said]]:
    """For each entry of *group*, the ids of the :data:`_NEAREST` entries before it of each of its subjects, and what
    pairing kept of those entries: read in a few statements (one for an append)."""
    asked = [(mine, subject) for mine in group for subject in sorted(mine.subjects)]
    found: dict[str, set[str]] = {}
    rows: dict[str, tuple[str, str, str, str, str, int]] = {}
    for start in range(0, len(asked), _TERMS_PER_QUERY):
        part = asked[start : start + _TERMS_PER_QUERY]
        params = [value for n, (mine, subject) in enumerate(part) for value in (n, mine.agent, subject, *mine.key)]
        for n, *row in conn.execute(_nearest_before_query(len(part)), params):
            found.setdefault(part[n][0].key[1], set()).add(row[0])
            rows[row[0]] = tuple(row)
    return found, _said_of(rows.values())


#: The most subqueries one statement of :func:`_nearest_before` joins (SQLite allows 500 terms in a compound SELECT).
_TERMS_PER_QUERY: Final = 200


@functools.lru_cache(maxsize=16)
def _nearest_before_query(terms: int) -> str:
    """The statement of :func:`_nearest_before` for *terms* (entry, subject) pairs: few texts, each prepared once."""
    nearest = " UNION ALL ".join(
        f"SELECT ? AS n, id FROM (SELECT id FROM subjects WHERE agent = ? AND subject = ? AND {_OLDER} LIMIT {_NEAREST})"
        for _ in range(terms)
    )
    # A subject's row without its words (kept in ``said``) pairs with nothing, as a rebuild finds it.
    return f"SELECT x.n, s.id, s.agent, s.ts_utc, s.subjects, s.words, s.asks FROM ({nearest}) x JOIN said s ON s.id = x.id"


def _read_said_of(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, _Said]:
    """The kept subjects and words of *ids*, read a few hundred at a time."""
    found: dict[str, _Said] = {}
    for start in range(0, len(ids), 500):
        found.update(_read_said(conn, ids[start : start + 500]))
    return found


def propose_again(conn: sqlite3.Connection, entry_ids: Sequence[str]) -> None:
    """Make again the proposals *entry_ids* are part of, now that vectors of theirs are stored; inside an open transaction.

    An append with NN on stores its entry's vector after the entry's rows, and an entry embedded later (behind an
    append, or by ``embed``) gets its vector after its proposals were made by words: this adds those its meaning makes,
    with the entries before it and the :data:`_NEAREST` after it of each of its subjects.
    """
    _propose_as_newer(conn, set(entry_ids) | _touched_by(conn, entry_ids, window=False))


def propose_all(conn: sqlite3.Connection) -> None:
    """Pair every indexed entry with the nearest earlier entries of its subjects, in order of time: what appends in that order make.

    Every entry's subjects are recorded first, in one statement, from what its insert kept in ``said``; then one pass
    over the subjects finds every candidate pair; each entry's kept words and vectors are read once.
    """
    said = _read_said(conn)
    _record_subjects(conn, said.values())
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
    vectors = _read_vectors(conn)
    common = _common_everywhere(conn, said, {newer for _, newer in candidates})
    found = []
    for (older_id, newer_id), agent in candidates.items():
        row = _pair(said[older_id], said[newer_id], agent, vectors, lambda newer: common[newer.key[1]])
        if row is not None:
            found.append(row)
    _record(conn, found, _Links(conn, every=True), said)


class _Links:
    """The entries of one's own agent each entry continues (``continuity_refs``): read as asked, or (*every*) all at once for a rebuild.

    A ref to another agent's entry, or to none, is no step of a chain: what one agent's proposals are must not depend
    on another agent's entries (a journal of alice alone makes the ones a journal of alice and bob makes for her).
    """

    def __init__(self, conn: sqlite3.Connection, *, every: bool = False) -> None:
        self._conn = conn
        self._known: dict[str, list[tuple[str, str, tuple[str, str]]]] | None = None
        if every:
            known: dict[str, list[tuple[str, str, tuple[str, str]]]] = {}
            for src, dst, agent, ts_utc in conn.execute(_LINKS_QUERY):
                known.setdefault(src, []).append((dst, agent, (ts_utc, dst)))
            self._known = known

    def of(self, entry_id: str, agent: str, up_to: tuple[str, str]) -> list[str]:
        """The entries of *agent* that *entry_id* continues, of them those dated up to *up_to* (a key)."""
        if self._known is not None:
            found = self._known.get(entry_id, [])
        else:
            found = [
                (dst, owner, (ts_utc, dst)) for _, dst, owner, ts_utc in self._conn.execute(_LINKS_QUERY + " WHERE l.src = ?", (entry_id,))
            ]
        return [dst for dst, owner, key in found if owner == agent and key <= up_to]

    def continues(self, newer: tuple[str, str], older: str, agent: str) -> bool:
        """Whether the entry of key *newer* reaches *older* along *agent*'s own continuity_refs (within :data:`_CHAIN_STEPS`
        entries), through entries dated up to it: those its append met, the index holding the entries before it alone."""
        seen = {newer[1]}
        todo = [newer[1]]
        while todo and len(seen) <= _CHAIN_STEPS:
            for ref in self.of(todo.pop(), agent, newer):
                if ref == older:
                    return True
                if ref not in seen:
                    seen.add(ref)
                    todo.append(ref)
        return False


_LINKS_QUERY: Final = "SELECT l.src, l.dst, d.agent, d.ts_utc FROM links l JOIN entries d ON d.id = l.dst"


def _record(
    conn: sqlite3.Connection, found: Sequence[tuple[str, str, str, float, float | None, str]], links: _Links, said: Mapping[str, _Said]
) -> None:
    """Insert the proposals *found* but those already decided (the newer supersedes the older) and those along a chain.

    *said*: what pairing kept of the entries of *found*, by id.
    """
    if not found:
        return
    decided = _decided(conn, found)
    kept = [row for row in found if (row[1], row[0]) not in decided and not links.continues(said[row[1]].key, row[0], row[2])]
    # By key, as the other tables' rows (see _record_subjects); the sort is stable, so of a pair found twice the last still wins.
    kept.sort(key=lambda row: (row[0], row[1]))
    conn.executemany("INSERT OR REPLACE INTO proposals (older, newer, agent, score, cosine, subject) VALUES (?, ?, ?, ?, ?, ?)", kept)


def _decided(conn: sqlite3.Connection, found: Sequence[tuple[str, str, str, float, float | None, str]]) -> set[tuple[str, str]]:
    """The ``(src, dst)`` supersessions of the newer entries of *found*: a pair among them is decided, no proposal."""
    decided: set[tuple[str, str]] = set()
    newers = sorted({row[1] for row in found})
    for start in range(0, len(newers), 500):
        part = newers[start : start + 500]
        decided.update(conn.execute(f"SELECT src, dst FROM supersessions WHERE src IN ({','.join('?' * len(part))})", part).fetchall())
    return decided


def forget_proposals(conn: sqlite3.Connection, entry_id: str) -> set[str]:
    """Remove an entry's subjects and every proposal it is part of; inside an open transaction, before its other rows go.

    Returns the entries dated after it whose proposals change without it (see :func:`_touched_by`): once its rows are
    gone, :func:`propose_again_after` makes theirs again, as a rebuild without it would.
    """
    touched = _touched_by(conn, [entry_id])
    conn.execute("DELETE FROM subjects WHERE id = ?", (entry_id,))
    conn.execute("DELETE FROM said WHERE id = ?", (entry_id,))
    conn.execute("DELETE FROM proposals WHERE older = ? OR newer = ?", (entry_id, entry_id))
    conn.execute("DELETE FROM decisions WHERE entry = ?", (entry_id,))
    return touched - {entry_id}


def propose_again_after(conn: sqlite3.Connection, touched: Iterable[str]) -> None:
    """Make again the proposals of the entries *touched* (what :func:`forget_proposals` returned), once an entry's rows are gone."""
    _propose_as_newer(conn, touched)


def _pending_where() -> str:
    # A proposal stays pending until an entry of the agent supersedes the older one explicitly (an accepted proposal's
    # correction does), or an entry of the agent records a decision on this very pair (a rejection).
    # CROSS JOIN keeps the supersessions of the older entry as the outer loop: left to choose, SQLite walked
    # every entry of the agent (entries_agent_ts) for each proposal, which made a read of a few marks cost milliseconds.
    return (
        "NOT EXISTS (SELECT 1 FROM supersessions s CROSS JOIN entries x ON x.id = s.src WHERE s.dst = p.older AND x.agent = p.agent)"
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
            "SELECT p.older, p.newer, p.agent, p.score, p.subject, o.ts, n.ts, p.cosine FROM proposals p JOIN entries n ON n.id = p.newer"
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
            "SELECT p.older, p.newer, p.agent, p.score, p.subject, o.ts, n.ts, p.cosine FROM proposals p JOIN entries n ON n.id = p.newer"
            f" JOIN entries o ON o.id = p.older WHERE {scoped}{_pending_where()} ORDER BY n.ts_utc, n.id, o.ts_utc, o.id",
            [value for value in (agent, newer) if value is not None],
        )
    ]
