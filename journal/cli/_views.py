"""What each ``ghostjournal`` command shows on a terminal, made from the document its JSON output prints.

One function per command; each takes that document (and the terminal's width)
and returns text built with :mod:`journal.frame.render`, so the two outputs can
never say different things.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from journal.frame.render import labelled, short_times, table
from journal.frame.timeinput import zone_name
from journal.terminal import printable

__all__ = [
    "Listing",
    "show_append",
    "show_backup",
    "show_context",
    "show_decision",
    "show_digest",
    "show_download",
    "show_entries",
    "show_entry",
    "show_export",
    "show_hits",
    "show_import",
    "show_init",
    "show_proposals",
    "show_reindex",
    "show_related",
    "show_verify",
]


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def show_init(document: Mapping[str, Any], width: int) -> str:
    """``init``: the journal's identity."""
    return labelled([("journal", document["root"]), ("journal_id", document["journal_id"]), ("created", document["created"])])


def show_append(document: Mapping[str, Any], width: int) -> str:
    """``append``: what happened, then the stored entry."""
    entry = document["entry"]
    said = "appended" if document["outcome"] == "appended" else "duplicate: this client_key's entry is already stored"
    return f"{said}\n{show_entry(entry, width)}"


def show_decision(document: Mapping[str, Any], width: int) -> str:
    """``accept-proposal``/``reject-proposal``: the decision, then the entry that records it."""
    older, newer = document["older"], document["newer"]
    said = (
        f"accepted: {newer} updates {older}; this correction supersedes it"
        if document["decision"] == "accepted"
        else f"rejected: {newer} does not update {older}; both stand, and the pair is not proposed again"
    )
    return f"{said}\n{show_entry(document['entry'], width)}"


def show_entry(entry: Mapping[str, Any], width: int) -> str:
    """``get``: every field on its own line, the voice below them with its own line breaks; a tombstone says when and why it was erased."""
    signals = entry.get("signals") or {}
    erased = (entry.get("meta") or {}).get("erased")
    if isinstance(erased, Mapping):
        head = labelled(
            [
                ("id", entry["id"]),
                ("ts", entry["ts"]),
                ("kind", entry["kind"]),
                ("agent", entry["agent"]),
                ("client_key", entry.get("client_key")),
            ]
        )
        return f"{head}\n\n  erased on {printable(str(erased.get('at')))} by {printable(str(erased.get('by')))} ({printable(str(erased.get('reason')))})"
    head = labelled(
        [
            ("id", entry["id"]),
            ("ts", entry["ts"]),
            ("kind", entry["kind"]),
            ("agent", entry["agent"]),
            ("theme", entry["theme"]),
            ("tags", list(entry.get("tags") or []) or None),
            ("mood", entry.get("mood")),
            ("focus", signals.get("focus")),
            ("novelty", signals.get("novelty")),
            ("continues", list(signals.get("continuity_refs") or []) or None),
            ("anchors", [f"{a.get('type')}:{a.get('ref')}" for a in entry.get("anchors") or []] or None),
            ("client_key", entry.get("client_key")),
            ("routine", (entry.get("meta") or {}).get("source_routine")),
        ]
    )
    voice = "\n".join("  " + printable(line) for line in str(entry["voice"]).splitlines())
    return f"{head}\n\n{voice}"


@dataclass(frozen=True)
class Listing:
    """What a table of entries shows beside its document: each id cut short, the zone and year its times are read in, and whether one agent's.

    ``short_ids`` maps each whole id to the start of it that names it alone (see :meth:`journal.Journal.short_ids`);
    with ``one_agent`` (``--agent`` given) the table leaves the agent column out, every row being that agent's.
    """

    short_ids: Mapping[str, str]
    zone: tzinfo
    now: datetime
    one_agent: bool

    def ids(self, ids: Sequence[str]) -> list[str]:
        return [self.short_ids.get(entry_id, entry_id) for entry_id in ids]

    def times(self, stamps: Sequence[str]) -> list[str]:
        return short_times(stamps, self.zone, self.now)

    def footer(self, count: str, *more: str) -> str:
        """The line under a table: how many rows, and how to read its cells."""
        return "; ".join([count, f"times in {zone_name(self.zone)}", *more])


