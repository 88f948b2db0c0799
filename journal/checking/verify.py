"""Checking a journal: every entry file, then the index against what a rebuild of those files would make.

The check is one instant's: under the writer lock (held only while file names
are listed) the index's read transaction starts and the entry files present
are listed, so an append that publishes later is in neither and is never
reported. Files are then read without the lock (published files are
immutable), one at a time: each is judged alone and its entry goes straight
into a rebuild in a scratch database outside the journal, so memory does not
grow with the journal (the rare files that claim one id or key are settled
once all are in). The two indexes are then compared table by table, each
table read in order of id on both sides at once. Nothing in the journal is
written; :func:`repair` is the one part that changes anything, and
it only moves files that are no entry into a quarantine folder and rebuilds
the index, never deleting an entry file.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.errors import EntryFileError, EntryValidationError, UnsafePathError
from journal.files import FILE_MODE, fsync_directory, make_dir, scratch_errors
from journal.files.entry import Entry, entry_from_json_bytes
from journal.files.store import EntryStore, ScanProblem
from journal.indexing import IndexSnapshot
from journal.indexing.index import INDEX_SCHEMA_VERSION
from journal.indexing.scratch import ScratchIndex
from journal.sync import SkippedFile, first_of_each

if TYPE_CHECKING:
    from journal.sync import IndexKeeper

__all__ = ["DEEP_SAMPLE", "MIN_COSINE", "Problem", "VerifyReport", "repair", "verify"]

#: Entries re-embedded by a deep check (evenly spread over the entries by id).
DEEP_SAMPLE: Final = 64
#: The cosine a stored vector must reach against a fresh embedding of its entry: float32 noise only.
MIN_COSINE: Final = 0.999
#: Ids named in one index problem; the rest are counted.
_SHOWN_IDS: Final = 5
INDEX_FILE: Final = "index/journal.sqlite3"
#: Bytes a vector's blob holds per dimension (float32).
_FLOAT32_BYTES: Final = 4
_REINDEX: Final = "run 'ghostjournal reindex' (or 'ghostjournal verify --repair') to rebuild the index from the entry files"
_QUARANTINE: Final = "move it out of entries/ ('ghostjournal verify --repair' moves it to quarantine/, deleting nothing)"
#: The kinds of problem a repair moves to quarantine: files a rebuild leaves out.
_QUARANTINED: Final = frozenset({"not_an_entry", "unsafe_file", "unreadable", "misplaced", "duplicate_id", "duplicate_client_key"})
#: Entries read before they are added to the rebuild together, in order of rowid (see :func:`_fill`).
_BATCH: Final = 1000
#: What the scratch space holds, as a refusal of it names it.
_SCRATCH: Final = "verify's scratch index"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a journal: its kind, the file it is in (relative to the root), what is wrong and how to fix it."""

    kind: str
    path: str
    detail: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        """As JSON data."""
        return {"kind": self.kind, "path": self.path, "detail": self.detail, "fix": self.fix}


@dataclass(slots=True)
class VerifyReport:
    """What :func:`verify` found (and, after :func:`repair`, what the repair did).

    Attributes:
        files: entry files checked (present when the check started).
        entries: of those, the valid entries a rebuild would index.
        agent: the agent the check was scoped to, or None.
        problems: what is wrong, each with its file and fix.
        unattributed: with *agent*: files that may stand in the place of the agent's entries and cannot be
            shown to it (no readable agent, or another agent's entry under another entry's name); when any,
            an ``unattributed`` problem counts them, so the check is not clean.
        deep_checked: entries whose vectors a deep check re-embedded.
        repairs: what a repair did (files moved, the index rebuilt).
        quarantine: the folder a repair moved files into, or None.
        fixed: the problems the check before a repair found.
    """

    files: int = 0
    entries: int = 0
    agent: str | None = None
    problems: list[Problem] = field(default_factory=list)
    unattributed: int = 0
    deep_checked: int = 0
    repairs: list[str] = field(default_factory=list)
    quarantine: str | None = None
    fixed: list[Problem] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def counts(self) -> dict[str, int]:
        """How many problems of each kind."""
        counted: dict[str, int] = {}
        for problem in self.problems:
            counted[problem.kind] = counted.get(problem.kind, 0) + 1
        return dict(sorted(counted.items()))

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        document: dict[str, Any] = {
            "ok": self.is_clean,
            "files": self.files,
            "entries": self.entries,
            "agent": self.agent,
            "problems": [p.to_dict() for p in self.problems],
            "counts": self.counts(),
            "unattributed": self.unattributed,
            "deep_checked": self.deep_checked,
        }
        if self.repairs or self.fixed:
            document |= {"repairs": self.repairs, "quarantine": self.quarantine, "fixed": [p.to_dict() for p in self.fixed]}
        return document


