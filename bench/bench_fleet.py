"""Fleet scale (a benchmark, not a test): AGENTS agents x 3 routines over SHARDS fleet workers, then one serve for the same agents.

Run:  python bench/bench_fleet.py [--agents 500] [--shards 4] [--minutes 8] [--serve-agents 100] [--serve-minutes 1]
                                  [--skip-serve] [--lead 60] [--keep DIR] [--baseline REV|TREE ...]

The compressed day: each agent's day of the three built-in routines, eight
fires (pulse-4h six times, evening once, digest once), is laid out one fire
a minute, every routine on minute slots (``slot = "minute"``): pulse-4h at
minutes 0-5 of the day (its 00:00 ... 20:00), evening at minute 6, digest
at minute 7. Every agent fires in the same minutes, as agents sharing a
schedule do: each minute is a burst of AGENTS runs. The simulated backend
writes every entry, with lexical memory, a journal per agent.

The fleet side starts a real redis-server on a loopback port,
``ghostrunner fleet worker --shard S --concurrency 1`` for each of SHARDS
shards (agents dealt round-robin), and ``ghostrunner fleet beat`` just
before the day's first minute; it runs the whole day. The serve side is one
``ghostrunner serve`` (its own configuration with no ``[fleet]`` table, its
own journals, ``max_concurrent_runs`` = CPU count) for the first
SERVE_AGENTS of those agents, whose day is cut to its first SERVE_MINUTES
minutes: each of its runs is a ``ghostrunner run`` process, about a second
of CPU, so one fire of all 500 agents takes it 10 to 30 minutes on two
shared cores (``--serve-agents 0`` runs that; the whole bench then takes
most of an hour, against some 15 minutes at the defaults). The fleet's lags
are also given for serve's fires (the same agents, the same minutes), which
on the fleet came in a burst of all its agents. The two sides run one
after the other, never at once. The figures, side by side:

* publish lag: a fire's time (the run's ``scheduled``) to its
  ``run.started`` line, from the workers' logs (stderr) and serve's
  (stdout), p50 and p99; for the fleet also over the minutes serve ran;
  and the part of it up to ``scheduler.run_queued`` (beat's publish,
  serve's queueing);
* runs, doubles and losses, counted from the journals: every fire of the
  window must have exactly one entry of its client key; an entry of a key
  outside the window is counted too (extra);
* peak RSS (VmHWM) of the beat, of each worker's main process and pool
  process and of serve, and the most resident memory (PSS, so the pages a
  fork shares count once) of a worker's tree and of serve's with its run
  processes, sampled twice a second;
* the CPU time of all of a side's processes (start-up included), and per
  run; the beat's own per fire, from its ``scheduler.started`` on (its
  start-up left out); with the 1-minute load average at each side's start
  and end, since other work shares the cores.

With ``--baseline REV`` the fleet's day is run twice, one after the other:
first by the journal, runner and routines of git revision REV (extracted as
bench_runner.py's ``--baseline`` does; redis-server, workers and beat all
run REV's code; a directory TREE holding those packages, such as a git
worktree, is run as it is), then by this tree, each with its own redis-server and
journals; the table puts the two fleets side by side, with the ratios of
their lags and of the beat's CPU a fire. ``--baseline`` given more than once
runs each baseline in turn, then this tree, with this tree's ratios against each.

The lag is split where the beat's part ends: fire to ``scheduler.run_queued``
is the beat's (its pass and its write to Redis), ``scheduler.run_queued`` to
``run.started`` the workers' (the task waiting in its shard's queue for that
shard's one worker).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Final

from journal import Journal
from runner.cron.slots import cron_trigger

REPO: Final = Path(__file__).resolve().parents[1]
PERSONA: Final = REPO / "examples" / "agents" / "motoko.toml"
#: Minutes of the compressed day at which each routine fires.
DAY: Final = {"pulse-4h": (0, 1, 2, 3, 4, 5), "evening": (6,), "digest": (7,)}
DAY_MINUTES: Final = 8
#: Agents under serve by default: a serve's run is a process (about a second of CPU), so 500 at once would take it most of an hour here.
SERVE_AGENTS: Final = 100
#: How long after the last fire of a side its runs may take to finish before the bench gives up on them.
DRAIN_LIMIT: Final = timedelta(minutes=30)


# -- configuration ----------------------------------------------------------------------------


def cron_of(moments: Sequence[datetime]) -> str:
    """A cron expression that fires at each of *moments* (UTC, whole minutes, within an hour of each other).

    One expression names its minutes, hours and days separately, so a
    window across an hour also names those minutes in the other hour: the
    fires that adds lie more than 50 minutes from the window (those before
    it run neither on beat, which installs a pair just before the window,
    nor on serve, whose catch-up grace is 0 s; by those after it the bench
    has stopped).
    """
    def values(part: str) -> str:
        return ",".join(str(value) for value in sorted({getattr(moment, part) for moment in moments}))

    return f"{values('minute')} {values('hour')} {values('day')} {values('month')} *"


def day_fires(start: datetime, minutes: int) -> dict[str, list[datetime]]:
    """Each routine's fires in the first *minutes* minutes of the compressed day starting at *start*."""
    return {name: [start + timedelta(minutes=m) for m in offsets if m < minutes] for name, offsets in DAY.items()}


