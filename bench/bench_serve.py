"""The concurrency cap of ``serve`` under a burst (a benchmark, not a test): RSS and worker count over time.

Run:  python bench/bench_serve.py [--agents 50] [--cap 2] [--every 5]

A real ``ghostrunner serve`` gets AGENTS agents x 3 routines (simulated
backend, a journal per agent) whose schedules all fire in the same coming
minute, with ``max_concurrent_runs = CAP``. From the fire until the last
``run.finished`` it samples, every half second, the scheduler's RSS
(VmRSS) and how many worker processes it has (its children), and prints a
line every EVERY seconds; then a summary: the most workers seen at once, the
scheduler's RSS before the fire and at its peak, the runs queued and
finished, and the wall time of the burst.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PERSONA = REPO / "examples" / "agents" / "motoko.toml"
ROUTINES = ("burst-a", "burst-b", "burst-c")


def _config(directory: Path, agents: int, cap: int, fire: datetime) -> Path:
    shutil.copy(PERSONA, directory / "motoko.toml")
    text = (f'[runner]\njournal_root = "./journals/{{agent}}"\ntimezone = "UTC"\ncatchup_grace = "0s"\n'
            f'max_concurrent_runs = {cap}\nrun_timeout = "5m"\n')
    for kind, name in zip(("pulse", "evening", "note"), ROUTINES, strict=True):
        text += (f'[routines.{name}]\nkind = "{kind}"\nschedule = "{fire.minute} {fire.hour} * * *"\nslot = "day"\n'
                 'question = "what happened?"\nprompt = "Write a short note."\n')
    for n in range(agents):
        text += f'[agents.agent{n:02d}]\npersona = "motoko.toml"\nroutines = {json.dumps(list(ROUTINES))}\n'
    path = directory / "ghostrunner.toml"
    path.write_text(text)
    return path


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def _workers(pid: int) -> int:
    children: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children.update((task / "children").read_text().split())
    return len(children)


class _Events:
    """Counts the serve's log events as they come (on a thread)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        assert process.stdout is not None
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            try:
                event = json.loads(line)["event"]
            except (ValueError, KeyError, TypeError):
                continue
            with self.lock:
                self.counts[event] = self.counts.get(event, 0) + 1

    def count(self, name: str) -> int:
        with self.lock:
            return self.counts.get(name, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--cap", type=int, default=2)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between printed samples")
    args = parser.parse_args()
    runs = args.agents * len(ROUTINES)
    now = datetime.now(UTC)
    fire = (now + timedelta(minutes=1 if now.second < 45 else 2)).replace(second=0, microsecond=0)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as work:
        path = _config(Path(work), args.agents, args.cap, fire)
        process = subprocess.Popen([sys.executable, "-m", "runner", "serve", "--config", str(path)], cwd=work,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        events = _Events(process)
        try:
            while events.count("scheduler.started") == 0:
                time.sleep(0.1)
            idle = _rss_mb(process.pid)
            print(f"{args.agents} agents x {len(ROUTINES)} routines = {runs} runs due at {fire:%H:%M:%S} UTC, "
                  f"max_concurrent_runs = {args.cap}; scheduler RSS before the fire: {idle:.1f} MB")
            while datetime.now(UTC) < fire:
                time.sleep(0.2)
            print(f"{'t (s)':>6}  {'scheduler RSS (MB)':>18}  {'workers':>7}  {'finished':>8}  {'queued (logged)':>15}")
            start = time.monotonic()
            peak_rss, peak_workers, last_print = idle, 0, -1.0
            samples: list[int] = []
            while events.count("run.finished") < runs:
                elapsed = time.monotonic() - start
                rss, workers = _rss_mb(process.pid), _workers(process.pid)
                samples.append(workers)
                peak_rss, peak_workers = max(peak_rss, rss), max(peak_workers, workers)
                if last_print < 0 or elapsed - last_print >= args.every:
                    print(f"{elapsed:6.1f}  {rss:18.1f}  {workers:7d}  {events.count('run.finished'):8d}  {events.count('scheduler.run_queued'):15d}")
                    last_print = elapsed
                    sys.stdout.flush()
                if elapsed > 1800:
                    raise SystemExit("the burst did not finish within 30 minutes")
                time.sleep(0.5)
            wall = time.monotonic() - start
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
        busy = [count for count in samples if count]
        print(f"\nruns finished: {events.count('run.finished')} of {runs}; runs queued (scheduler.run_queued): "
              f"{events.count('scheduler.run_queued')}; burst wall time {wall:.1f} s")
        print(f"workers at once: at most {peak_workers} (cap {args.cap}); mean {sum(busy) / max(1, len(busy)):.2f} over "
              f"{len(busy)} busy samples")
        print(f"scheduler RSS: {idle:.1f} MB before the fire, {peak_rss:.1f} MB at its peak")


if __name__ == "__main__":
    main()