@dataclass(slots=True)
class _Seen:
    """What the file pass keeps of the journal: whose the files with a problem, or with an id or key of another file's, are.

    Only those files are kept (a problem is shown by its file's agent), so
    what is kept grows with the problems found, not with the journal.
    """

    agent_of_path: dict[str, str] = field(default_factory=dict)
    id_of_path: dict[str, str] = field(default_factory=dict)
    home_of_path: dict[str, str] = field(default_factory=dict)  # the path its entry belongs at
    first_of: dict[str, str] = field(default_factory=dict)  # a duplicate's path -> the path of the file holding its id or key first

    def shown_to(self, problem: Problem, agent: str | None) -> Problem | None:
        """*problem* as a check scoped to *agent* shows it, or None when it is not that agent's to see.

        Scoped, a file is the agent's when it holds the agent's entry under
        that entry's own id: a file named after another id may sit in the
        place of another agent's entry, whose id and date its path would show.
        A duplicate whose first file is another agent's does not name that file.
        """
        if agent is None:
            return problem
        rel = problem.path.removeprefix("entries/")
        if self.agent_of_path.get(rel) != agent or rel.rpartition("/")[2] != f"{self.id_of_path[rel]}.json":
            return None
        first = self.first_of.get(rel)
        if first is not None and self.agent_of_path.get(first) != agent and problem.detail.endswith(f"entries/{first}"):
            detail = problem.detail.removesuffix(f"entries/{first}") + "an entry file of another agent"
            return Problem(problem.kind, problem.path, detail, problem.fix)
        return problem

    def note(self, rel_path: str, entry: Entry) -> None:
        """Keep whose the file *rel_path*, holding *entry*, is."""
        self.agent_of_path[rel_path] = entry.agent
        self.id_of_path[rel_path] = entry.id
        self.home_of_path[rel_path] = EntryStore.rel_path_for(entry)

    def hidden_from(self, problem: Problem, agent: str) -> tuple[str, str] | None:
        """What a check scoped to *agent* makes of *problem*, which :meth:`shown_to` hides: None when it is another agent's alone.

        Else ``("displaced", home)`` when the file holds the agent's own entry
        under another entry's name (*home*: the path the entry belongs at), or
        ``("unattributed", "")`` when the file may stand in the place of one of
        the agent's entries: it holds no entry whose agent can be read, or
        another agent's entry under a name not its own (whose name that was,
        the files no longer tell).
        """
        rel = problem.path.removeprefix("entries/")
        owner = self.agent_of_path.get(rel)
        if owner is None:
            return "unattributed", ""
        if rel.rpartition("/")[2] == f"{self.id_of_path[rel]}.json":
            return None  # named after its own entry: that entry's agent's file, wherever it sits
        if owner == agent:
            return "displaced", self.home_of_path[rel]
        return "unattributed", ""


def _file_problems(store: EntryStore, rel_path: str, seen: _Seen) -> tuple[list[Problem], Entry | None]:
    """Read one entry file and judge it alone: type, size, schema, canonical bytes, id and path, mode, links to it.

    Returns the problems found and the entry a rebuild indexes from the file (None: it indexes none).
    """
    shown = f"entries/{rel_path}"
    try:
        raw, info = store.read_with_stat(rel_path)
    except FileNotFoundError:
        # Entry files are never removed by the journal: one gone since the listing was taken away by hand.
        return [Problem("vanished", shown, "the file was listed when the check started and is gone now", "restore it from a backup")], None
    except UnsafePathError as exc:
        return [Problem("unsafe_file", shown, exc.reason, _QUARANTINE)], None
    except EntryFileError as exc:
        return [Problem("unreadable", shown, exc.reason, f"restore it from a backup, or {_QUARANTINE}")], None
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise
        return [Problem("unreadable", shown, f"cannot be read ({exc.strerror})", f"restore it from a backup, or {_QUARANTINE}")], None
    try:
        entry = entry_from_json_bytes(raw)
    except EntryValidationError as exc:
        return [Problem("unreadable", shown, f"not a valid schema v1 entry: {exc}", f"restore it from a backup, or {_QUARANTINE}")], None
    belongs = EntryStore.rel_path_for(entry)
    if belongs != rel_path:
        seen.note(rel_path, entry)
        return [
            Problem(
                "misplaced",
                shown,
                f"holds entry {entry.id!r} of {entry.ts}, which belongs at entries/{belongs}",
                f"a file swapped or copied by hand; restore the right file here from a backup, or {_QUARANTINE}",
            )
        ], None
    problems = []
    if raw != entry.to_json_bytes():
        problems.append(
            Problem(
                "not_canonical",
                shown,
                "its bytes are not the canonical JSON of the entry they hold (edited by hand?)",
                "restore it from a backup; until then the entry reads as the file's values say",
            )
        )
    if stat.S_IMODE(info.st_mode) != FILE_MODE:
        problems.append(
            Problem("mode", shown, f"mode {stat.S_IMODE(info.st_mode):04o}, not {FILE_MODE:04o}", f"chmod {FILE_MODE:o} {shown}")
        )
    if info.st_nlink > 1:
        problems.append(
            Problem(
                "hard_linked",
                shown,
                f"the file has {info.st_nlink} names (hard links): writing through another name changes this entry",
                f"give it a copy of its own: cp -p {shown} {shown}.copy && mv {shown}.copy {shown}",
            )
        )
    if problems:
        seen.note(rel_path, entry)
    return problems, entry


