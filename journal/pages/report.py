"""``ghostjournal report``: one agent's entries as one self-contained HTML page.

The page holds a summary (the digest of the very entries and links the
page shows, so that every count in it is one a chart or the timeline shows
too), charts computed here as inline SVG (the entries with the links between
them, for windows of a quarter at most, and the links counted per week or
month beyond; entries per day by kind,
novelty per day, moods per day, the top themes and tags per week, and the
focus of each of the agent's digest entries), and a timeline of the entries by day:
kind, theme, mood and the first line of the voice, each opening to the whole
entry, with its continuity links and corrections as links to the entries
they point at. A search box filters the timeline in the page itself.

Only the agent's own entries are read (the entry files decide whose an entry
is), and a link is drawn only to an entry on the page: a reference to any
other entry (another agent's, or one outside the window) is counted, never
shown, not even as an id. The page is built by :mod:`journal.frame.htmlpage`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, BinaryIO, Final

from journal.api import Journal
from journal.files.entry import KINDS, Entry
from journal.frame.htmlpage import first_line, page, page_title, text
from journal.frame.outfile import OutputKind
from journal.indexing.digest import Digest, compute_digest, row_of_entry
from journal.pages._charts import heat_grid, line_chart, link_chart, stacked_bars

__all__ = ["JOURNAL_REPORT", "JournalReport", "build_journal_report"]

#: The title every journal report's page ends with (after the agent's name).
_TITLE_END: Final = ": journal report"


def _is_journal_report(stream: BinaryIO) -> bool:
    title = page_title(stream)
    return title is not None and title.endswith(_TITLE_END)


#: What ``ghostjournal report --out`` writes: a file there is replaced without --force only when it is such a page.
JOURNAL_REPORT: Final = OutputKind("the report", "a page that 'ghostjournal report' wrote", _is_journal_report)

#: How many themes, tags, moods and focus items the charts show (the most frequent).
TOP: Final = 8
#: Links between entries are drawn as lines for windows up to this many days (a quarter); a year of dots and lines would
#: not be read, so longer windows count them per week instead, and per month past :data:`LINKS_BY_WEEK` days.
LINKS_DRAWN: Final = 92
#: Links are counted per week up to this many days (two years: about a hundred columns), per month beyond.
LINKS_BY_WEEK: Final = 731
#: Moods are charted per day up to this many days (a quarter), per week beyond: a year of days would be a grid of thousands of cells.
MOODS_BY_DAY: Final = 92
#: The charts are drawn for windows up to this many days (ten years): one entry far off (a time of year 1 or 9999, which
#: the journal accepts) would otherwise lay out every empty day between, millions of them, for a page of hundreds of megabytes.
CHARTED_DAYS: Final = 3660
_PROGRESS_EVERY: Final = 200


@dataclass(frozen=True, slots=True)
class JournalReport:
    """The page, and what it shows."""

    html: bytes
    entries: int
    days: int
    hidden_links: int  # references to entries that are not on the page (another agent's, or outside the window)


def _local(moment: datetime, zone: tzinfo) -> datetime:
    """*moment* in *zone*; a time at the edge of the calendar that has no date there (9999-12-31 23:00Z east of UTC) as written."""
    try:
        return moment.astimezone(zone)
    except OverflowError:
        return moment


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=offset)).isoformat() for offset in range((last - first).days + 1)]


def _week(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def _weeks(days: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(_week(date.fromisoformat(day)) for day in days))


def _novelty(entry: Entry) -> float | None:
    value = (entry.signals or {}).get("novelty")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _top(counter: Counter[str]) -> list[str]:
    return [name for name, _ in sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:TOP]]


def _digest_focus(entry: Entry) -> dict[str, int]:
    """The focus counts a digest entry recorded (``meta.digest.focus``), whatever shape of it is usable."""
    recorded = entry.meta.get("digest")
    items = recorded.get("focus") if isinstance(recorded, dict) else None
    found: dict[str, int] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("focus"), str) and type(item.get("count")) is int and item["count"] > 0:
            found[item["focus"]] = found.get(item["focus"], 0) + item["count"]
    return found


class _Timeline:
    """The entries of the page, oldest first, with their local times, keys and the links among them."""

    def __init__(self, entries: Iterable[Entry], zone: tzinfo) -> None:
        self.entries = sorted(entries, key=lambda entry: (entry.timestamp, entry.id))
        self.zone = zone
        self.local = {entry.id: _local(entry.timestamp, zone) for entry in self.entries}
        self.by_id = {entry.id: entry for entry in self.entries}
        on_page = set(self.local)
        self.hidden_links = 0
        self.continues: dict[str, list[str]] = {}
        self.corrects: dict[str, list[str]] = {}
        self.continued_by: dict[str, list[str]] = {}
        self.corrected_by: dict[str, list[str]] = {}
        for entry in self.entries:
            for refs, forward, backward in (
                (entry.continuity_refs, self.continues, self.continued_by),
                (entry.supersedes, self.corrects, self.corrected_by),
            ):
                for ref in dict.fromkeys(refs):
                    if ref not in on_page or ref == entry.id:
                        self.hidden_links += 1
                        continue
                    forward.setdefault(entry.id, []).append(ref)
                    backward.setdefault(ref, []).append(entry.id)

    def label(self, entry_id: str) -> str:
        """How a link to an entry reads: its local time and theme."""
        return f"{self.local[entry_id]:%Y-%m-%d %H:%M} {self.by_id[entry_id].theme}"

    def day(self, entry: Entry) -> str:
        return self.local[entry.id].date().isoformat()


def _key(entry_id: str) -> str:
    return f"e-{entry_id}"


def _record(entry: Entry, timeline: _Timeline) -> dict[str, Any]:
    """What the side panel shows of an entry: all of it, links only to entries on the page."""
    signals = entry.signals or {}
    fields: list[list[Any]] = [
        ["time", timeline.local[entry.id].isoformat()],
        ["kind", entry.kind],
        ["theme", entry.theme],
        ["mood", entry.mood or "-"],
        ["tags", ", ".join(entry.tags) or "-"],
    ]
    if isinstance(signals.get("focus"), str):
        fields.append(["focus", signals["focus"]])
    novelty = _novelty(entry)
    if novelty is not None:
        fields.append(["novelty", f"{novelty:.3f}"])
    fields.append(["voice", entry.voice, "long"])
    for name, links in (
        ("continues", timeline.continues),
        ("corrects", timeline.corrects),
        ("continued by", timeline.continued_by),
        ("corrected by", timeline.corrected_by),
    ):
        if entry.id in links:
            fields.append([name, [[_key(ref), timeline.label(ref)] for ref in links[entry.id]], "links"])
    if entry.anchors:
        fields.append(["anchors", json.dumps(list(entry.anchors), ensure_ascii=False, indent=1), "long"])
    scalars = {name: value for name, value in entry.meta.items() if isinstance(value, str | int | float | bool)}
    if scalars:
        fields.append(["meta", "\n".join(f"{name}: {value}" for name, value in sorted(scalars.items())), "long"])
    fields.append(["id", entry.id])
    return {"title": f"{timeline.local[entry.id]:%Y-%m-%d %H:%M} {entry.kind}: {entry.theme}", "fields": fields}


def _entry_item(entry: Entry, timeline: _Timeline) -> str:
    key = _key(entry.id)
    classes = "entry superseded" if entry.id in timeline.corrected_by else "entry"
    links = []
    for name, found in (("continues", timeline.continues), ("corrects", timeline.corrects), ("corrected by", timeline.corrected_by)):
        if entry.id in found:
            links.append(f"{name} " + " ".join(f'<a href="#{_key(ref)}">{text(timeline.label(ref))}</a>' for ref in found[entry.id]))
    mood = f' <span class="mood">{text(entry.mood)}</span>' if entry.mood else ""
    tags = f' <span class="tag">{text(" ".join("#" + tag for tag in entry.tags))}</span>' if entry.tags else ""
    return (
        f'<li class="{classes}" id="{key}" data-key="{key}"><a class="open" href="#{key}">{timeline.local[entry.id]:%H:%M} '
        f'<span class="kind">{text(entry.kind)}</span> \u00b7 <span class="theme">{text(entry.theme)}</span></a>{mood}{tags} '
        f'<span class="voice">{text(first_line(entry.voice))}</span>'
        + (f' <span class="links">{"; ".join(links)}</span>' if links else "")
        + "</li>"
    )


def _legend(names: Sequence[str]) -> str:
    return (
        '<div class="legend">'
        + "".join(f'<span><span class="swatch k{i % 6}"></span>{text(name)}</span>' for i, name in enumerate(names))
        + "</div>"
    )


def _charts(timeline: _Timeline, days: list[str]) -> str:
    entries = timeline.entries
    kinds = [kind for kind in KINDS if any(entry.kind == kind for entry in entries)]
    per_day: dict[str, Counter[str]] = {}
    novelty: dict[str, list[float]] = {}
    moods: Counter[str] = Counter()
    themes: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    mood_cells: Counter[tuple[str, str]] = Counter()
    by_day = len(days) <= MOODS_BY_DAY
    theme_weeks: Counter[tuple[str, str]] = Counter()
    tag_weeks: Counter[tuple[str, str]] = Counter()
    digests: list[tuple[str, dict[str, int]]] = []  # every digest entry, with the focus it recorded (maybe none)
    for entry in entries:
        day = timeline.day(entry)
        week = _week(date.fromisoformat(day))
        per_day.setdefault(day, Counter())[entry.kind] += 1
        if (value := _novelty(entry)) is not None:
            novelty.setdefault(day, []).append(value)
        if entry.kind == "digest":  # a digest's theme and tags sum up the others; its own chart shows its focus
            digests.append((day, _digest_focus(entry)))
            continue
        if entry.mood:
            moods[entry.mood] += 1
            mood_cells[entry.mood, day if by_day else week] += 1
        themes[entry.theme] += 1
        theme_weeks[entry.theme, week] += 1
        for tag in entry.tags:
            tags[tag] += 1
            tag_weeks[tag, week] += 1
    weeks = _weeks(days)
    focus_total: Counter[str] = Counter()
    focus_cells: Counter[tuple[str, str]] = Counter()
    columns: list[str] = []
    for day, focus in digests:
        column = day if day not in columns else f"{day} #{columns.count(day) + 1}"
        columns.append(column)
        for name, count in focus.items():
            focus_total[name] += count
            focus_cells[name, column] += count
    sections = [
        ("Entries per day, by kind", _legend(kinds) + stacked_bars(days, per_day, kinds, "entries per day by kind"), "chart-kinds"),
        (
            "Novelty, mean per day",
            line_chart(days, {day: sum(values) / len(values) for day, values in novelty.items()}, "novelty per day"),
            "chart-novelty",
        ),
        (f"Moods per {'day' if by_day else 'week'}", heat_grid(days if by_day else weeks, _top(moods), mood_cells, "moods"), "chart-moods"),
        ("Top themes per week", heat_grid(weeks, _top(themes), theme_weeks, "themes per week"), "chart-themes"),
        ("Top tags per week", heat_grid(weeks, _top(tags), tag_weeks, "tags per week"), "chart-tags"),
        ("The digests' focus", _focus(columns, digests, focus_total, focus_cells), "chart-focus"),
    ]
    sections.insert(0, _links(timeline, days, kinds))
    return (
        '<div class="charts">'
        + "".join(f'<section id="{anchor}"><h2>{title}</h2>{chart}</section>' for title, chart, anchor in sections)
        + "</div>"
    )


def _focus(columns: list[str], digests: list[tuple[str, dict[str, int]]], total: Counter[str], cells: Counter[tuple[str, str]]) -> str:
    """One column per digest entry, each with the focus it recorded; a digest that recorded none is an empty column, and said so."""
    if not columns:
        return '<p class="summary">No digest entry in this window.</p>'
    blank = sum(1 for _, focus in digests if not focus)
    note = (
        f'<p class="summary" id="focus-none">{blank} of the {len(digests)} digest{"" if len(digests) == 1 else "s"} recorded no focus '
        "(meta.digest.focus): their columns are empty.</p>"
        if blank
        else ""
    )
    return heat_grid(columns, _top(total), cells, "focus of each digest", unit="mentions") + note


def _link_pairs(timeline: _Timeline) -> list[tuple[str, str, str]]:
    """Every link on the page: (from entry, to entry, ``continues`` or ``corrects``)."""
    return [
        (source, target, kind)
        for kind, found in (("continues", timeline.continues), ("corrects", timeline.corrects))
        for source, targets in found.items()
        for target in targets
    ]


def _links(timeline: _Timeline, days: list[str], kinds: list[str]) -> tuple[str, str, str]:
    """The first panel: the entries on their days and hours with their links drawn, or for a longer window the links per week or month."""
    pairs = _link_pairs(timeline)
    if len(days) > LINKS_DRAWN:
        period, columns, of_day = (
            ("week", _weeks(days), lambda day: _week(date.fromisoformat(day)))
            if len(days) <= LINKS_BY_WEEK
            else ("month", list(dict.fromkeys(day[:7] for day in days)), lambda day: day[:7])
        )
        counts: dict[str, Counter[str]] = {}
        for source, _, kind in pairs:  # a link counts where the entry making it is
            counts.setdefault(of_day(timeline.day(timeline.by_id[source])), Counter())[kind] += 1
        series = ["continues", "corrects"]
        chart = _legend_of(("continuity links", "k0"), ("corrections", "kred")) + stacked_bars(
            columns, counts, series, f"links per {period}", unit="links", classes=("k0", "kred")
        )
        return f"Continuity links (blue) and corrections (red) per {period}", chart, "chart-links"
    start = date.fromisoformat(days[0])
    points = []
    for entry in timeline.entries:
        local = timeline.local[entry.id]
        hour = local.hour + local.minute / 60
        x = ((local.date() - start).days + hour / 24) / len(days)
        points.append((_key(entry.id), x, hour, kinds.index(entry.kind), timeline.label(entry.id)))
    links = [(_key(source), _key(target), kind) for source, target, kind in pairs]
    return (
        "Continuity links (blue) and corrections (red)",
        _legend(kinds) + link_chart(points, links, "links between entries"),
        "chart-links",
    )


def _legend_of(*items: tuple[str, str]) -> str:
    return (
        '<div class="legend">'
        + "".join(f'<span><span class="swatch {colour}"></span>{text(name)}</span>' for name, colour in items)
        + "</div>"
    )


def _page_digest(agent: str, timeline: _Timeline, since: datetime | None, until: datetime | None) -> Digest:
    """The digest of exactly what the page shows: its entries, and the links among them that its charts draw or count."""
    pairs = _link_pairs(timeline)
    return compute_digest(
        [row_of_entry(entry, "") for entry in timeline.entries],
        [(source, target) for source, target, kind in pairs if kind == "continues"],
        agent=agent,
        since=since.isoformat() if since else None,
        until=until.isoformat() if until else None,
        corrections=[(source, target) for source, target, kind in pairs if kind == "corrects"],
    )


def _summary(agent: str, digest: Digest, timeline: _Timeline, window: str) -> str:
    """The header: every count in it is one the page shows (the timeline, the bars by kind, the links, the digests' columns)."""
    novelty = digest.novelty
    continuity = digest.continuity
    parts = [f"{digest.count} entries, {window}", ", ".join(f"{kind} {count}" for kind, count in digest.kinds.items())]
    if novelty.get("mean") is not None:
        parts.append(f"novelty mean {novelty['mean']:.2f}" + (f", {novelty['trend']}" if novelty.get("trend") else ""))
    if continuity.get("links"):
        longest = max((len(chain) for chain in continuity.get("longest_chains") or []), default=0)
        parts.append(f"{continuity['links']} continuity link{'' if continuity['links'] == 1 else 's'}, longest chain {longest}")
    corrections = sum(len(targets) for targets in timeline.corrects.values())
    if corrections:
        parts.append(f"{corrections} correction{'' if corrections == 1 else 's'}")
    if timeline.hidden_links:
        parts.append(f"{timeline.hidden_links} link{'' if timeline.hidden_links == 1 else 's'} to entries not in this report")
    return f'<h1>{text(agent)}</h1>\n<p class="summary">' + " \u00b7 ".join(text(part) for part in parts if part) + "</p>"


def build_journal_report(
    journal: Journal,
    agent: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    zone: tzinfo = UTC,
    on_progress: Callable[[int, int], None] | None = None,
) -> JournalReport:
    """The report page of *agent*'s entries in ``[since, until)``, days and times in *zone*.

    *on_progress* gets ``(done, total)`` as the entries are laid out.

    Raises:
        EntryValidationError: *agent* is not a valid agent name.
    """
    timeline = _Timeline(journal.list(agent=agent, since=since, until=until), zone)
    digest = _page_digest(agent, timeline, since, until)
    entries = timeline.entries
    first, last = (timeline.local[entries[0].id].date(), timeline.local[entries[-1].id].date()) if entries else (date.min, date.min)
    span = (last - first).days + 1 if entries else 0
    days = _days(first, last) if entries and span <= CHARTED_DAYS else []
    window = f"{since.isoformat() if since else 'the beginning'} to {until.isoformat() if until else 'now'}, days in {zone}"
    records: dict[str, Any] = {}
    sections: list[str] = []
    current: str | None = None
    items: list[str] = []

    def close_day() -> None:
        if current is not None:
            sections.append(
                f'<li class="day" data-group id="d-{current}"><h3>{current} ({len(items)})</h3><ul class="entries">'
                + "".join(items)
                + "</ul></li>"
            )

    for done, entry in enumerate(entries, start=1):
        day = timeline.day(entry)
        if day != current:
            close_day()
            current, items = day, []
        items.append(_entry_item(entry, timeline))
        records[_key(entry.id)] = _record(entry, timeline)
        if on_progress is not None and (done % _PROGRESS_EVERY == 0 or done == len(entries)):
            on_progress(done, len(entries))
    close_day()
    body = "\n".join(
        [
            _summary(agent, digest, timeline, window),
            (
                _charts(timeline, days)
                if days
                else f'<p class="summary">The entries span {span} days, from {first} to {last}: charts are drawn for windows of {CHARTED_DAYS} days '
                "at most; narrow --since and --until to see them.</p>"
                if entries
                else '<p class="summary">No entries of this agent in this window.</p>'
            ),
            (
                '<h2>Timeline</h2>\n<p><input id="search" type="search" placeholder="Filter entries: words of the voice, theme, tags, mood, kind" '
                f'aria-label="Filter entries" autocomplete="off"> <span id="shown">{len(entries)}</span> of {len(entries)} entries</p>'
            ),
            '<ol class="timeline">' + "\n".join(sections) + "</ol>",
        ]
    )
    return JournalReport(page(f"{agent}{_TITLE_END}", body, records), len(entries), span, timeline.hidden_links)
