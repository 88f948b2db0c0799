"""``ghostrunner report``: the runs in the runner's logs as one self-contained HTML page.

Built from the very lines ``status`` and ``history`` read (a file or stdin:
plain lines, ``journalctl -o cat`` or ``-o json``), so it works alike for
timers, ``serve`` and a fleet. One read of the log gives both
:func:`runner.monitor.history.build_history` (every slot's runs) and, from its
digest, :func:`runner.monitor.status.build_report` (the overall state and the exit
code, which are ``status``'s). The page shows a grid: one row per agent and
routine, one column per day, one cell per slot, coloured by what happened to
the slot:

=========  ==============================================================
appended   a run appended its entry within the grace of its fire time
late       a run appended it, later than the grace (``status``'s rule: :func:`runner.monitor.status.is_late`)
duplicate  its runs found the entry already there
failed     its latest run that was not busy failed
busy       every run of it found another run holding the slot
paused     it was skipped because its pair was paused
skipped    it was skipped for another reason
missed     ``serve`` recorded it missed (downtime, catchup_max, a late fire) and no run covered it
absent     it was due within the log's reach, and the log holds no line about it
=========  ==============================================================

A simulated run is judged on the simulation's clock, as ``status`` judges it:
a simulated month whose every slot got its entry is all ``appended``.

Each cell opens to the slot's runs: attempts, error, duration, tokens and cost
of each; each pair's row shows what its runs used today and in the last 7 days.
Text from the log is escaped by :mod:`runner.monitor.log_digest` and again by
:mod:`journal.frame.htmlpage`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, BinaryIO, Final

from journal.frame import OutputKind, page, page_title, text
from runner.cron.slots import cron_trigger, fire_times, slot_for
from runner.monitor.history import SlotHistory, build_history
from runner.monitor.log_digest import MissedRecord, PairRuns
from runner.monitor.status import StatusReport, build_report, is_late, latest_due
from runner.run.contract import REASON_PAUSED, Outcome
from runner.settings.config import RunnerConfig

__all__ = ["ABSENT_DAYS", "RUNS_REPORT", "STATES", "RunReport", "build_run_report"]

#: The runs page's title: what tells an earlier one at ``--out``.
_TITLE: Final = "ghostrunner: runs"


def _is_runs_report(stream: BinaryIO) -> bool:
    return page_title(stream) == _TITLE


#: What ``ghostrunner report --out`` writes: a file there is replaced without --force only when it is such a page.
RUNS_REPORT: Final = OutputKind("the report", "a page that 'ghostrunner report' wrote", _is_runs_report)

#: Absent slots are laid out for at most this many days (ten years) before the judgement: one line of a log far older
#: (a stray timestamp of 1971) would otherwise make every slot since then a cell, hundreds of thousands of them.
ABSENT_DAYS: Final = 3660

#: The states of a slot, in the legend's order.
STATES: Final = ("appended", "late", "duplicate", "failed", "busy", "paused", "skipped", "missed", "absent")


@dataclass(frozen=True, slots=True)
class _Cell:
    agent: str
    routine: str
    slot: str
    state: str
    moment: datetime  # when it was due (its scheduled time), else when it was logged
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunReport:
    """The page, the judgement of ``status`` it shows, and how many slots of each state it holds."""

    html: bytes
    status: StatusReport
    states: dict[str, int]


def _duration(milliseconds: float | None) -> str:
    if milliseconds is None:
        return "-"
    return f"{milliseconds:.0f} ms" if milliseconds < 1000 else f"{milliseconds / 1000:.1f} s"


def _state_of(slot: SlotHistory, grace: timedelta) -> str:
    deciding = slot.deciding
    if deciding.outcome is Outcome.APPENDED:
        scheduled = next((run.scheduled for run in slot.runs if run.scheduled is not None), None)
        return "late" if is_late(deciding, grace, scheduled=scheduled) else "appended"
    if deciding.outcome is Outcome.SKIPPED:
        return "paused" if deciding.reason == REASON_PAUSED else "skipped"
    return deciding.outcome.value


def _run_cell(slot: SlotHistory, grace: timedelta, zone: Any) -> _Cell:
    state = _state_of(slot, grace)
    data = slot.to_dict()
    scheduled = next((run.scheduled for run in slot.runs if run.scheduled is not None), None)
    fields: list[list[Any]] = [
        ["state", state],
        ["scheduled", scheduled.astimezone(zone).isoformat() if scheduled else "-"],
        ["runs", str(data["attempts"])],
        ["backend attempts", "-" if data["backend_attempts"] is None else str(data["backend_attempts"])],
        ["duration", _duration(data["duration_ms"])],
        ["spent", slot.spend.shown()],
        ["error", data["error"] or "-", "long"],
        ["entry", data["entry_id"] or "-"],
    ]
    for number, run in enumerate(slot.runs, start=1):
        lines = [
            f"finished {run.finished.astimezone(zone).isoformat()}",
            f"outcome {run.outcome.value}",
            f"duration {_duration(run.duration_ms)}",
        ]
        lines += [
            f"{name} {value}"
            for name, value in (
                ("reason", run.reason),
                ("backend attempts", run.attempts),
                ("tokens", None if run.tokens_in is None else f"{run.tokens_in} in, {run.tokens_out} out"),
                ("cost", run.cost),
                ("run id", run.run_id),
                ("error", run.error),
            )
            if value is not None
        ]
        fields.append([f"run {number} (newest first)", "\n".join(lines), "long"])
    return _Cell(
        slot.agent,
        slot.routine,
        slot.slot or "?",
        state,
        scheduled or slot.runs[-1].finished,
        {"title": f"{slot.agent} {slot.routine} {slot.slot or '?'}: {state}", "fields": fields},
    )


def _missed_cell(agent: str, routine: str, missed: MissedRecord, zone: Any) -> _Cell:
    fields = [
        ["state", "missed"],
        ["scheduled", missed.scheduled.astimezone(zone).isoformat() if missed.scheduled else "-"],
        ["recorded", missed.logged.astimezone(zone).isoformat()],
        ["reason", missed.reason or "-"],
        ["runs", "0: serve recorded the slot missed, and no run covered it"],
    ]
    return _Cell(
        agent,
        routine,
        missed.slot,
        "missed",
        missed.scheduled or missed.logged,
        {"title": f"{agent} {routine} {missed.slot}: missed", "fields": fields},
    )


def _absent_cell(agent: str, routine: str, slot: str, due: datetime, zone: Any) -> _Cell:
    fields = [
        ["state", "absent"],
        ["scheduled", due.astimezone(zone).isoformat()],
        ["runs", "0: the log holds no run of this slot, and no record of it being missed"],
    ]
    return _Cell(agent, routine, slot, "absent", due, {"title": f"{agent} {routine} {slot}: absent", "fields": fields})


def _cells(
    config: RunnerConfig,
    status: StatusReport,
    slots: Iterable[SlotHistory],
    since: datetime | None,
    seen: Mapping[tuple[str, str], PairRuns],
) -> list[_Cell]:
    zone = config.timezone
    cells = {(slot.agent, slot.routine, slot.slot or "?"): _run_cell(slot, status.grace, zone) for slot in slots}
    for (agent, routine), runs in seen.items():
        for missed in runs.missed.values():
            if (agent, routine, missed.slot) not in cells and (since is None or missed.logged >= since):
                cells[agent, routine, missed.slot] = _missed_cell(agent, routine, missed, zone)
    first = status.input["first"]
    if first is not None:
        start = max(datetime.fromisoformat(first), since) if since is not None else datetime.fromisoformat(first)
        end = latest_due(status.now, status.grace)
        start = max(start, end - timedelta(days=ABSENT_DAYS))
        for agent in sorted(config.agents):
            for name in config.agents[agent].routines:
                spec = config.routines[name]
                for due in fire_times(cron_trigger(spec.schedule, zone), start, end, granularity=spec.slot) if start < end else ():
                    slot = slot_for(due, spec.slot, zone)
                    if (agent, name, slot) not in cells:
                        cells[agent, name, slot] = _absent_cell(agent, name, slot, due, zone)
    return sorted(cells.values(), key=lambda cell: (cell.moment, cell.slot))


def _grid(config: RunnerConfig, cells: list[_Cell], keys: dict[int, str]) -> str:
    zone = config.timezone
    days = sorted({cell.moment.astimezone(zone).date() for cell in cells})
    if not days:
        return '<p class="summary">No slot in this window.</p>'
    span = [days[0] + timedelta(days=offset) for offset in range((days[-1] - days[0]).days + 1)]
    configured = [(agent, name) for agent in sorted(config.agents) for name in config.agents[agent].routines]
    pairs = configured + sorted({(cell.agent, cell.routine) for cell in cells} - set(configured))
    by_place: dict[tuple[str, str, str], list[str]] = {}
    for index, cell in enumerate(cells):
        link = f'<a class="cell {cell.state}" href="#{keys[index]}" data-key="{keys[index]}" title="{text(cell.slot)}: {cell.state}"></a>'
        by_place.setdefault((cell.agent, cell.routine, cell.moment.astimezone(zone).date().isoformat()), []).append(link)
    head = "<tr><th>agent</th><th>routine</th>" + "".join(f'<th data-col="{day.isoformat()}">{day:%m-%d}</th>' for day in span) + "</tr>"
    rows = []
    for agent, routine in pairs:
        tds = "".join(f"<td>{''.join(by_place.get((agent, routine, day.isoformat()), []))}</td>" for day in span)
        rows.append(f'<tr data-group data-pair="{text(agent)}:{text(routine)}"><th>{text(agent)}</th><th>{text(routine)}</th>{tds}</tr>')
    return f'<div class="scroll"><table class="grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'


def _header(status: StatusReport, states: Counter[str], zone: Any) -> str:
    counts = status.input
    pairs = "".join(
        f"<tr><th>{text(pair.agent)}</th><th>{text(pair.routine)}</th><td>{text(pair.state)}</td><td>{text(pair.due_slot or '-')}</td>"
        f"<td>{text(pair.spend['today'].shown() if 'today' in pair.spend else '-')}</td>"
        f"<td>{text(pair.spend['last_7_days'].shown() if 'last_7_days' in pair.spend else '-')}</td>"
        f"<td>{text(pair.lateness.shown())}</td>"
        f"<td>{text(pair.problem or (pair.last_failure.error if pair.last_failure is not None and pair.last_failure.error else ''))}</td></tr>"
        for pair in status.pairs
    )
    legend = (
        '<div class="legend">'
        + "".join(f'<span><span class="swatch cell {state}"></span>{state} {states.get(state, 0)}</span>' for state in STATES)
        + "</div>"
    )
    source = (
        f"input: {counts['lines']} lines, {counts['events']} runner events ({counts['runs']} runs), {counts['malformed']} malformed, "
        f"{counts['foreign']} foreign" + (f"; from {counts['first']} to {counts['last']}" if counts["first"] else "")
    )
    return (
        f'<h1>Runs</h1>\n<p class="summary"><span class="verdict" id="verdict">status: {text(status.verdict)} (exit {status.exit_code})</span>'
        f" \u00b7 judged at {text(status.now.astimezone(zone).isoformat())}, grace {text(status.grace)} \u00b7 {text(source)}</p>\n"
        f'<table class="grid" id="pairs"><thead><tr><th>agent</th><th>routine</th><th>state</th><th>due slot</th><th>spent today</th><th>spent in 7 days</th><th>lateness (7 days)</th><th>last error</th></tr></thead>'
        f"<tbody>{pairs}</tbody></table>\n<h2>Slots by day</h2>\n{legend}"
        + (
            f'<p class="summary">The log reaches back beyond {ABSENT_DAYS} days: absent slots are shown for the last {ABSENT_DAYS} only.</p>'
            if counts["first"] and status.now - datetime.fromisoformat(counts["first"]) > timedelta(days=ABSENT_DAYS) + status.grace
            else ""
        )
    )


def build_run_report(
    config: RunnerConfig,
    lines: Iterable[str],
    *,
    now: datetime,
    since: datetime | None = None,
    grace: timedelta | None = None,
    paused: frozenset[tuple[str, str]] | None = frozenset(),
) -> RunReport:
    """The report page of the runs in *lines*, finished at or after *since*, judged as ``status`` judges them at *now*.

    *grace* and *paused* are ``status``'s (see :func:`runner.monitor.status.build_report`). Never raises on
    bad input (see :func:`runner.monitor.log_digest.read_log`).
    """
    history = build_history(lines, since=since)
    status = build_report(config, history.digest, now, grace, paused)
    cells = _cells(config, status, history.slots, since, history.digest.pairs)
    keys = {index: f"s-{index}" for index in range(len(cells))}
    records = {keys[index]: cell.record for index, cell in enumerate(cells)}
    states = Counter(cell.state for cell in cells)
    body = _header(status, states, config.timezone) + "\n" + _grid(config, cells, keys)
    return RunReport(page(_TITLE, body, records), status, dict(states))