def _displaced_problems(displaced: dict[str, str], rebuilt: IndexSnapshot, taken: set[str], agent: str) -> list[Problem]:
    """Scoped to *agent*: each of its entries (id -> the path it belongs at) found in a file under another entry's name.

    That file's path is not shown, for it may be named after another agent's
    entry: the problem is reported at the path the agent's own entry belongs at.
    *taken*: those paths whose file holds something else (what, is not shown).
    """
    held = rebuilt.paths_of(displaced)
    problems = []
    for entry_id, home in sorted(displaced.items()):
        if held.get(entry_id) == home:
            detail = f"entry {entry_id!r} is also in another file, under the name of another entry (a file copied or restored by hand)"
            fix = "run 'ghostjournal verify' without --agent to find that file, and restore it from a backup or " + _QUARANTINE
        else:
            own = "holds something else" if home in taken else "is missing"
            detail = (
                f"entry {entry_id!r} is not in its own file, which {own}: it is in another file, under the name of another entry "
                "(a file swapped, copied or restored by hand)"
            )
            fix = (
                f"run 'ghostjournal verify' without --agent to find that file, and move it back to entries/{home}, or restore it from a backup"
                if home not in taken
                else "run 'ghostjournal verify' without --agent to find both files, and put each back at its own place, or restore both from a backup"
            )
        problems.append(Problem("displaced", f"entries/{home}", f"{detail}; scoped to {agent!r}, that file's path is not shown", fix))
    return problems


def _unattributed_problem(count: int, agent: str) -> Problem:
    """Scoped to *agent*: the files that may stand in the place of its entries but cannot be shown to it, counted.

    Such a file holds no entry whose agent can be read, or another agent's
    entry under a name not its own: whose entry was there, the files no longer
    tell (a read drops the index row of an entry whose file holds another's),
    so the check is not clean; nothing of what the file holds is shown.
    """
    files = "1 file" if count == 1 else f"{count} files"
    return Problem(
        "unattributed",
        "entries/",
        f"{files} may stand in the place of entries of {agent!r} and cannot be shown scoped to it: "
        "a file holding no entry whose agent can be read, or another agent's entry under the name of another entry",
        "run 'ghostjournal verify' without --agent to see each file and its fix ('ghostjournal verify --repair' moves them to quarantine/)",
    )


def _link_problems(scratch: ScratchIndex, agent: str | None) -> list[Problem]:
    """Every continuity or supersession link of an entry the rebuild holds to an entry that is missing or another agent's."""
    problems = []
    for path, entry_agent, name, ref, owner in scratch.link_targets(agent):
        if owner is None:
            problems.append(
                Problem(
                    "dangling_link",
                    f"entries/{path}",
                    f"{name} {ref!r}, which no entry of this journal holds",
                    "restore that entry from a backup (links are never rewritten: the entry file is immutable)",
                )
            )
        else:
            # Scoped to one agent, the other agent's id is not shown: it is that agent's data.
            target = "an entry" if agent is not None else repr(ref)
            problems.append(
                Problem(
                    "foreign_link",
                    f"entries/{path}",
                    f"{name} {target} of another agent; reads scoped to {entry_agent!r} ignore the link",
                    "nothing to repair: reads never follow it; restore the entry from a backup if the link is wrong",
                )
            )
    return problems


def _ids(ids: Iterable[str]) -> str:
    listed = sorted(ids)
    shown = ", ".join(repr(i) for i in listed[:_SHOWN_IDS])
    return shown + (f" and {len(listed) - _SHOWN_IDS} more" if len(listed) > _SHOWN_IDS else "")


