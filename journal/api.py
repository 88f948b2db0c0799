"""The Journal facade: one object over the entry files, the writer lock, the index and the ranking.

Each job lives in its own module: :mod:`journal.sync._keeper` opens the journal and
keeps its index in step with the files, :mod:`journal.sync._append` stores an
entry, :mod:`journal.sync._reading` reads entries as their files hold them, and
:mod:`journal.ranking.search` ranks (and picks the entries of :mod:`journal.ranking.context`).
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, BinaryIO, Self

from journal.carry import backup as _backup
from journal.carry import export as _export
from journal.carry import importer as _importer
from journal.carry.backup import BackupReport
from journal.carry.export import ExportManifest
from journal.carry.importer import ImportSummary
from journal.checking import verify as _verify
from journal.checking.verify import DEEP_SAMPLE, VerifyReport
from journal.encoding import DEFAULT_MODEL, Encoder
from journal.errors import EntryNotFoundError, ProposalNotFoundError, SemanticUnavailableError
from journal.files import make_redactor, undone_on_failure
from journal.files.entry import Entry, validate_payload
from journal.indexing import Proposal, auto_acceptable
from journal.indexing import shortids as _shortids
from journal.indexing.digest import Digest
from journal.ranking.context import PromptContext
from journal.ranking.hit import Hit
from journal.ranking.reranker import SHIPPED, load_reranker
from journal.ranking.search import DEFAULT_CONTEXT_CHARS, MAX_K, MODES, Ranker
from journal.sync import (
    MAX_LIMIT,
    AppendResult,
    EraseResult,
    GroupOutcome,
    IndexKeeper,
    Reader,
    SkippedFile,
    append_group,
    decided,
    decision_key,
    decision_payload,
    ids_of_agent,
    operator_name,
    recovering,
    writing,
)
from journal.sync import append as append_payload
from journal.sync import erase as erase_entries

__all__ = [
    "MAX_K",
    "MAX_LIMIT",
    "MODES",
    "AppendResult",
    "BackupReport",
    "EmbedResult",
    "EraseResult",
    "ExportManifest",
    "ImportSummary",
    "Journal",
    "Proposal",
    "SkippedFile",
    "VerifyReport",
]


@dataclass(frozen=True, slots=True)
class EmbedResult:
    """What :meth:`Journal.embed` did, and the vectors the index holds now.

    Attributes:
        embedded: entries embedded by this call.
        entries: entries in the index.
        missing: entries still lacking a vector from the encoder (0 unless some were appended meanwhile).
        encoder: the encoder's identity (``key``, ``model``, ``dimension``, ``weights``, ``normalization``, ``implementation``).
        encoders: every identity the index holds vectors of, each with ``vectors`` (how many) and ``implementations``.
    """

    embedded: int
    entries: int
    missing: int
    encoder: dict[str, Any]
    encoders: builtins.list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {
            "embedded": self.embedded,
            "entries": self.entries,
            "missing": self.missing,
            "encoder": self.encoder,
            "encoders": self.encoders,
        }


class Journal:
    """A journal rooted at a directory: immutable entry files plus a derived index.

    Opening a journal repairs its index when needed: a missing, corrupt or
    outdated index is rebuilt from the entry files, and entries published
    by an interrupted append are indexed.

    Args:
        root: the journal directory (created with a new manifest if missing,
            unless *create* is false). A root that is a symlink is refused.
        enable_nn: embed entries and rank by meaning as well as words. Loads
            the model (never from the network). Without it, torch is never imported.
        create: create a missing journal instead of raising JournalNotFoundError.
        lock_timeout: seconds an append waits for the writer lock.
        model: with NN, a model name (found offline, see
            :func:`journal.encoding.resolve_model`) or a local model directory.
        device: with NN, the torch device for the model.
        encoder: with NN, an :class:`~journal.encoding.Encoder` to use instead
            of loading *model*.
        on_progress: with NN, called with ``(done, total)`` while entries
            lacking a vector from the encoder are embedded: by :meth:`embed`,
            and by a ranking call (search, relate, context) that finds some
            first. The open itself embeds nothing.
        writable: the caller means to write (append, reindex): an open that
            cannot use the on-disk index for writing (no write access, a
            read-only mount, a full disk) raises its JournalStorageError at
            once. Without it (the default) such an open still succeeds: the
            reads fall back to an in-memory index of the entry files (one
            warning, only once a read needs it), and writes raise the error.
        repair_index: false to leave the index file as found: the open
            neither rebuilds a missing, corrupt or outdated index nor catches
            it up, and a read never rebuilds it. For :meth:`verify`, which
            must report the index as it is (``verify`` and ``backup`` open a
            journal they check so); other reads may then see it stale.
        redact: ``"default"`` replaces secrets in an appended entry's text (provider keys and tokens, JWTs, PEM
            private keys, URL passwords, high-entropy words) by ``[redacted:<kind>]`` before it is stored, and
            records how many in ``meta.redacted``; ``"off"`` stores the text as given (see docs/erasure.md).
        redact_patterns: extra kinds of secret, each a kind (``"ticket"``) and a regular expression, applied with either mode.
        reranker: a reranker weights file (see :mod:`journal.ranking.reranker`) to reorder the best candidates of
            lexical and hybrid ranking after the neighbours' stage. None uses the shipped weights only if they say
            they are on by default (they are off: they did not beat the neighbours' stage on held-apart data). A
            file that cannot be used is reported once on the ``journal`` logger and ranking goes on without it.

    Raises:
        SemanticUnavailableError: NN asked for without the ``nn`` extra.
        ModelNotFoundError: NN asked for and no local copy of the model.
        JournalStorageError: the filesystem refused (disk full, read-only,
            permission denied); what this open created is removed again.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        enable_nn: bool = False,
        create: bool = True,
        lock_timeout: float = 60.0,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        device: str = "cpu",
        encoder: Encoder | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        writable: bool = False,
        repair_index: bool = True,
        redact: str = "default",
        redact_patterns: Mapping[str, str] | None = None,
        reranker: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self._redactor = make_redactor(redact, redact_patterns)
        # How this journal was opened, for :meth:`reopened` (the encoder is passed on as it is, never loaded again).
        self._options: dict[str, Any] = {
            "enable_nn": enable_nn,
            "lock_timeout": lock_timeout,
            "on_progress": on_progress,
            "writable": writable,
            "repair_index": repair_index,
            "redact": redact,
            "redact_patterns": redact_patterns,
            "reranker": reranker,
        }
        with undone_on_failure(self.root):
            if encoder is not None and not enable_nn:
                raise ValueError("encoder= is used only with enable_nn=True")
            if enable_nn:
                encoder = encoder or self._load_encoder(model, device, self.root / "models")
            self._keeper = IndexKeeper.open(
                self.root,
                create=create,
                writable=writable,
                lock_timeout=lock_timeout,
                encoder=encoder,
                on_progress=on_progress,
                repair_index=repair_index,
            )
        self.manifest = self._keeper.manifest
        self._reader = Reader(self._keeper)
        chosen = reranker is not None
        self._ranker = Ranker(
            self._keeper.index, self._keeper.semantic, self._reader, load_reranker(SHIPPED if reranker is None else reranker, chosen=chosen)
        )

    @staticmethod
    def _load_encoder(model: str | os.PathLike[str], device: str, cache_dir: Path) -> Encoder:
        from journal.encoding import load_encoder

        return load_encoder(model, device=device, cache_dir=cache_dir)

    @staticmethod
    def encoder_for(root: str | os.PathLike[str], *, model: str | os.PathLike[str] = DEFAULT_MODEL, device: str = "cpu") -> Encoder:
        """The encoder ``Journal(root, enable_nn=True, model=model, device=device)`` would load, for its ``encoder=``.

        Found offline as :func:`journal.load_encoder` finds it, with the hash of the model files remembered where the
        journal at *root* keeps it, so that the next process need not read the weights to know their identity. For a
        caller that loads the model apart from the open (to time it, or to learn whether it can be loaded at all).

        Raises:
            SemanticUnavailableError: the ``nn`` extra (or, for another model, the ``st`` extra) is not installed.
            ModelNotFoundError: no local copy of the model.
        """
        return Journal._load_encoder(model, device, Path(root) / "models")

    @property
    def encoder(self) -> Encoder | None:
        """The encoder in use, or None when NN is off."""
        return None if self._keeper.semantic is None else self._keeper.semantic.encoder

    @property
    def relevance_floor(self) -> float | None:
        """The cosine an entry found by meaning alone must reach in :meth:`search` (see its *floor*); None with NN off or a model without one."""
        return None if self._keeper.semantic is None else self._keeper.semantic.relevance_floor

    @property
    def skipped(self) -> builtins.list[SkippedFile]:
        """Files the last rebuild left out, and indexed entries a read found unusable since."""
        return self._keeper.skipped

    @skipped.setter
    def skipped(self, value: builtins.list[SkippedFile]) -> None:
        self._keeper.set_skipped(value)

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Release the index connection, the lock file and directory handles."""
        self._keeper.close()

    def still_in_place(self) -> bool:
        """Whether this open journal is still the journal at its path, so that a process keeping it open may go on using it.

        True while the directory, its ``entries/``, the writer lock file, the write counter and the index file this
        object holds open are the very ones now at their paths (the same device and inode), and ``manifest.json``
        there names the same journal. False once any of them was moved away or replaced (a restore of the
        directory, or of files copied into it), after :meth:`close`, and in a child process that inherited it
        through ``fork``: open a new Journal at the path then. A journal opened with ``writable=True`` holds its
        lock file and write counter from its open on (the counter is made then if missing); a read-only one holds
        them from the first write or catch-up that opens them. Changes nothing; never raises.
        """
        return self._keeper.in_place()

    def reopened(self) -> Journal:
        """A new Journal at this one's path, opened as this one was: the same options, and this one's encoder (not loaded again).

        For a process that keeps a journal open and finds it no longer :meth:`still_in_place`; this one stays open
        (close it once no call uses it). Never creates a journal.

        Raises:
            JournalNotFoundError: the path holds no journal now (it was moved away and nothing put in its place).
            JournalStorageError, ManifestError, UnsafePathError: as ``Journal(...)`` raises them.
        """
        return Journal(self.root, create=False, encoder=self.encoder, **self._options)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Journal({str(self.root)!r})"

    # -- writing -------------------------------------------------------------------

    def append(self, payload: Mapping[str, Any]) -> Entry:
        """Validate and durably store one entry; return it (or the earlier one with its client_key).

        Raises:
            EntryValidationError: the payload breaks schema v1, or a ``continuity_refs`` or ``supersedes`` id names no
                entry of its agent (another agent's reads as a missing one); nothing is written.
            DuplicateEntryError: a supplied ``id`` already exists.
            LockTimeoutError: another writer held the lock too long.
        """
        return self.append_with_result(payload).entry

    @writing
    def append_with_result(self, payload: Mapping[str, Any]) -> AppendResult:
        """Like :meth:`append`, also telling whether the client_key already existed.

        Args:
            payload: the entry, as for :meth:`append`. Every ``continuity_refs``
                and ``supersedes`` id is checked as :meth:`append` checks it, for
                every caller: an import too stores only what an append accepts.
        """
        return append_payload(self._keeper, payload, self._redactor)

    def as_stored(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The entry fields :meth:`append` would store for *payload*: redacted as this journal redacts, validated,
        defaults filled; nothing is written (what a dry run shows).

        Raises:
            EntryValidationError: the payload breaks schema v1, as :meth:`append` would say.
        """
        if self._redactor is not None and isinstance(payload, Mapping):
            payload = self._redactor.payload(payload)
        return validate_payload(payload)

    @writing
    def erase(
        self,
        ids: Iterable[str] = (),
        *,
        reason: str,
        by: str | None = None,
        agent: str | None = None,
        all_of_agent: bool = False,
    ) -> EraseResult:
        """Erase entries for good: each file becomes a tombstone, and no file of the journal keeps a byte of the erased text.

        The tombstone keeps the entry's id, ts, kind, agent and client_key (links to it stay valid; a
        retried append of its slot is a duplicate), with *reason*, when, *by* whom and a keyed hash of the
        erased bytes. The entry's rows, words and vectors leave the index, which is then rewritten (see
        docs/erasure.md). Erasing an erased entry again does nothing but finish its index part.

        Args:
            ids: the entries to erase; every one is checked before anything is written.
            reason: why, kept in the tombstone.
            by: who erases (default: the operator's login name).
            agent: only that agent's entries: another agent's id reads as unknown.
            all_of_agent: erase every entry of *agent* (with *ids* empty).

        Raises:
            EntryNotFoundError: an id names no entry (of *agent*); nothing is erased.
            EntryValidationError: *reason* or *by* is empty or not one line.
            EraseKeyError: the journal's ``erase.key`` is damaged; nothing is erased.
            JournalStorageError: the filesystem refused; a full disk while the index is rewritten says the erase is done
                but the index not yet rewritten, and running the same erase again finishes it.
        """
        wanted = list(ids)
        if all_of_agent:
            if agent is None or wanted:
                raise ValueError("all_of_agent erases every entry of agent=, and takes no ids")
            wanted = ids_of_agent(self._keeper, agent)
        return erase_entries(self._keeper, wanted, reason=reason, by=by if by is not None else operator_name(), agent=agent)

    @writing
    def append_many(self, payloads: Sequence[Mapping[str, Any] | Entry]) -> builtins.list[GroupOutcome]:
        """Store *payloads* as :meth:`append_with_result` would one after another, with one index commit for all; one outcome each.

        A payload may be an :class:`Entry` (of :meth:`Entry.from_payload`), stored as it is, with its id: redaction, like
        every check that makes an entry, was its maker's.

        Each outcome is the payload's :class:`AppendResult`, or the
        :class:`DuplicateEntryError` or :class:`EntryValidationError` its own
        append would raise (that payload alone is refused). The files are
        fsynced together, then named, then their rows committed, so the
        index is never ahead of the files; a crash leaves some of them
        stored, each found as a duplicate by the same call again.

        Raises:
            LockTimeoutError: another writer held the lock too long.
            JournalStorageError: the disk or the index refused; the entries published before it are kept.
        """
        # A mapping is redacted as append redacts it; an Entry is stored as it is (an import's copy of another journal's entry).
        redactor = self._redactor
        if redactor is not None:
            payloads = [redactor.payload(payload) if isinstance(payload, Mapping) else payload for payload in payloads]
        return append_group(self._keeper, payloads)

    @writing
    def reindex(
        self, *, on_skip: Callable[[SkippedFile], None] | None = None, on_progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Rebuild the index from the entry files; return how many entries it holds.

        Files that are not valid entries (foreign, corrupt, symlinks, duplicates)
        are reported through *on_skip* (and in :attr:`skipped`) and left untouched.
        Files are read before the writer lock is taken, so appends wait only
        for the final transaction. With NN on, every entry is then embedded
        again in batches, reported through *on_progress* as ``(done, total)``.
        """
        return self._keeper.reindex(on_skip=on_skip, on_progress=on_progress)

    @writing
    def embed(self, *, batch: int | None = None, on_progress: Callable[[int, int], None] | None = None) -> EmbedResult:
        """Embed every entry lacking a vector from this journal's encoder, *batch* entries per transaction (default 256).

        The entries lacking one are listed once, then embedded and committed
        a batch at a time: an interrupted call (even ``kill -9``) loses at
        most the batch in progress, and the next call embeds only what is
        still missing. *on_progress* gets ``(done, total)`` as it goes.

        Raises:
            SemanticUnavailableError: the journal was opened without NN.
        """
        semantic = self._keeper.semantic
        if semantic is None:
            raise SemanticUnavailableError(
                "embedding entries needs an encoder and this journal was opened without NN",
                "open it with Journal(root, enable_nn=True) or pass --nn",
            )
        embedded = semantic.fill(on_progress=on_progress) if batch is None else semantic.fill(batch=batch, on_progress=on_progress)
        return EmbedResult(embedded, self._keeper.index.count(), semantic.missing(), semantic.described, self._keeper.index.encoders())

    @contextlib.contextmanager
    def embedding_behind(self) -> Iterator[None]:
        """Within the block, each append embeds its entry on a second thread while it stores the entry and returns.

        For one writer appending entry after entry (a simulation): the vector
        is stored before the next ranking, ``fill`` or vector read of this
        object, and when the block ends, so every search, prompt context and
        vector is what it would be if each append had embedded its entry
        itself. What the second thread gains is the append's own disk work
        and whatever the caller does before its next ranking. An entry whose
        vector was not stored yet when the process died lacks one, like an
        entry appended without NN: the next ranking embeds it. Without NN the
        block changes nothing.
        """
        semantic = self._keeper.semantic
        if semantic is None:
            yield
            return
        with semantic.behind():
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception), self._keeper.calls:  # the error in flight is the one to raise
                    semantic.settle()
                raise
            with self._keeper.calls:
                semantic.settle()

    # -- checking ------------------------------------------------------------------

    @recovering
    def verify(self, *, agent: str | None = None, deep: bool = False, sample: int = DEEP_SAMPLE) -> VerifyReport:
        """Check every entry file and the index, changing nothing; the report lists each problem with its file and fix.

        Each entry file: schema v1, canonical bytes, id and path agree, a
        regular file of mode 0600 with one name, the entry that was appended
        (its digest is the one the index recorded then, so an edit of any
        field is reported at the file, as ``edited``); no two files of one id
        or one client_key; every ``continues``/``supersedes`` link names an
        entry of its own agent. Then the index against a rebuild of those
        files (made in a temporary directory): its layout, rows, text, links,
        each entry's words in the text index and its agent's text table;
        every encoder's vectors named, of their dimension, one per entry.
        *deep* re-embeds *sample* entries and compares cosines (needs NN).
        Open the journal with ``repair_index=False`` to check its index as
        found: a normal open rebuilds a corrupt or outdated one first.

        The files and the index are taken at one instant (the writer lock is
        held while the names are listed), so an entry appended during the
        check is not reported. With *agent*, only that agent's files and rows,
        and nothing of another agent's entry; a file that may stand in the
        place of one of its entries but cannot be shown to it (no readable
        agent, another agent's entry under another entry's name) is counted
        as an ``unattributed`` problem, so the check is never clean over it.

        Raises:
            SemanticUnavailableError: *deep* without NN.
        """
        if deep and self._keeper.semantic is None:
            raise SemanticUnavailableError(
                "verify --deep re-embeds entries and this journal was opened without NN", "pass --nn (and --model)"
            )
        return _verify.verify(self._keeper, agent=agent, deep=deep, sample=sample)

    @writing
    def repair(self, *, deep: bool = False, sample: int = DEEP_SAMPLE) -> VerifyReport:
        """Verify; if anything is wrong, move the files that are no entry to ``quarantine/<time>/`` and rebuild the index, then verify again.

        Only what is safe: an entry file is never deleted or changed, and a
        file moved keeps its bytes under the quarantine folder the report
        names. The report is the second check's, with ``repairs`` and
        ``fixed`` (what the first check found).
        """
        found = self.verify(deep=deep, sample=sample)
        if found.is_clean:
            return found
        done = _verify.repair(self._keeper, found)
        after = self.verify(deep=deep, sample=sample)
        after.repairs, after.quarantine, after.fixed = done.repairs, done.quarantine, found.problems
        return after

    # -- carrying ------------------------------------------------------------------

    @recovering
    def export(
        self,
        out: BinaryIO,
        *,
        agent: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        form: str = "jsonl",
    ) -> ExportManifest:
        """Write the entries (with *agent*: that agent's alone) to the binary stream *out*, oldest first, then a manifest line; return the manifest.

        Each entry is its canonical file's bytes, in order of time then id.
        The stream is consistent as of one instant: the entries published
        before the export began, each whole, and none published after, while
        other processes append. *form* is ``jsonl`` (one entry per line) or
        ``tar`` (one member per entry file); see :mod:`journal.carry.export` for
        the manifest. With *agent*, no id of another agent's entry is in the
        stream: a link to one is taken out of the entry and counted in
        ``links_removed``. Memory does not grow with the journal.

        Raises:
            ValueError: *form* is not ``jsonl`` or ``tar``, or a window bound is out of range.
        """
        return _export.export(self._keeper, out, agent=agent, since=since, until=until, form=form)

    def import_stream(
        self,
        source: IO[bytes],
        *,
        agent_map: Mapping[str, str] | None = None,
        partial: bool = False,
        on_entry: Callable[[int], None] | None = None,
        agent: str | None = None,
    ) -> ImportSummary:
        """Import an export stream (the JSON Lines form of :meth:`export`) from the binary stream *source*; return what it did.

        The whole stream is checked first (each line a valid entry, the
        manifest last, its count and hash matching); a stream that fails
        imports nothing and :class:`ImportStreamError` names the line, unless
        *partial*, which imports the good lines and lists the others. Each
        entry keeps its id, ts and client_key (its agent renamed by
        *agent_map*, old to new): one already held with the same bytes is a
        duplicate, one whose id or client_key is held with other bytes a
        conflict, reported and skipped. Importing a stream twice stores
        nothing the second time; an import killed at any point is finished by
        running it again. *on_entry* gets the count of entries handled so far. With *agent*, only that
        agent's entries (after *agent_map*) are imported, and the others are counted as ``other_agents``.
        An entry is stored only as :meth:`append_with_result` would store it
        for its agent, after the entries of the stream it links to: one whose
        link names itself, another agent's entry, an id neither imported nor
        held as its agent's (the manifest's ``links_outside`` is no licence),
        or a circle of links, is a bad line named by its position, and so in
        turn is one continuing it; one refused when stored (a line it links to
        was a conflict) is a conflict.

        Raises:
            ImportStreamError: a bad line, a missing manifest, a hash or count that does not match.
            EntryValidationError: an *agent_map* name that is no valid agent name.
            DiskFullError: the journal's filesystem clearly lacks the room (checked before anything is stored).
        """
        mapping = _importer.parse_agent_map(agent_map or {})
        return _importer.import_stream(self, source, agent_map=mapping, partial=partial, on_entry=on_entry, agent=agent)

    def import_dir(
        self,
        path: str | os.PathLike[str],
        *,
        agent_map: Mapping[str, str] | None = None,
        partial: bool = False,
        on_entry: Callable[[int], None] | None = None,
        agent: str | None = None,
    ) -> ImportSummary:
        """Import the journal directory *path* of ghostjournal 0.1.1 (another project on PyPI); return what it did.

        Mirrors :meth:`import_stream`: every entry file is read and mapped
        onto schema v1 first (the mapping is in docs/ghostjournal.md), and a directory
        with a file that cannot be imported imports nothing and
        :class:`ImportSourceError` names the file, unless *partial*, which
        imports the others and lists it under ``bad_files``. Each entry keeps
        its id, ts and client_key; duplicates and conflicts are counted as a
        stream's are, so importing a directory twice stores nothing the
        second time. Nothing in *path* is written, locked or followed (a
        symlink or FIFO in it is refused); the directory may belong to a
        running peer, whose entries published later a rerun brings in. An
        *agent_map* old name may be any agent name the peer accepts. Links are
        checked as for a stream: an entry is stored only as an append would
        store it, and one whose link would dangle or cross agents is a bad file. *agent* keeps the import
        to that agent's entries as for a stream.

        Raises:
            ImportSourceError: *path* is no ghostjournal 0.1.1 journal (our own journal is refused with what to use
                instead), or holds an entry file that cannot be imported.
            EntryValidationError: an *agent_map* name that is no valid agent name.
            DiskFullError: the journal's filesystem clearly lacks the room (checked before anything is stored).
        """
        mapping = _importer.parse_agent_map(agent_map or {}, peer=True)
        return _importer.import_peer_dir(self, Path(path), agent_map=mapping, partial=partial, on_entry=on_entry, agent=agent)

    @recovering
    def backup(self, out: str | os.PathLike[str]) -> BackupReport:
        """Copy the journal, while agents append, into the new directory *out*, then verify the copy; return both.

        The copy is a journal directory of its own (``Journal(out)`` opens
        it; no restore step is needed): the manifest, every entry file
        published before the backup began, and the index as of that instant,
        copied through SQLite's online backup API (appends wait while it is
        copied; readers never do). It is written beside *out* and renamed
        to it only when complete, so a failure leaves no *out*.

        Raises:
            OutputPathError: *out* exists (a directory, a journal, a file, a symlink or a FIFO) or is inside this journal or another.
            EraseKeyError: the journal's ``erase.key`` is damaged; nothing is left behind.
            JournalStorageError: the filesystem refused (full, read-only, denied); nothing is left behind.
        """

        def check(copy: Path) -> VerifyReport:
            with Journal(copy, create=False, repair_index=False) as journal:  # a copy whose index is damaged is reported so
                return journal.verify()

        return _backup.backup(self._keeper, Path(out), check)

    # -- reading -------------------------------------------------------------------

    @recovering
    def get(self, entry_id: str, agent: str | None = None) -> Entry:
        """Return the entry with *entry_id* (with *agent* given: only if it is that agent's).

        Raises:
            InvalidEntryIdError: the id has path, glob or length trouble.
            EntryNotFoundError: no such entry, or (with *agent*) one of
                another agent: the two cases are indistinguishable.
        """
        return self._reader.get(entry_id, agent)

    @recovering
    def resolve_id(self, text: str, agent: str | None = None) -> str:
        """The id of the one entry *text* names: its whole id, or a start of it that no other entry's id has.

        With *agent* given, only that agent's entries are looked at: another
        agent's ids neither match nor make a start ambiguous. :meth:`get` and
        :meth:`relate` take whole ids only; this is for ids a person typed
        from a table (see :meth:`short_ids`).

        Raises:
            InvalidEntryIdError: *text* could be no id's start.
            EntryNotFoundError: no entry's id is or starts with *text*.
            AmbiguousEntryIdError: more than one entry's id starts with *text*, and none is *text*.
        """
        return _shortids.resolve_id(self._keeper.index, text, agent)

    @recovering
    def short_ids(self, ids: Iterable[str], agent: str | None = None) -> dict[str, str]:
        """Each of *ids* cut to its shortest start of at least 8 characters that :meth:`resolve_id` (same *agent*) takes back to it."""
        return _shortids.short_ids(self._keeper.index, ids, agent)

    @recovering
    def find_by_client_key(self, client_key: str, agent: str | None = None) -> Entry | None:
        """The entry appended with *client_key* (with *agent* given: only if it is that agent's), or None.

        The files decide: a file that is gone or no entry holds no key (it is
        reported and its row dropped); a file that holds another key, id or
        agent than its row is reported and holds none either.
        """
        return self._reader.find_by_client_key(client_key, agent)

    @recovering
    def has_entries(self, *, simulated: bool, agent: str | None = None) -> bool:
        """Whether the journal (with *agent*: that agent's entries) holds an entry marked ``meta.simulated: true``.

        With ``simulated=False``: whether it holds one that is not so marked (a
        real agent's, or one appended by hand). One lookup in the index, however
        large the journal.
        """
        return self._keeper.index.has_entries(simulated=simulated, agent=agent)

    @recovering
    def proposals(self, agent: str | None = None, *, newer: str | None = None) -> builtins.list[Proposal]:
        """The pending supersede proposals (of *agent*, and made by the entry *newer*, when given): a newer entry that may update an
        older one of its agent.

        Derived at append and rebuilt by :meth:`reindex`, never written to an entry file. A proposal
        stops being pending once an entry of the agent names the older one in ``supersedes`` (as
        :meth:`accept_proposal` appends), or records a decision on it (as :meth:`reject_proposal` appends).
        """
        return self._keeper.index.proposals(agent, newer)

    def accept_proposal(self, older: str, newer: str, *, agent: str | None = None, origin: str = "operator") -> Entry:
        """Accept the pending proposal that *newer* updates *older*: append the correction, and return it.

        The correction is an ordinary entry of their agent, appended as :meth:`append` does: the newer entry's
        text, theme, tags and focus, ``supersedes`` naming *older*, ``continuity_refs`` *newer*, and
        ``meta.proposal`` recording the decision (with *origin* as its ``meta.origin``). Its client key is
        derived from the pair: accepting again returns the same entry and writes nothing.

        Raises:
            ProposalNotFoundError: no such pending proposal (with *agent*: of that agent; another agent's reads as
                none), never made, or no longer pending because an entry supersedes *older* already; nothing is written.
            ProposalDecidedError: the proposal was rejected; nothing is written.
        """
        return self._decide("accepted", older, newer, agent, origin)

    def auto_accept(self, newer: str, *, agent: str | None = None, origin: str = "agent") -> builtins.list[Entry]:
        """Accept every pending proposal the entry *newer* makes that is alike enough to take without someone deciding; the corrections.

        A proposal is taken when it scores at least ``AUTO_ACCEPT_THRESHOLD``, or its entries' vectors (NN on) have a
        cosine of at least ``AUTO_ACCEPT_COSINE``, or *newer* says that something changed ("now", "no longer",
        "moved", "from X to Y"...) and the score reaches ``AUTO_ACCEPT_CHANGE_THRESHOLD`` (see
        :func:`journal.indexing.auto_acceptable`). What a runner agent with ``accept_proposals = "auto"`` does after
        each entry it appends: the thresholds are chosen so that accepting costs no recency trap of the freshness
        set's tune split its answer (see docs/retrieval.md). Each acceptance is :meth:`accept_proposal`'s, so running
        it again appends nothing.
        """
        proposals = self.proposals(agent, newer=newer)
        if not proposals:
            return []
        text = self.get(newer, agent).voice
        return [
            self.accept_proposal(proposal.older, proposal.newer, agent=agent, origin=origin)
            for proposal in proposals
            if auto_acceptable(proposal, text)
        ]

    def reject_proposal(self, older: str, newer: str, *, agent: str | None = None, origin: str = "operator") -> Entry:
        """Reject the pending proposal that *newer* updates *older*: append a note saying both stand, and return it.

        The note's ``meta.proposal`` records the decision, so the pair is never proposed again, ``reindex``
        included. Rejecting again returns the same note; rejecting an accepted proposal raises
        ProposalDecidedError; the other errors are :meth:`accept_proposal`'s.
        """
        return self._decide("rejected", older, newer, agent, origin)

    def _decide(self, decision: str, older: str, newer: str, agent: str | None, origin: str) -> Entry:
        try:
            old, new = self.get(older, agent), self.get(newer, agent)
        except EntryNotFoundError:
            raise ProposalNotFoundError(older, newer) from None
        if old.agent != new.agent:  # never proposed: proposals are within one agent
            raise ProposalNotFoundError(older, newer)
        earlier = self.find_by_client_key(decision_key(old.id, new.id), old.agent)
        if earlier is None:
            if new.id not in {proposal.newer for proposal in self._pending(old.id)}:
                raise ProposalNotFoundError(older, newer)
            # Two deciders racing append under one client key: the second gets the first's entry, checked below.
            earlier = self.append(decision_payload(decision, old, new, origin))
        return decided(earlier, decision, old.id, new.id)

    @recovering
    def _pending(self, older: str) -> builtins.list[Proposal]:
        return self._keeper.index.pending_proposals([older]).get(older, [])

    @recovering
    def list(
        self,
        kind: str | None = None,
        *,
        agent: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        as_of: datetime | str | None = None,
        current_only: bool = False,
    ) -> builtins.list[Entry]:
        """Entries in a window (``since`` inclusive, ``until`` exclusive), newest first.

        *as_of* and *current_only* work as in :meth:`search`. An index row
        whose file disagrees with it is skipped and logged, so fewer than
        *limit* entries may come back until a reindex.
        """
        return self._reader.entries(kind=kind, agent=agent, since=since, until=until, limit=limit, as_of=as_of, current_only=current_only)

    @recovering
    def search(
        self,
        query: str,
        *,
        k: int = 8,
        kind: str | None = None,
        agent: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        mode: str = "auto",
        as_of: datetime | str | None = None,
        current_only: bool = False,
        floor: bool = True,
        rerank: bool = True,
    ) -> builtins.list[Hit]:
        """Rank entries for *query*: by words (BM25 over theme, voice, tags, focus, mood), and with NN on also by meaning.

        Any text is a valid query; with NN off, one with no searchable word
        returns no hits. An entry that a later entry of its agent supersedes
        (``signals.supersedes``) comes right after that entry, which is
        brought into the hits if the ranking missed it; its hit lists the
        entries correcting it in ``superseded_by``.

        Args:
            mode: ``auto`` (hybrid with NN on, else lexical), ``lexical``,
                ``semantic`` or ``hybrid``; the last two need NN on.
            as_of: answer from the journal as it stood at this time: only
                entries written at or before it, and only the supersessions
                those entries declare.
            current_only: leave superseded entries out.
            floor: leave out an entry found by meaning alone whose cosine is
                below the model's calibrated relevance floor
                (:data:`journal.encoding.semantic.RELEVANCE_FLOORS`; 0.30 for the
                default model), so that a question about nothing the journal
                holds can return no hits. An entry the words matched counts as
                found by meaning alone unless a word it matched says what the
                query is about: not a time word ("new", "today", "last week"),
                a function word or a word common to the entries searched.
                False keeps every candidate. Lexical ranking and models without
                a floor are unaffected.
            rerank: in lexical and hybrid modes, raise each entry's score by its
                neighbours' (the entries it continues or that continue it, and
                those of its agent written just before or after it; see
                :mod:`journal.ranking.neighbours`). False ranks by the words
                and their fusion with the vectors alone; it also turns off the
                learned reranker of the journal's *reranker* file.

        Raises:
            SemanticUnavailableError: a semantic or hybrid mode, or ``floor=False``, without NN.
        """
        return self._ranker.search(
            query,
            k=k,
            kind=kind,
            agent=agent,
            since=since,
            until=until,
            mode=mode,
            as_of=as_of,
            current_only=current_only,
            floor=floor,
            rerank=rerank,
        )

    @recovering
    def relate(self, entry_id: str, k: int = 8, agent: str | None = None) -> builtins.list[Hit]:
        """Entries most related to *entry_id*: explicit links first (corrections, then continuity), then similar entries.

        Similarity is lexical with NN off; with NN on it fuses the lexical
        ranking with the cosine ranking of the entry's own vector.

        Links in both directions count: the entries it supersedes
        (``reason="supersedes"``) and those superseding it
        (``"superseded_by"``), the entries it continues (``"continues"``) and
        those that continue it (``"continued_by"``); ``"similar"`` hits
        follow, best first.

        With *agent* given, an *entry_id* of another agent raises the very
        EntryNotFoundError of an id that does not exist, and only that agent's
        entries are linked or ranked.
        """
        return self._ranker.relate(entry_id, k=k, agent=agent)

    @recovering
    def digest(
        self,
        agent: str | None = None,
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        exclude_kinds: Collection[str] = (),
        as_of: datetime | str | None = None,
    ) -> Digest:
        """A computed summary of a window: themes, tags, focus, moods, novelty trend, continuity and corrections.

        ``corrections`` counts the entries of the window that supersede others
        and the entries they supersede. *as_of* works as in :meth:`search`.

        Entries of the kinds in *exclude_kinds* are left out entirely (a
        digest routine leaves out ``digest`` entries, so that no digest
        counts the digest before it).

        With *agent* given, the summary is computed from the entry files (the
        file decides whose entry it is), and continuity counts only links to
        that agent's own entries: a reference to another agent's entry counts
        exactly like one to an id that does not exist, which is not at all.
        """
        return self._reader.digest(agent=agent, since=since, until=until, exclude_kinds=exclude_kinds, as_of=as_of)

    @recovering
    def context(
        self,
        query: str,
        *,
        k: int = 6,
        agent: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        max_chars: int = DEFAULT_CONTEXT_CHARS,
        as_of: datetime | str | None = None,
        current_only: bool = False,
        floor: bool = True,
        include_untrusted: bool = False,
        rerank: bool = True,
    ) -> PromptContext:
        """Past entries for an agent's next prompt: the records shown, how many were left out, and the block as text.

        The best matches for *query* come first (hybrid with NN on, see
        :meth:`search`); when fewer than *k* match, the most recent entries of
        the window fill the rest. The block (``.text``) never exceeds
        *max_chars*; its records (``.records``, oldest first) are the same
        entries as values, cut where the block cuts them. A superseded entry
        follows its correction as in :meth:`search`, and its record says
        ``superseded_by``; *as_of*, *current_only*, *floor* and *rerank* work as
        there. The header's ``matched`` says how many records the query found;
        the rest are the recent fill. Entries whose text came from outside
        (``origin`` ``untrusted``) are left out unless *include_untrusted*.

        Raises:
            ValueError: *max_chars* is below the smallest block (600).
            SemanticUnavailableError: ``floor=False`` without NN.
        """
        return self._ranker.context(
            query,
            k=k,
            agent=agent,
            since=since,
            until=until,
            max_chars=max_chars,
            as_of=as_of,
            current_only=current_only,
            floor=floor,
            include_untrusted=include_untrusted,
            rerank=rerank,
        )

    @recovering
    def prompt_context(
        self,
        query: str,
        k: int = 6,
        agent: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        max_chars: int = DEFAULT_CONTEXT_CHARS,
        as_of: datetime | str | None = None,
        current_only: bool = False,
        floor: bool = True,
        include_untrusted: bool = False,
        rerank: bool = True,
    ) -> str:
        """A bounded, labelled block of past entries as escaped JSON data, for an agent's next prompt: :meth:`context`'s text.

        It frames entries as data; it is not a full defence against prompt injection. Entries whose text came
        from outside (``origin`` ``untrusted``) are left out unless *include_untrusted*.
        """
        return self._ranker.context(
            query,
            k=k,
            agent=agent,
            since=since,
            until=until,
            max_chars=max_chars,
            as_of=as_of,
            current_only=current_only,
            floor=floor,
            include_untrusted=include_untrusted,
            rerank=rerank,
        ).text