def write_config(directory: Path, agents: Sequence[str], fires: dict[str, list[datetime]], *, fleet: tuple[str, int] | None) -> Path:
    """A ghostrunner.toml in *directory* for *agents* firing at *fires*; with *fleet* (broker URL, shards) a [fleet] table."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    routines = [name for name, moments in fires.items() if moments]
    text = ('[runner]\njournal_root = "./journals/{agent}"\ntimezone = "UTC"\ncatchup_grace = "0s"\nmisfire_grace = "10m"\n'
            f'memory = "lexical"\nrun_timeout = "5m"\nmax_concurrent_runs = {os.cpu_count() or 1}\n')
    for name in routines:
        expression = cron_of(fires[name])
        window = (fires[name][0], fires[name][-1] + timedelta(minutes=1))
        found = list(cron_trigger(expression, UTC).after(window[0], days=1))
        assert [moment for moment in found if moment < window[1]] == fires[name], f"{expression} does not fire at the day's minutes"
        text += f'[routines.{name}]\nschedule = "{expression}"\nslot = "minute"\n'
    for name in agents:
        text += f'[agents.{name}]\npersona = "motoko.toml"\nroutines = {json.dumps(routines)}\n'
    if fleet is not None:
        broker, shards = fleet
        text += f'[fleet]\nbroker = "{broker}"\n[fleet.shards]\n'
        for shard in range(shards):
            text += f"shard{shard} = {json.dumps(list(agents[shard::shards]))}\n"
    path = directory / "ghostrunner.toml"
    path.write_text(text)
    return path


def next_minute(after: datetime) -> datetime:
    """The first whole minute at or after *after*."""
    whole = after.replace(second=0, microsecond=0)
    return whole if whole == after else whole + timedelta(minutes=1)


# -- processes and their memory ---------------------------------------------------------------


def _status_kb(pid: int, key: str) -> int:
    """A ``kB`` figure of /proc/PID/status (0 once the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith(key + ":")), 0)


def _pss_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")), 0)


_TICKS: Final = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int, *, reaped: bool) -> float:
    """CPU seconds (user and system) of a process so far, with those of its children it has waited for if *reaped*."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = sum(int(value) for value in fields[11:15 if reaped else 13])  # utime, stime (, cutime, cstime)
    return ticks / _TICKS


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.extend(int(child) for child in (task / "children").read_text().split())
    except OSError:
        pass
    return found


@dataclass
class Peak:
    """The peaks of one process tree, as sampled: VmHWM of the main process and of its children, the tree's PSS, its CPU time."""

    main_hwm_kb: int = 0
    child_hwm_kb: int = 0
    tree_pss_kb: int = 0
    children_at_once: int = 0
    cpu_s: float = 0.0

    def sample(self, pid: int) -> None:
        cpu = _cpu_s(pid, reaped=True) + sum(_cpu_s(child, reaped=False) for child in _children(pid))
        self.cpu_s = max(self.cpu_s, cpu)
        self.main_hwm_kb = max(self.main_hwm_kb, _status_kb(pid, "VmHWM"))
        children = _children(pid)
        self.children_at_once = max(self.children_at_once, len(children))
        self.child_hwm_kb = max([self.child_hwm_kb, *(_status_kb(child, "VmHWM") for child in children)])
        self.tree_pss_kb = max(self.tree_pss_kb, _pss_kb(pid) + sum(_pss_kb(child) for child in children))