def _relative(scores: Sequence[float]) -> list[str]:
    """Each score as a share of the best one's, the best 1.000: a score's size means something only beside the others'.

    BM25 has no scale at all (one entry matching every word of a query scores about 0 in a journal of one entry,
    each word being in every entry), and a fused score is made of such shares; ``--json`` keeps each score as computed.
    With no score above 0 there is nothing to compare with, and each shows ``-``.
    """
    best = max(scores, default=0.0)
    return [f"{score / best:.3f}" if best > 0 else "-" for score in scores]


_SCORES = "scores relative to the best (1.000)"


def _listing_table(listing: Listing, columns: Sequence[tuple[str, Sequence[object]]], width: int, footer: str) -> str:
    """The table of named *columns* (the agent's left out for one agent's), then *footer*.

    It is fitted to *width* by the theme (second to last) giving way first, then the text (last), which keeps the rest.
    """
    kept = [(name, cells) for name, cells in columns if not (listing.one_agent and name == "agent")]
    headers, rows = [name for name, _ in kept], list(zip(*(cells for _, cells in kept), strict=True))
    return table(headers, rows, width=width, flexible=(len(headers) - 1, len(headers) - 2)) + "\n" + footer


def show_entries(entries: Sequence[Mapping[str, Any]], width: int, listing: Listing) -> str:
    """``list``: one row per entry, newest first, the voice taking what the other columns leave of the terminal."""
    if not entries:
        return "no entries"
    return _listing_table(
        listing,
        [
            ("id", listing.ids([e["id"] for e in entries])),
            ("time", listing.times([e["ts"] for e in entries])),
            ("kind", [e["kind"] for e in entries]),
            ("agent", [e["agent"] for e in entries]),
            ("theme", [e["theme"] for e in entries]),
            ("voice", [_one_line(e["voice"]) for e in entries]),
        ],
        width,
        listing.footer(_count(len(entries), "entry", "entries")),
    )


def show_hits(hits: Sequence[Mapping[str, Any]], width: int, listing: Listing) -> str:
    """``search``: one row per hit, best first, the snippet taking what the other columns leave of the terminal (``[untrusted]`` first
    for text taken from outside)."""
    if not hits:
        return "no hits"
    return _listing_table(
        listing,
        [
            ("score", _relative([hit["score"] for hit in hits])),
            ("id", listing.ids([hit["entry_id"] for hit in hits])),
            ("time", listing.times([hit["entry"]["ts"] for hit in hits])),
            ("agent", [hit["entry"]["agent"] for hit in hits]),
            ("theme", [hit["entry"]["theme"] for hit in hits]),
            # Text taken from outside says so where it is read; the JSON gives every hit's origin.
            ("snippet", [("[untrusted] " if hit.get("origin") == "untrusted" else "") + _one_line(hit["snippet"]) for hit in hits]),
        ],
        width,
        listing.footer(_count(len(hits), "hit", "hits"), _SCORES),
    )


def show_proposals(proposals: Sequence[Mapping[str, Any]], width: int, listing: Listing) -> str:
    """``proposals``: one row per pending proposal, oldest proposer first: the older entry, the newer that may update it, what they share."""
    if not proposals:
        return "no pending proposals"
    return _listing_table(
        listing,
        [
            ("older", listing.ids([p["older"] for p in proposals])),
            ("of", listing.times([p["older_ts"] for p in proposals])),
            ("newer", listing.ids([p["newer"] for p in proposals])),
            ("at", listing.times([p["newer_ts"] for p in proposals])),
            ("agent", [p["agent"] for p in proposals]),
            ("score", [f"{p['score']:.2f}" for p in proposals]),
            ("subject", [p["subject"] for p in proposals]),
        ],
        width,
        listing.footer(_count(len(proposals), "proposal", "proposals"), "newer may update older; score: shared words"),
    )