def _differing(main: Iterator[tuple[Any, ...]], scratch: Iterator[tuple[Any, ...]]) -> tuple[set[Any], set[Any], set[Any]]:
    """Merge two streams of rows sorted by their first column: keys only in *main*, only in *scratch*, and in both with other values."""
    only_main: set[Any] = set()
    only_scratch: set[Any] = set()
    changed: set[Any] = set()
    a, b = next(main, None), next(scratch, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            assert a is not None  # noqa: S101 - narrows the type: b is None or a sorts first, so a is a row
            only_main.add(a[0])
            a = next(main, None)
        elif a is None or b[0] < a[0]:
            only_scratch.add(b[0])
            b = next(scratch, None)
        else:
            if a != b:
                changed.add(a[0])
            a, b = next(main, None), next(scratch, None)
    return only_main, only_scratch, changed


def _skipping(rows: Iterator[tuple[Any, ...]], ids: set[str], key: Callable[[tuple[Any, ...]], str]) -> Iterator[tuple[Any, ...]]:
    """The rows of *rows* whose entry (*key* of the row) is none of *ids*."""
    return (row for row in rows if key(row) not in ids)


def _left_out(main: IndexSnapshot, scratch: IndexSnapshot, edited: set[str]) -> Iterator[int]:
    """The rowids of the entries only one side holds, and of *edited*: their words differ for reasons reported on their own.

    Both sides' ids are read in order at once, so no list of every entry is held.
    """
    ours, theirs = main.id_rowids(), scratch.id_rowids()
    a, b = next(ours, None), next(theirs, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            assert a is not None  # noqa: S101 - narrows the type: b is None or a sorts first, so a is a row
            yield a[1]
            a = next(ours, None)
        elif a is None or b[0] < a[0]:
            yield b[1]
            b = next(theirs, None)
        else:
            if a[0] in edited:
                yield a[1]
            a, b = next(ours, None), next(theirs, None)


def _edited_problems(main: IndexSnapshot, scratch: IndexSnapshot, agent: str | None) -> tuple[list[Problem], set[str]]:
    """Each entry file whose canonical bytes are not those the index recorded when it indexed the entry, at its file; and their ids."""
    _, _, edited = _differing(main.digests(agent), scratch.digests(agent))
    path_of = scratch.paths_of(edited)
    problems = [
        Problem(
            "edited",
            f"entries/{path_of[entry_id]}",
            "the file no longer holds the entry that was appended (its digest is not the one the index recorded then; "
            "any field counts, meta and anchors too); 'ghostjournal reindex' would adopt the edit as the entry, and verify "
            "could not tell afterwards",
            "restore the file from a backup; to keep the edit instead, run 'ghostjournal reindex' ('verify --repair' does not adopt it)",
        )
        for entry_id in sorted(edited)
    ]
    return problems, edited


def _index_problems(main: IndexSnapshot, scratch: IndexSnapshot, agent: str | None) -> list[Problem]:
    """The index (*main*, in its read transaction) against the rebuild of the files (*scratch*, its entries under *main*'s rowids), table by table.

    An entry whose file was edited is reported at its file, once: what its
    rows differ in is the edit, and no fault of the index.
    """
    problems, edited = _edited_problems(main, scratch, agent)

    def compare(
        kind: str, what: str, read: Callable[[IndexSnapshot], Iterator[tuple[Any, ...]]], key: Callable[[tuple[Any, ...]], str]
    ) -> None:
        extra, lacking, changed = _differing(_skipping(read(main), edited, key), _skipping(read(scratch), edited, key))
        parts = [
            f"{len(extra)} {what} of no entry file ({_ids(extra)})" if extra else "",
            f"no {what} for {len(lacking)} in the files ({_ids(lacking)})" if lacking else "",
            f"{len(changed)} {what} unlike their files ({_ids(changed)})" if changed else "",
        ]
        if extra or lacking or changed:
            problems.append(Problem(kind, INDEX_FILE, "the index has " + "; ".join(p for p in parts if p), _REINDEX))

    def entry_of(row: tuple[Any, ...]) -> str:
        return str(row[0])

    def source_of(row: tuple[Any, ...]) -> str:
        return str(row[0]).split(" ", 1)[0]

    compare("index_rows", "rows", lambda index: index.rows(agent), entry_of)
    compare("index_text", "text rows", lambda index: index.texts(agent), entry_of)
    compare("index_links", "links rows", lambda index: index.links(agent), source_of)
    compare("index_links", "supersessions rows", lambda index: index.supersessions(agent), source_of)
    # The words of an edited entry, and of one only the index or only the files hold, differ for reasons reported above.
    left_out = list(_left_out(main, scratch, edited))
    for index in (main, scratch):
        index.leave_out(left_out)
    reference = scratch.postings(None, agent)  # each entry's words, from its file: one pass over the rebuild's text index
    if main.postings(None, agent) != reference:
        wrong = _wrong_rows(main.postings_by_row(None, agent), scratch.postings_by_row(None, agent), main, scratch)
        problems.append(
            Problem(
                "index_text", INDEX_FILE, f"the text index holds words not their own for {len(wrong)} entries ({_ids(wrong)})", _REINDEX
            )
        )
    problems += _agent_text_problems(main, scratch, agent, reference)
    return problems


def _wrong_rows(
    have: dict[int, tuple[int, int]], want: dict[int, tuple[int, int]], main: IndexSnapshot, scratch: IndexSnapshot
) -> set[str]:
    """The ids of the rows whose postings differ between *have* and *want* (a row of no entry by its rowid)."""
    wrong = {rowid for rowid in have.keys() | want.keys() if have.get(rowid) != want.get(rowid)}
    # The rebuild holds every file's entry under the index's rowid for its id; the index alone, the entries of no file.
    id_of = scratch.ids_of(wrong)
    id_of |= main.ids_of(wrong - id_of.keys())
    return {id_of.get(rowid, f"row {rowid}") for rowid in wrong}


def _agent_text_problems(main: IndexSnapshot, scratch: IndexSnapshot, agent: str | None, reference: tuple[int, int]) -> list[Problem]:
    """Each agent's own text table: its count, its rows (those of the agent's entries), and each entry's words against a rebuild's.

    The agents' tables together hold each entry's words once, as the
    journal-wide one does: their checksums add up to the rebuild's
    (*reference*), or the entries whose words differ are sought row by row.
    """
    problems = []
    have, want = main.agent_tables(agent), scratch.agent_tables(agent)
    for name in sorted(have.keys() | want.keys()):
        if name not in have or name not in want:
            if have.get(name, (0, 0))[1] or want.get(name, (0, 0))[1]:  # an agent row of no entries is what deletions leave
                problems.append(
                    Problem(
                        "index_agent_text",
                        INDEX_FILE,
                        f"the text table of agent {name!r} is {'missing' if name not in have else 'of no entry file'}",
                        _REINDEX,
                    )
                )
            continue
        (main_id, main_count), (_, scratch_count) = have[name], want[name]
        rows = main.agent_text_rowids(main_id)
        agent_rows = main.entry_rowids(name)
        if main_count != scratch_count or rows != agent_rows:
            problems.append(
                Problem(
                    "index_agent_text",
                    INDEX_FILE,
                    f"the text table of agent {name!r} counts {main_count} entries and holds "
                    f"{len(rows)} rows, where its files give {scratch_count}",
                    _REINDEX,
                )
            )
    if problems:
        return problems  # the tables' rows are wrong already: their words are no use to compare
    sums = [main.postings(agent_id, None) for agent_id, _ in have.values()]
    if (sum(count for count, _ in sums), sum(total for _, total in sums)) == reference:
        return []
    wanted = scratch.postings_by_row(None, agent)
    for name, (agent_id, _) in sorted(have.items()):
        mine = main.entry_rowids(name)
        wrong = _wrong_rows(
            main.postings_by_row(agent_id, None), {rowid: pair for rowid, pair in wanted.items() if rowid in mine}, main, scratch
        )
        if wrong:
            problems.append(
                Problem(
                    "index_agent_text",
                    INDEX_FILE,
                    f"the text table of agent {name!r} holds words not their own for {len(wrong)} entries ({_ids(wrong)})",
                    _REINDEX,
                )
            )
    return problems


def _vector_problems(main: IndexSnapshot, agent: str | None) -> list[Problem]:
    """Every encoder's vectors: named by a record, of its dimension, each of an indexed entry, one for every entry."""
    problems = []
    records = main.encoder_records()
    counts = main.vector_counts(agent)
    entries = main.entry_count(agent)
    for model, count in sorted(counts.items()):
        described = records.get(model)
        embed = f"run 'ghostjournal --nn --model MODEL embed' with the model {model.split(':')[0]!r}"
        if not described:
            problems.append(
                Problem("vectors_unnamed", INDEX_FILE, f"{count} vectors of {model!r} name no encoder record", _REINDEX + ", then " + embed)
            )
            continue
        dimensions = {int(d["dimension"]) for d in described if isinstance(d.get("dimension"), int)}
        if dimensions:
            wrong = main.vectors_of_other_sizes(model, [_FLOAT32_BYTES * d for d in sorted(dimensions)], agent)
            if wrong:
                problems.append(
                    Problem(
                        "vector_size",
                        INDEX_FILE,
                        f"{wrong} vectors of {model!r} are not of its dimension {sorted(dimensions)}",
                        _REINDEX + ", then " + embed,
                    )
                )
        if count != entries:
            problems.append(
                Problem(
                    "vectors_count",
                    INDEX_FILE,
                    f"{count} vectors of {model!r} for {entries} entries",
                    embed + " to embed the entries lacking one" if count < entries else _REINDEX,
                )
            )
    # Vectors of no entry row are no agent's: a check scoped to one cannot tell they are not its, so it reports them too.
    orphans = main.orphan_vectors()
    if orphans:
        problems.append(Problem("vectors_count", INDEX_FILE, f"{orphans} vectors belong to no indexed entry", _REINDEX))
    return problems


def _with_vectors(main: IndexSnapshot, scratch: IndexSnapshot, model: str) -> Iterator[tuple[str, str]]:
    """The id and file of each entry of the rebuild holding a stored vector of *model* in the index, by id (both read in order at once)."""
    stored = main.vector_ids(model)
    wanted = next(stored, None)
    for entry_id, path in scratch.id_paths():
        while wanted is not None and wanted < entry_id:
            wanted = next(stored, None)
        if wanted is None:
            return
        if wanted == entry_id:
            yield entry_id, path


def _deep_problems(keeper: IndexKeeper, main: IndexSnapshot, scratch: IndexSnapshot, sample: int) -> tuple[list[Problem], int]:
    """Re-embed up to *sample* entries (spread evenly by id) and compare each with its stored vector."""
    from journal.encoding.semantic import from_blob

    semantic = keeper.semantic
    assert semantic is not None  # noqa: S101 - narrows the type: Journal.verify refuses deep without NN
    # Counted first, then walked again for the chosen ones: memory holds the chosen entries only, never one per entry.
    count = sum(1 for _ in _with_vectors(main, scratch, semantic.model))
    step = max(1, math.ceil(count / sample)) if sample else count + 1
    chosen = [candidate for n, candidate in enumerate(_with_vectors(main, scratch, semantic.model)) if n % step == 0][:sample]
    problems = []
    checked = 0
    for entry_id, path in chosen:
        entry = _reread(keeper.store, path)
        if entry is None or entry.id != entry_id:
            continue  # the file changed since it was read: not the entry the rebuild holds
        checked += 1
        blob = main.vector_for(entry_id, semantic.model)
        if blob is None:
            continue  # cannot happen in one read transaction; the count check would report a missing vector
        stored = from_blob(blob)
        fresh = from_blob(semantic.embed_entry(entry))
        norm = float((stored @ stored) ** 0.5 * (fresh @ fresh) ** 0.5)
        cosine = float(stored @ fresh) / norm if norm else 0.0
        if stored.shape != fresh.shape or cosine < MIN_COSINE:
            problems.append(
                Problem(
                    "vector_stale",
                    f"entries/{path}",
                    f"its stored vector of {semantic.model!r} has cosine {cosine:.4f} with a fresh "
                    f"embedding (at least {MIN_COSINE} expected)",
                    "run 'ghostjournal --nn reindex' to embed every entry again",
                )
            )
    return problems, checked


def _snapshot(keeper: IndexKeeper, main: IndexSnapshot | None) -> tuple[list[str], list[ScanProblem], Problem | None]:
    """Under the writer lock: start *main*'s read transaction and list the entry files, one instant for both."""
    paths: list[str] = []
    foreign: list[ScanProblem] = []
    behind: Problem | None = None
    with keeper.lock:
        if main is not None:
            generation = main.begin()
            counter = keeper.lock.read_generation()
            if generation != counter:
                behind = Problem(
                    "index_behind",
                    INDEX_FILE,
                    f"the index caught up with write {'none' if generation is None else generation}, the write counter is at {counter}",
                    "open the journal for writing (any append), or " + _REINDEX,
                )
        for item in keeper.store.scan():
            if isinstance(item, ScanProblem):
                foreign.append(item)
            else:
                paths.append(item)
    return paths, foreign, behind


def verify(keeper: IndexKeeper, *, agent: str | None = None, deep: bool = False, sample: int = DEEP_SAMPLE) -> VerifyReport:
    """Check every entry file and the index (see :meth:`journal.Journal.verify`); change nothing."""
    report = VerifyReport(agent=agent)
    index_path = keeper.root / INDEX_FILE
    with contextlib.ExitStack() as stack:
        main: IndexSnapshot | None = None
        if not os.path.lexists(index_path):
            report.problems.append(Problem("index_missing", INDEX_FILE, "there is no index file", _REINDEX))
        else:
            try:
                main = stack.enter_context(IndexSnapshot.read_only(index_path))
            except sqlite3.Error as exc:
                report.problems.append(Problem("index_unreadable", INDEX_FILE, f"the index cannot be read ({exc})", _REINDEX))
        paths, foreign, behind = _snapshot(keeper, main)
        if behind is not None:
            report.problems.append(behind)
        if main is not None:
            stack.enter_context(main)  # its read transaction lasts until the check is done
        compared, stopped = _comparable(main)
        scratch = stack.enter_context(_scratch_index())
        rowids = _Rowids(compared)
        seen = _Seen()
        file_problems = [Problem("not_an_entry", f"entries/{item.path}", item.reason, _QUARANTINE) for item in foreign]
        skipped = _fill(keeper, paths, scratch, main, rowids, seen, file_problems)
        report.files = len(paths)
        for duplicate in skipped:
            kind = "duplicate_id" if duplicate.reason.startswith("duplicate id") else "duplicate_client_key"
            if duplicate.first is not None:
                seen.first_of[duplicate.path.removeprefix("entries/")] = duplicate.first
            file_problems.append(Problem(kind, duplicate.path, duplicate.reason, f"a copy of another entry's file; {_QUARANTINE}"))
        rebuilt = IndexSnapshot.of(scratch)  # nobody else writes the scratch index: its reads need no transaction
        displaced: dict[str, str] = {}  # the agent's entries found in a file under another's name: id -> the path each belongs at
        unshown: set[str] = set()  # files that may stand in the place of the agent's entries
        for problem in file_problems:
            shown = seen.shown_to(problem, agent)
            hidden = None if shown is not None or agent is None else seen.hidden_from(problem, agent)
            if shown is not None:
                report.problems.append(shown)
            elif hidden is not None and hidden[0] == "displaced":
                displaced[seen.id_of_path[problem.path.removeprefix("entries/")]] = hidden[1]
            elif hidden is not None:
                unshown.add(problem.path.removeprefix("entries/"))
        if agent is not None:
            # A file at the very place one of the agent's displaced entries belongs is that entry's problem: said there, not counted.
            homes = set(displaced.values())
            report.problems += _displaced_problems(displaced, rebuilt, homes & unshown, agent)
            report.unattributed = len(unshown - homes)  # not shown: an unscoped check names them
            if report.unattributed:
                report.problems.append(_unattributed_problem(report.unattributed, agent))
        report.problems += _link_problems(scratch, agent)
        report.entries = rebuilt.entry_count(agent)
        if stopped is not None:
            # Tables of another layout, or none that can be read, compare as nothing but differences: say what it is, and stop there.
            report.problems.append(stopped)
        elif compared is not None:
            try:
                if rowids.failed is not None:
                    raise rowids.failed
                report.problems += _index_problems(compared, rebuilt, agent)
                report.problems += _vector_problems(compared, agent)
                if deep:
                    deep_found, report.deep_checked = _deep_problems(keeper, compared, rebuilt, sample)
                    report.problems += deep_found
            except sqlite3.DatabaseError as exc:
                report.problems.append(_unreadable(exc))
    return report


def _unreadable(exc: sqlite3.Error) -> Problem:
    return Problem("index_unreadable", INDEX_FILE, f"the index cannot be read ({exc})", _REINDEX)


def _comparable(main: IndexSnapshot | None) -> tuple[IndexSnapshot | None, Problem | None]:
    """*main* when its tables are of this version's layout, so that they compare with a rebuild's; else None, and the problem saying why."""
    if main is None:
        return None, None
    try:
        layout = main.schema_version()
    except sqlite3.DatabaseError as exc:
        return None, _unreadable(exc)
    if layout != INDEX_SCHEMA_VERSION:
        return None, Problem(
            "index_outdated",
            INDEX_FILE,
            f"the index is of layout {layout}, not {INDEX_SCHEMA_VERSION}: made by another version of ghostjournal",
            _REINDEX + " (any open that writes rebuilds it too)",
        )
    return main, None


class _Rowids:
    """The rowid the rebuild gives each entry, so that the two text indexes' postings can be compared by sums.

    An entry the index holds gets its rowid there, any other the next above
    every rowid of the index. Without an index to compare with, None (the next
    free one). A read of the index that fails ends the lookups and is kept in
    :attr:`failed`: the check reports the index unreadable rather than compare.
    """

    def __init__(self, main: IndexSnapshot | None) -> None:
        self._main = main
        self._top = 0
        self.failed: sqlite3.DatabaseError | None = None
        if main is not None:
            try:
                self._top = main.top_rowid()
            except sqlite3.DatabaseError as exc:
                self._fail(exc)

    def _fail(self, exc: sqlite3.DatabaseError) -> None:
        self.failed, self._main = exc, None

    def __call__(self, entry_id: str) -> int | None:
        if self._main is None:
            return None
        try:
            rowid = self._main.rowid_of(entry_id)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
            return None
        if rowid is None:
            self._top += 1
            rowid = self._top
        return rowid


@contextlib.contextmanager
def _scratch_index() -> Iterator[ScratchIndex]:
    """An empty scratch index in a temporary directory of its own, removed afterwards."""
    with scratch_errors(_SCRATCH):  # a full or unwritable TMPDIR is named so, never taken for a damaged index
        scratch_dir = tempfile.mkdtemp(prefix="ghostjournal-verify-")
    try:
        scratch = ScratchIndex(Path(scratch_dir) / "rebuild.sqlite3")
        try:
            yield scratch
        finally:
            scratch.close()
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)


def _fill(
    keeper: IndexKeeper,
    paths: list[str],
    scratch: ScratchIndex,
    main: IndexSnapshot | None,
    rowids: _Rowids,
    seen: _Seen,
    file_problems: list[Problem],
) -> list[SkippedFile]:
    """Read and judge each listed file, adding its entry to the rebuild a batch at a time; then settle the files that claim one id or key.

    At most :data:`_BATCH` entries are held at once. Returns the files a
    rebuild leaves out as copies of another file's id or key.
    """
    refused: list[tuple[str, Entry]] = []
    batch: list[tuple[int, str, Entry]] = []

    def add_batch() -> None:
        # In order of rowid: the text tables' pending words are written out whenever a rowid is lower than the one before,
        # and files are listed by day then id, an order the index's rowids (given in order of time) do not follow.
        batch.sort(key=lambda item: item[0])
        with scratch_errors(_SCRATCH):
            for rowid, rel_path, entry in batch:
                scratch.note_links(entry, rel_path)
                if not scratch.add(entry, rel_path, rowid or None):
                    refused.append((rel_path, entry))
        batch.clear()

    with scratch_errors(_SCRATCH):
        scratch.start()
    for rel_path in paths:
        problems, entry = _file_problems(keeper.store, rel_path, seen)
        file_problems += problems
        if entry is not None:
            batch.append((rowids(entry.id) or 0, rel_path, entry))
            if len(batch) >= _BATCH:
                add_batch()
    add_batch()
    skipped: list[SkippedFile] = []
    if refused:
        _settle(keeper, scratch, main, refused, rowids, seen, file_problems, skipped)
    with scratch_errors(_SCRATCH):
        scratch.finish()
    return skipped


def _settle(
    keeper: IndexKeeper,
    scratch: ScratchIndex,
    main: IndexSnapshot | None,
    refused: list[tuple[str, Entry]],
    rowids: _Rowids,
    seen: _Seen,
    file_problems: list[Problem],
    skipped: list[SkippedFile],
) -> None:
    """Choose among the files claiming one id or key as every rebuild does (:func:`journal.sync.first_of_each`), and leave the chosen in.

    The choice is made among the files *refused* (their id or key was taken)
    and the rows that took it: a file whose id and key no other file holds
    takes no part in it, so the choice is the one a rebuild of every file
    makes. Those rows are taken out and their files read again.
    """
    claims = dict(refused)
    with scratch_errors(_SCRATCH):
        in_the_way = {path: entry_id for _, entry in refused for entry_id, path in scratch.claimants(entry)}
    for path, entry_id in sorted(in_the_way.items()):
        with scratch_errors(_SCRATCH):
            scratch.drop(entry_id)
        problems, entry = _file_problems(keeper.store, path, seen)
        if entry is not None:
            claims[path] = entry  # its problems were reported when it was read first
        else:
            file_problems += problems  # changed since: what it holds now is what the check reports
    for path, entry in claims.items():
        seen.note(path, entry)
    for path, entry in first_of_each(claims, skipped.append, held=_indexed_paths(main, claims)):
        rowid = rowids(entry.id)
        with scratch_errors(_SCRATCH):
            scratch.add(entry, path, rowid)


def _indexed_paths(main: IndexSnapshot | None, paths: Iterable[str]) -> set[str]:
    """Those of *paths* the index holds (in its read transaction), or none when it cannot be read (a problem reported on its own)."""
    if main is None:
        return set()
    try:
        return main.held_paths(paths)
    except sqlite3.DatabaseError:
        return set()


def _reread(store: EntryStore, rel_path: str) -> Entry | None:
    """The entry of the file *rel_path* as it is now, or None when it holds none a rebuild would index."""
    return _file_problems(store, rel_path, _Seen())[1]


def repair(keeper: IndexKeeper, found: VerifyReport, *, now: datetime | None = None) -> VerifyReport:
    """Under the writer lock: move the files *found* names as no entry into ``quarantine/<time>/``, then rebuild the index.

    Returns a report with only :attr:`VerifyReport.repairs` and :attr:`VerifyReport.quarantine` filled in;
    the caller checks again. Nothing is deleted: a file moved keeps its bytes and its path below the folder.
    """
    done = VerifyReport(agent=found.agent)
    moving = sorted({p.path for p in found.problems if p.kind in _QUARANTINED})
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    folder = keeper.root / "quarantine" / stamp
    with keeper.lock:
        for shown in moving:
            source = keeper.root / shown
            if not os.path.lexists(source):
                continue
            target = folder / shown
            for level in reversed(target.relative_to(keeper.root).parents[:-1]):
                make_dir(keeper.root / level, f"{level}/", keeper.owner)
            os.rename(source, target)  # the same filesystem: a rename moves a symlink or FIFO itself, never its target
            fsync_directory(target.parent)
            fsync_directory(source.parent)
            done.repairs.append(f"moved {shown} to {target.relative_to(keeper.root)}")
        if moving:
            done.quarantine = str(folder.relative_to(keeper.root))
        keeper.rebuild_locked(corrupt=any(p.kind == "index_unreadable" for p in found.problems))
        done.repairs.append("rebuilt the index from the entry files")
    return done