class Sampler:
    """Samples the peaks of named processes on a thread, twice a second, until stopped."""

    def __init__(self) -> None:
        self.peaks: dict[str, Peak] = {}
        self._pids: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def watch(self, name: str, pid: int) -> None:
        with self._lock:
            self._pids[name] = pid
            self.peaks[name] = Peak()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                for name, pid in self._pids.items():
                    self.peaks[name].sample(pid)

    def stop(self) -> dict[str, Peak]:
        self._stop.set()
        self._thread.join()
        return self.peaks


class LogFile:
    """A process's JSON log lines, written to a file and read back as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: IO[str] = path.open("w", encoding="utf-8")
        self._offset = 0
        self._partial = ""
        self.events: list[dict[str, Any]] = []

    def read_new(self) -> list[dict[str, Any]]:
        with self.path.open(encoding="utf-8") as stream:
            stream.seek(self._offset)
            text = self._partial + stream.read()
            self._offset = stream.tell()
        *lines, self._partial = text.split("\n")
        new = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # Celery's own lines
            if isinstance(event, dict):
                new.append(event)
        self.events.extend(new)
        return new

    def count(self, name: str) -> int:
        return sum(1 for event in self.events if event.get("event") == name)

    def seen(self, name: str, times: int) -> bool:
        """Whether *name* has been logged *times* times so far (reading what came since the last look)."""
        self.read_new()
        return self.count(name) >= times


def start(command: list[str], cwd: Path, log: LogFile, *, stream: str, tree: Path = REPO) -> subprocess.Popen[bytes]:
    """Start a ghostrunner command, the packages of *tree*, whose JSON log *stream* (stdout or stderr) goes to *log*."""
    out = log.handle if stream == "stdout" else subprocess.DEVNULL
    err = log.handle if stream == "stderr" else subprocess.DEVNULL
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-m", "runner", *command], cwd=cwd, stdout=out, stderr=err, env=env)


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def wait_until(condition: Any, deadline: float, what: str, processes: Sequence[subprocess.Popen[bytes]] = ()) -> None:
    while not condition():
        for process in processes:
            if process.poll() is not None:
                raise SystemExit(f"{what}: a process ended first (exit {process.returncode}, args {process.args})")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not done in time")
        time.sleep(0.25)


# -- what the logs and journals say -----------------------------------------------------------


@dataclass
class Side:
    """One side's window and what came of it."""

    name: str
    agents: list[str]
    fires: dict[str, list[datetime]]
    logs: list[LogFile] = field(default_factory=list)
    peaks: dict[str, Peak] = field(default_factory=dict)
    #: The 1-minute load average when the side's window began and when its last run had finished: other work shares the cores.
    load: list[float] = field(default_factory=list)
    #: The beat's CPU seconds at its ``scheduler.started`` line: its start-up, left out of its CPU a fire.
    beat_startup_cpu_s: float = 0.0

    @property
    def expected(self) -> set[str]:
        return {f"{agent}:{routine}:{moment:%Y-%m-%dT%H:%M}" for agent in self.agents for routine, moments in self.fires.items()
                for moment in moments}

    def events(self, name: str) -> Iterator[dict[str, Any]]:
        for log in self.logs:
            for event in log.events:
                if event.get("event") == name:
                    yield event

    @property
    def first_fire(self) -> datetime:
        return min(moment for moments in self.fires.values() for moment in moments)

    @property
    def last_fire(self) -> datetime:
        return max(moment for moments in self.fires.values() for moment in moments)

    def drain_s(self) -> float:
        """Seconds from the window's last fire to its last run.finished line."""
        ends = [datetime.fromisoformat(event["timestamp"]) for event in self.events("run.finished")]
        return (max(ends) - self.last_fire).total_seconds() if ends else float("nan")

    def lags(self, before: datetime | None = None, *, agents: set[str] | None = None, event_name: str = "run.started") -> list[float]:
        """Seconds from each run's fire time to its first *event_name* line (fires before *before*, of *agents*, if given)."""
        first: dict[str, float] = {}
        for event in self.events(event_name):
            scheduled = datetime.fromisoformat(event["scheduled"])
            if (before is not None and scheduled >= before) or (agents is not None and event["agent"] not in agents):
                continue
            lag = (datetime.fromisoformat(event["timestamp"]) - scheduled).total_seconds()
            key = event["client_key"]
            first[key] = min(first.get(key, lag), lag)
        return sorted(first.values())

    def waits(self) -> list[float]:
        """Seconds from each run's ``scheduler.run_queued`` line to its first ``run.started`` (the time its task waited for a worker)."""
        queued = {event["client_key"]: datetime.fromisoformat(event["timestamp"]) for event in self.events("scheduler.run_queued")}
        started: dict[str, datetime] = {}
        for event in self.events("run.started"):
            moment = datetime.fromisoformat(event["timestamp"])
            started[event["client_key"]] = min(started.get(event["client_key"], moment), moment)
        return sorted((moment - queued[key]).total_seconds() for key, moment in started.items() if key in queued)

    def journal_counts(self, work: Path) -> dict[str, int]:
        """Entries per client key in the side's journals (each entry of the window's agents)."""
        keys: Counter[str] = Counter()
        for agent in self.agents:
            root = work / "journals" / agent
            if not root.exists():
                continue
            with Journal(root) as journal:
                keys.update(entry.client_key or "(none)" for entry in journal.list(agent=agent))
        return dict(keys)


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of sorted *values*."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(share * len(values)) - 1))]