def show_related(hits: Sequence[Mapping[str, Any]], width: int, listing: Listing) -> str:
    """``relate``: one row per related entry, with why it is related (continues, continued by, similar), the voice taking the rest."""
    if not hits:
        return "no related entries"
    return _listing_table(
        listing,
        [
            ("reason", [hit["reason"] for hit in hits]),
            ("score", _relative([hit["score"] for hit in hits])),
            ("id", listing.ids([hit["entry_id"] for hit in hits])),
            ("time", listing.times([hit["entry"]["ts"] for hit in hits])),
            ("agent", [hit["entry"]["agent"] for hit in hits]),
            ("theme", [hit["entry"]["theme"] for hit in hits]),
            ("voice", [_one_line(hit["entry"]["voice"]) for hit in hits]),
        ],
        width,
        listing.footer(_count(len(hits), "entry", "entries"), _SCORES),
    )


def _counted(items: Sequence[Mapping[str, Any]], key: str, top: int = 8) -> str | None:
    return ", ".join(f"{item[key]} ({item['count']})" for item in items[:top]) or None


def show_digest(digest: Mapping[str, Any], width: int) -> str:
    """``digest``: the window, then one line per view; a view with nothing in it is left out, never shown as None."""
    novelty, continuity = digest["novelty"], digest["continuity"]
    mean = novelty.get("mean")
    chains = continuity.get("longest_chains") or []
    window = f"{digest.get('since') or 'the beginning'} to {digest.get('until') or 'now'}"
    return labelled(
        [
            ("agent", digest.get("agent") or "every agent"),
            ("window", window),
            ("entries", digest["count"]),
            ("first", digest.get("first_ts")),
            ("last", digest.get("last_ts")),
            ("kinds", ", ".join(f"{kind} ({count})" for kind, count in digest["kinds"].items()) or None),
            ("themes", _counted(digest["themes"], "theme")),
            ("tags", _counted(digest["tags"], "tag")),
            ("focus", _counted(digest["focus"], "focus")),
            ("moods", _counted(digest["moods"], "mood")),
            ("novelty", None if mean is None else f"mean {mean}" + (f", {novelty['trend']}" if novelty.get("trend") else "")),
            (
                "continuity",
                f"{continuity.get('links', 0)} links; longest chain {max((len(c) for c in chains), default=0)} entries"
                if continuity.get("links")
                else None,
            ),
        ]
    )


def show_context(document: Mapping[str, Any], width: int) -> str:
    """``prompt-context``: the block itself, as the agent would get it (its records are escaped JSON already)."""
    return "\n".join(printable(line) for line in str(document["context"]).splitlines())


def show_reindex(document: Mapping[str, Any], width: int) -> str:
    """``reindex``: the count, then each skipped file and why."""
    lines = [f"indexed {_count(document['indexed'], 'entry', 'entries')}"]
    skipped = document["skipped"]
    if skipped:
        lines.append(f"skipped {len(skipped)} files:")
        lines += [f"  {printable(item['path'])}: {printable(item['reason'])}" for item in skipped]
    return "\n".join(lines)


def show_download(document: Mapping[str, Any], width: int) -> str:
    """``download-model``: where the model is, and where it came from."""
    return labelled([("model", document["model"]), ("path", document["path"]), ("source", document.get("source", ""))])


def _encoder(identity: Mapping[str, Any]) -> str:
    """An encoder's identity in a line: its model, vector length, short weights hash and what computed the vectors; only its key
    where the index knows no more of it."""
    if "model" not in identity:
        return printable(str(identity["key"]))
    made_by = [identity["implementation"]] if identity.get("implementation") else list(identity.get("implementations") or [])
    parts = [f"{identity['dimension']} dimensions", str(identity.get("weights") or "unknown weights")[:19], *map(str, made_by)]
    return printable(f"{identity['model']} ({', '.join(parts)})")


def show_embed(document: Mapping[str, Any], width: int) -> str:
    """``embed``: how many entries were embedded, how many still lack a vector, the encoder used, and every encoder the index holds
    vectors of (when another's are there too)."""
    rows = [
        ("embedded", _count(document["embedded"], "entry", "entries")),
        ("entries", str(document["entries"])),
        ("missing", str(document["missing"])),
        ("encoder", _encoder(document["encoder"])),
    ]
    others = [held for held in document["encoders"] if held.get("key") != document["encoder"]["key"]]
    rows += [("also held", f"{_count(held['vectors'], 'vector', 'vectors')} of {_encoder(held)}") for held in others]
    return labelled(rows)