def summarise(side: Side, work: Path, *, compare: tuple[int, list[str]] | None = None) -> dict[str, Any]:
    """*side*'s figures; with *compare* (serve's minutes and agents) the lags of the same fires too."""
    counts = side.journal_counts(work)
    expected = side.expected
    outcomes = Counter(event.get("outcome") for event in side.events("run.finished"))
    lags = side.lags()
    queued = side.lags(event_name="scheduler.run_queued")
    summary: dict[str, Any] = {
        "side": side.name, "agents": len(side.agents), "fires": len(expected), "minutes": len({m for ms in side.fires.values() for m in ms}),
        "drain_s": round(side.drain_s(), 1),
        "entries": sum(counts.values()), "losses": sum(1 for key in expected if counts.get(key, 0) == 0),
        "doubles": sum(1 for key in expected if counts.get(key, 0) > 1),
        "extra": sum(count for key, count in counts.items() if key not in expected),
        "run_finished": dict(outcomes), "starts": sum(1 for _ in side.events("run.started")),
        "lag_p50_s": round(percentile(lags, 0.50), 2), "lag_p99_s": round(percentile(lags, 0.99), 2), "lag_max_s": round(max(lags, default=0), 2),
        "queued_p50_s": round(percentile(queued, 0.50), 2), "queued_p99_s": round(percentile(queued, 0.99), 2),
        "wait_p50_s": round(percentile(side.waits(), 0.50), 2), "wait_p99_s": round(percentile(side.waits(), 0.99), 2),
        "load_average": "-".join(f"{load:.1f}" for load in side.load),
    }
    beat = side.peaks.get("beat")
    if beat is not None:
        summary["beat_cpu_ms_a_fire"] = round(1000 * (beat.cpu_s - side.beat_startup_cpu_s) / max(1, len(expected)), 2)
    if compare is not None:
        minutes, agents = compare
        before = side.first_fire + timedelta(minutes=minutes)
        early, burst = side.lags(before=before, agents=set(agents)), side.lags(before=before)
        summary["first_minutes_lag"] = {"minutes": minutes, "runs": len(early), "p50_s": round(percentile(early, 0.50), 2),
                                        "p99_s": round(percentile(early, 0.99), 2), "all_p50_s": round(percentile(burst, 0.50), 2),
                                        "all_p99_s": round(percentile(burst, 0.99), 2)}
    summary["peaks_mb"] = {name: {"main_hwm": round(peak.main_hwm_kb / 1024, 1), "child_hwm": round(peak.child_hwm_kb / 1024, 1),
                                  "tree_pss": round(peak.tree_pss_kb / 1024, 1), "children_at_once": peak.children_at_once,
                                  "cpu_s": round(peak.cpu_s, 1)}
                           for name, peak in side.peaks.items()}
    return summary


# -- the two sides ----------------------------------------------------------------------------