def show_verify(document: Mapping[str, Any], width: int) -> str:
    """``verify``: what a repair did, each problem with its file and fix, then the sums."""
    lines = [f"{printable(line)}" for line in document.get("repairs", [])]
    for problem in document["problems"]:
        lines.append(f"{printable(problem['path'])}: {problem['kind']}: {printable(problem['detail'])}")
        lines.append(f"  fix: {printable(problem['fix'])}")
    checked = f"checked {_count(document['files'], 'entry file', 'entry files')} ({_count(document['entries'], 'entry', 'entries')}) and the index"
    if document["deep_checked"]:
        checked += f", re-embedded {document['deep_checked']}"
    counts = document["counts"]
    lines.append(f"{checked}: " + (", ".join(f"{n} {kind}" for kind, n in counts.items()) if counts else "no problems"))
    return "\n".join(lines)


def show_export(document: Mapping[str, Any], width: int) -> str:
    """``export``: what the stream holds, by agent, and the links it leaves outside."""
    lines = [f"exported {_count(document['entries'], 'entry', 'entries')} as of {document['exported_at']}  {document['sha256']}"]
    lines += [f"  {printable(agent)}: {count}" for agent, count in document["agents"].items()]
    if document["links_outside"]:
        lines.append(f"{_count(len(document['links_outside']), 'link', 'links')} to entries outside the export")
    if document["links_removed"]:
        lines.append(f"links to another agent's entries taken out of {_count(len(document['links_removed']), 'entry', 'entries')}")
    return "\n".join(lines)


def show_import(document: Mapping[str, Any], width: int) -> str:
    """``import``: the three counts, then each conflict and each line (or entry file of a directory) left out."""
    if "from" in document:
        read = f"{_count(document['files'], 'entry file', 'entry files')} of a {document['from']} journal"
        conflicts = [f"  {printable(c['file'])}: {printable(c['id'])}: {printable(c['reason'])}" for c in document["conflicts"]]
        left_out = [f"  {printable(b['file'])} left out: {printable(b['reason'])}" for b in document["bad_files"]]
    else:
        read = _count(document["lines"], "entry line", "entry lines")
        conflicts = [f"  line {c['line']}: {printable(c['id'])}: {printable(c['reason'])}" for c in document["conflicts"]]
        left_out = [f"  line {b['line']} left out: {printable(b['reason'])}" for b in document["bad_lines"]]
    head = f"appended {document['appended']}, duplicate {document['duplicate']}, conflict {document['conflict']} (of {read})"
    if document.get("erased"):
        head += f"; {_count(document['erased'], 'entry', 'entries')} decided by a tombstone (erased)"
    if document.get("agent") is not None:
        head += f"; {printable(document['agent'])}'s alone: {_count(document['other_agents'], 'entry', 'entries')} of other agents left out"
    return "\n".join([head, *conflicts, *left_out])


def show_backup(document: Mapping[str, Any], width: int) -> str:
    """``backup``: where the copy is, what it holds, then the check of it."""
    lines = [f"copied {_count(document['files'], 'entry file', 'entry files')} ({document['bytes']} bytes) to {printable(document['out'])}"]
    lines += [f"  not copied: {printable(s['path'])}: {printable(s['reason'])}" for s in document["skipped"]]
    return "\n".join([*lines, show_verify(document["verify"], width)])


def show_erase(result: Mapping[str, Any], width: int) -> str:
    """``erase``: how many entries were erased, and which were tombstones already."""
    lines = [f"erased {len(result['erased'])} {'entry' if len(result['erased']) == 1 else 'entries'} (by {printable(result['by'])})"]
    lines += [f"  {entry_id}" for entry_id in result["erased"]]
    if result["already_erased"]:
        lines.append(f"already erased: {len(result['already_erased'])}")
        lines += [f"  {entry_id}" for entry_id in result["already_erased"]]
    return "\n".join(lines)