def run_fleet(work: Path, agents: list[str], shards: int, minutes: int, lead: float, *, tree: Path = REPO, name: str = "fleet") -> Side:
    """The whole compressed day on the fleet (*tree*'s code): redis-server, SHARDS workers, then beat just before the day's first minute."""
    sys.path.insert(0, str(REPO))
    from tests._redis import RedisServer  # the tests' starter: Debian's redis-server on a free loopback port

    redis = RedisServer(work / "redis")
    first = next_minute(datetime.now(UTC) + timedelta(seconds=lead))
    side = Side(name, agents, day_fires(first, minutes))
    path = write_config(work, agents, side.fires, fleet=(redis.url, shards))
    sampler = Sampler()
    assert redis.process is not None
    sampler.watch("redis-server", redis.process.pid)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for shard in range(shards):
            log = LogFile(work / f"worker{shard}.log")
            side.logs.append(log)
            process = start(["fleet", "worker", "--shard", f"shard{shard}", "--concurrency", "1", "--config", str(path)], work, log, stream="stderr",
                            tree=tree)
            processes.append(process)
            sampler.watch(f"worker shard{shard}", process.pid)
        # A worker has forked its pool process once it has read its shard's journals; it consumes from Redis moments later,
        # well before the day: beat starts 45 s before the first minute at the earliest.
        wait_until(lambda: all(_children(process.pid) for process in processes), time.monotonic() + lead, "the workers' start", processes)
        # Beat installs each pair at its start and runs its fires from then on: it starts within the minute before the first.
        while datetime.now(UTC) < first - timedelta(seconds=45):
            time.sleep(0.25)
        if datetime.now(UTC) > first - timedelta(seconds=10):
            raise SystemExit(f"the workers took too long to start for the day at {first:%H:%M}: give a longer --lead than {lead:.0f} s")
        beat_log = LogFile(work / "beat.log")
        beat = start(["fleet", "beat", "--config", str(path)], work, beat_log, stream="stderr", tree=tree)
        processes.append(beat)
        sampler.watch("beat", beat.pid)
        wait_until(lambda: beat_log.seen("scheduler.started", 1), time.monotonic() + 40, "the beat's start", processes)
        side.beat_startup_cpu_s = _cpu_s(beat.pid, reaped=True)
        side.load.append(os.getloadavg()[0])
        deadline = time.monotonic() + (side.last_fire - datetime.now(UTC)).total_seconds() + DRAIN_LIMIT.total_seconds()
        fires = len(side.expected)

        def finished() -> bool:
            beat_log.read_new()
            for log in side.logs:
                log.read_new()
            return sum(log.count("run.finished") for log in side.logs) >= fires

        wait_until(finished, deadline, "the fleet's day", processes)
        side.load.append(os.getloadavg()[0])
        side.logs.append(beat_log)
    finally:
        side.peaks = sampler.stop()
        for process in reversed(processes):
            stop(process)
        redis.stop()
    return side


def run_serve(work: Path, agents: list[str], minutes: int) -> Side:
    """The first *minutes* minutes of the compressed day under one serve."""
    first = next_minute(datetime.now(UTC) + timedelta(seconds=20))
    side = Side("serve", agents, day_fires(first, minutes))
    path = write_config(work, agents, side.fires, fleet=None)
    log = LogFile(work / "serve.log")
    side.logs.append(log)
    sampler = Sampler()
    serve = start(["serve", "--config", str(path)], work, log, stream="stdout")
    sampler.watch("serve", serve.pid)
    try:
        wait_until(lambda: log.seen("scheduler.started", 1), time.monotonic() + 60, "serve's start", [serve])
        if datetime.now(UTC) > first - timedelta(seconds=2):
            raise SystemExit("serve took too long to start for its first minute")
        fires = len(side.expected)
        deadline = time.monotonic() + (side.last_fire - datetime.now(UTC)).total_seconds() + DRAIN_LIMIT.total_seconds()
        side.load.append(os.getloadavg()[0])
        wait_until(lambda: log.seen("run.finished", fires), deadline, "serve's window", [serve])
        side.load.append(os.getloadavg()[0])
    finally:
        side.peaks = sampler.stop()
        stop(serve)
    return side


# -- output -----------------------------------------------------------------------------------


def render(fleets: list[dict[str, Any]], serve: dict[str, Any] | None, shards: int) -> list[str]:
    """The side-by-side table of *fleets* (summaries: a baseline's, then this tree's) and *serve*, and the ratios between them."""
    fleet = fleets[-1]
    lines = [("compressed day: one fire a minute, pulse-4h at minutes 0-5, evening at 6, digest at 7 (slot = minute), "
              "every agent in the same minutes"),
             (f"fleet: {fleet['agents']} agents, {fleet['minutes']} minute(s) of the day = {fleet['fires']} runs, "
              f"{shards} shards of one worker process each (--concurrency 1), a run in the worker's pool process")]
    if len(fleets) > 1:
        lines.append(f"       run by {', then by '.join(side['side'] for side in fleets)}, one after the other, each with its own "
                     "redis-server and journals")
    if serve is not None:
        lines.append(f"serve: {serve['agents']} agents (the fleet's first, in a configuration of their own), the day's first "
                     f"{serve['minutes']} minute(s) = {serve['fires']} runs, each a ghostrunner run process, max_concurrent_runs = {os.cpu_count() or 1}")
        if serve["agents"] < fleet["agents"]:
            lines.append(f"       (not all {fleet['agents']}: one fire of 500 agents takes a serve 10 to 30 minutes on 2 cores; "
                         "--serve-agents 0 runs it)")
    sides = [*fleets] + ([serve] if serve is not None else [])
    width, column = 34, max(16, *(len(side["side"]) + 2 for side in sides))
    lines += ["", f"{'':{width}}" + "".join(f"{side['side']:>{column}}" for side in sides)]

    def row(label: str, *values: object) -> None:
        lines.append(f"{label:{width}}" + "".join(f"{value!s:>{column}}" for value in values))

    row("fires in the window", *(side["fires"] for side in sides))
    row("entries in the journals", *(side["entries"] for side in sides))
    row("losses (a fire without its entry)", *(side["losses"] for side in sides))
    row("doubles (a key with two entries)", *(side["doubles"] for side in sides))
    row("entries of no fire in the window", *(side["extra"] for side in sides))
    row("run.started lines", *(side["starts"] for side in sides))
    row("fire to queued p50 (s)", *(side["queued_p50_s"] for side in sides))
    row("fire to queued p99 (s)", *(side["queued_p99_s"] for side in sides))
    row("queued to started p50 (s)", *(side["wait_p50_s"] for side in sides))
    row("queued to started p99 (s)", *(side["wait_p99_s"] for side in sides))
    row("publish lag p50 (s)", *(side["lag_p50_s"] for side in sides))
    row("publish lag p99 (s)", *(side["lag_p99_s"] for side in sides))
    early = [side.get("first_minutes_lag") for side in fleets]
    if serve is not None and all(early):
        row("  serve's fires, p50 (s)", *(part["p50_s"] for part in early if part), serve["lag_p50_s"])
        row("  serve's fires, p99 (s)", *(part["p99_s"] for part in early if part), serve["lag_p99_s"])
        # Beat publishes a minute's fires in its entries' key order, so the first agents by name (serve's) go first.
        row("  serve's minutes, all agents, p50", *(part["all_p50_s"] for part in early if part), "")
        row("  serve's minutes, all agents, p99", *(part["all_p99_s"] for part in early if part), "")
    row("last fire to last run (s)", *(side["drain_s"] for side in sides))
    row("load average, start-end", *(side["load_average"] for side in sides))
    cpu = [sum(peak["cpu_s"] for peak in side["peaks_mb"].values()) for side in sides]
    row("CPU s, all its processes", *(f"{seconds:.1f}" for seconds in cpu))
    row("CPU ms a run, start-up in", *(f"{1000 * seconds / max(1, side['fires']):.0f}" for seconds, side in zip(cpu, sides, strict=True)))
    row("beat CPU ms a fire, start-up out", *(side["beat_cpu_ms_a_fire"] for side in fleets))
    lines += ["", "peak memory (MB): VmHWM of the process and of its largest child; the tree's PSS at its peak; the tree's CPU time"]
    for side in sides:
        for name, peak in side["peaks_mb"].items():
            children = (f", child {peak['child_hwm']}, tree {peak['tree_pss']} ({peak['children_at_once']} children at most)"
                        if peak["children_at_once"] else "")
            lines.append(f"  {side['side']:14} {name:16} main {peak['main_hwm']}{children}; CPU {peak['cpu_s']} s")
    for base in fleets[:-1]:

        def ratio(key: str, base: dict[str, Any] = base) -> str:
            return f"{base[key] / fleet[key]:.1f}x" if fleet[key] else "n/a"

        lines += ["", (f"{fleet['side']} against {base['side']}: publish lag p50 {ratio('lag_p50_s')} lower, p99 {ratio('lag_p99_s')} lower; "
                       f"fire to queued p99 {ratio('queued_p99_s')} lower; beat CPU a fire {ratio('beat_cpu_ms_a_fire')} lower")]
    head = early[-1]
    if serve is not None and head is not None and head["p50_s"] > 0:
        lines += ["", (f"serve's lag against the fleet's, the same agents' fires in the same minutes: p50 {serve['lag_p50_s'] / head['p50_s']:.1f}x, "
                      f"p99 {serve['lag_p99_s'] / head['p99_s']:.1f}x")]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=500, help="agents on the fleet (default 500)")
    parser.add_argument("--shards", type=int, default=4, help="shards, one worker process each (default 4)")
    parser.add_argument("--minutes", type=int, default=DAY_MINUTES, choices=range(1, DAY_MINUTES + 1), metavar="1-8",
                        help="minutes of the compressed day the fleet runs (default 8: all of it)")
    parser.add_argument("--serve-agents", type=int, default=SERVE_AGENTS,
                        help=f"the first this many of the fleet's agents go under serve (default {SERVE_AGENTS}; 0: all of them)")
    parser.add_argument("--serve-minutes", type=int, default=1, choices=range(1, DAY_MINUTES + 1), metavar="1-8",
                        help="minutes of the compressed day serve runs (default 1: its first pulse-4h)")
    parser.add_argument("--skip-serve", action="store_true", help="the fleet only")
    parser.add_argument("--lead", type=float, default=60.0, help="seconds allowed for the workers' start before the day (default 60)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the journals and logs in this directory")
    parser.add_argument("--baseline", action="append", default=[],
                        help="git revision (or a directory holding journal/, runner/ and routines/, such as a worktree) "
                             "whose packages also run the fleet's day, before this tree's; given again, each runs it in turn")
    args = parser.parse_args()
    if args.agents < 1 or not 1 <= args.shards <= args.agents:
        parser.error(f"--agents must be at least 1 and --shards from 1 to --agents (each shard holds an agent), got {args.agents} and {args.shards}")
    if args.serve_agents < 0:
        parser.error(f"--serve-agents must be 0 (all) or more, got {args.serve_agents}")
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (Debian package redis-server)")
    agents = [f"agent{n:03d}" for n in range(args.agents)]
    serve_agents = agents[: args.serve_agents] if args.serve_agents else agents
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = args.keep or Path(tmp)
        compare = None if args.skip_serve else (args.serve_minutes, serve_agents)
        fleets = []
        for baseline in args.baseline:
            if Path(baseline, "runner").is_dir():  # a tree on disk: a worktree of another branch, say
                tree = Path(baseline).resolve()
                name = f"fleet@{tree.name}"
            else:
                from bench_runner import export_tree  # the same extraction as bench_runner.py's --baseline

                commit = subprocess.run(["git", "rev-parse", "--short", baseline], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
                tree = export_tree(commit, work / f"baseline-tree-{commit}")
                name = f"fleet@{commit}"
            fleets.append(summarise(run_fleet(work / name, agents, args.shards, args.minutes, args.lead, tree=tree, name=name), work / name,
                                    compare=compare))
        fleet_side = run_fleet(work / "fleet", agents, args.shards, args.minutes, args.lead)
        fleets.append(summarise(fleet_side, work / "fleet", compare=compare))
        serve = None
        if not args.skip_serve:
            serve_side = run_serve(work / "serve", serve_agents, args.serve_minutes)
            serve = {**summarise(serve_side, work / "serve"), "minutes": args.serve_minutes}
    print(json.dumps({"fleets": fleets, "serve": serve, "load_average": os.getloadavg()}, indent=2), file=sys.stderr)
    print("\n".join(render(fleets, serve, args.shards)))
    print(f"\n{os.cpu_count()} CPUs, shared with whatever else runs: the load averages above say how much")


if __name__ == "__main__":
    main()
