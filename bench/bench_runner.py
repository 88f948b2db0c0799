"""Runner benchmarks (not tests): per-run overhead, a year of simulation, parallel agents, scheduler idle RSS.

Run:  python bench/bench_runner.py [--quick] [--memory-only] [--baseline REV [--year-only] [--rounds N]]

Targets: <= 50 ms per run at a 5,000-entry journal; a 365-day simulation of
one agent in <= 60 s; 50 agents x 30 days in parallel worker processes with
its speed-up over one process; scheduler idle RSS <= 120 MB. The per-run and
year figures are measured with lexical and with hybrid memory, side by side.
With ``--baseline REV`` the hybrid year is also simulated by the journal,
runner and routines of git revision REV, in fresh processes taking turns
with this tree's, so both are measured under the same load; ``--year-only``
measures that comparison alone. Each year reports its process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from journal import Journal
from runner import build_backend, configure_logging, execute_run, load_config, simulate

REPO = Path(__file__).resolve().parents[1]
PERSONA = REPO / "examples" / "agents" / "motoko.toml"


def _config(directory: Path, agents: list[str], *, root: str = "./journal", grace: str = "6h", memory: str = "lexical") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    text = f'[runner]\njournal_root = "{root}"\ntimezone = "UTC"\ncatchup_grace = "{grace}"\nmemory = "{memory}"\n'
    for name in agents:
        text += f'[agents.{name}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening", "digest"]\n'
    path = directory / "ghostrunner.toml"
    path.write_text(text)
    return path


def per_run_overhead(work: Path, size: int, runs: int, memory: str) -> dict[str, float | str]:
    """Mean and p95 of execute_run (context + simulated backend + validated durable append) at a journal of *size* entries.

    With hybrid memory the filler entries are embedded before the timed runs.
    """
    directory = work / f"overhead-{memory}"
    config = load_config(_config(directory, ["motoko"], memory=memory))
    agent = config.agent("motoko")
    start = datetime(2025, 1, 1, tzinfo=config.timezone)
    with Journal(agent.journal_root) as journal:
        for n in range(size):
            journal.append({"kind": "pulse", "agent": "motoko", "theme": f"theme {n % 40}", "voice": f"filler entry {n} about the harbour and the net",
                            "tags": [f"t{n % 13}"], "ts": (start + timedelta(minutes=30 * n)).isoformat(),
                            # the filler stands for the simulated agent's own past: a real entry would make its runs refuse the journal
                            "meta": {"simulated": True}})
    with Journal(agent.journal_root, enable_nn=memory == "hybrid") as journal:
        if memory == "hybrid":
            journal.embed()  # the filler's vectors, before the timed runs (a ranking would embed them in the first run)
        backend = build_backend(agent)
        routine = config.routines["pulse-4h"]
        first = start + timedelta(minutes=30 * size)
        timings = []
        for n in range(runs):
            began = time.perf_counter()
            result = execute_run(journal, agent=agent, routine=routine, scheduled=first + timedelta(hours=4 * (n + 1)), backend=backend, tz=config.timezone)
            timings.append((time.perf_counter() - began) * 1000)
            assert result.outcome == "appended", result.error
    cli = []
    for n in range(5):
        at = (first + timedelta(hours=4 * (runs + n + 1))).isoformat()
        began = time.perf_counter()
        subprocess.run(["ghostrunner", "run", "pulse-4h", "--agent", "motoko", "--at", at, "--config", str(directory / "ghostrunner.toml")],
                       check=True, capture_output=True)
        cli.append((time.perf_counter() - began) * 1000)
    timings.sort()
    return {"memory": memory, "entries": size, "runs": runs, "mean_ms": round(statistics.mean(timings), 2), "p95_ms": round(timings[int(0.95 * len(timings))], 2),
            "cli_process_ms": round(statistics.median(cli), 1)}


def year_simulation(work: Path, days: int, memory: str) -> dict[str, float | str]:
    """Wall seconds to simulate *days* days of one agent (pulse-4h, evening, digest) with *memory*."""
    config = load_config(_config(work / f"year-{memory}", ["motoko"], memory=memory))
    start = datetime(2026, 1, 1, tzinfo=config.timezone)
    began, cpu = time.perf_counter(), time.process_time()
    summary = simulate(config, ["motoko"], start, start + timedelta(days=days))[0]  # one agent: in this process
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    # The CPU seconds (all of this process's threads) move less than the wall time when other work shares the cores.
    return {"memory": memory, "days": days, "runs": summary.runs, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
            "runs_per_second": round(summary.runs / seconds, 1), "load_average": round(os.getloadavg()[0], 1), "peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (VmHWM), in MB: in a year's own process, the year's peak."""
    status = Path("/proc/self/status").read_text()
    return round(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024, 1)


def export_tree(revision: str, into: Path) -> Path:
    """The journal, runner and routines packages of git *revision*, extracted under *into*."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision, "journal", "runner", "routines"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def year_against_baseline(work: Path, days: int, revision: str, rounds: int) -> list[dict[str, Any]]:
    """The hybrid year by *revision*'s packages and by this tree's, in fresh processes taking turns."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    trees = {f"baseline {commit}": export_tree(commit, work / "baseline"), "this tree": REPO}
    results = []
    for round_ in range(rounds):
        for name, tree in list(trees.items())[:: 1 if round_ % 2 == 0 else -1]:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            spec = json.dumps({"work": str(work / f"year-{round_}-{name.split()[0]}"), "days": days})
            out = subprocess.run([sys.executable, __file__, "--year-child", spec], env=env, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.splitlines()[-1])
            assert Path(result.pop("package")).is_relative_to(tree), f"{name} did not run its own packages"
            results.append({"tree": name, **result})
    return results


def parallel_agents(work: Path, agents: int, days: int) -> dict[str, float]:
    """Simulate *agents* agents x *days* days with one process, then with worker processes; report the speed-up."""
    names = [f"agent{n:02d}" for n in range(agents)]
    results = {}
    for label, workers in (("one_process", 1), ("workers", os.cpu_count() or 1)):
        config = load_config(_config(work / f"fleet-{label}", names, root="./journals/{agent}"))
        start = datetime(2026, 3, 1, tzinfo=config.timezone)
        began = time.perf_counter()
        summaries = simulate(config, names, start, start + timedelta(days=days), workers=workers)
        results[label] = round(time.perf_counter() - began, 2)
        results["runs"] = sum(s.runs for s in summaries)
    return {"agents": agents, "days": days, "runs": results["runs"], "one_process_s": results["one_process"],
            "workers": os.cpu_count() or 1, "workers_s": results["workers"], "speedup": round(results["one_process"] / results["workers"], 2)}


def scheduler_idle_rss(work: Path) -> dict[str, float]:
    """Resident memory of `ghostrunner serve` once started and idle (ten agents, 30 jobs)."""
    path = _config(work / "serve", [f"agent{n}" for n in range(10)], grace="0s")
    process = subprocess.Popen(["ghostrunner", "serve", "--config", str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if json.loads(line).get("event") == "scheduler.started":
            break
    time.sleep(1.0)  # let it settle into its idle wait
    status = Path(f"/proc/{process.pid}/status").read_text()
    rss_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    return {"jobs": 30, "rss_mb": round(rss_kb / 1024, 1), "exit_code": process.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--memory-only", action="store_true", help="only the per-run and year figures, lexical and hybrid")
    parser.add_argument("--baseline", help="git revision whose packages also simulate the hybrid year, taking turns with this tree's")
    parser.add_argument("--rounds", type=int, default=1, help="--baseline: years per tree (default 1)")
    parser.add_argument("--year-only", action="store_true", help="--baseline: only the hybrid year of both trees")
    parser.add_argument("--year-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    configure_logging(level="warning")
    if args.year_only and not args.baseline:
        parser.error("--year-only compares the hybrid year with --baseline REV's: name the revision")
    if args.year_child:
        import journal

        spec = json.loads(args.year_child)
        print(json.dumps({**year_simulation(Path(spec["work"]), spec["days"], "hybrid"), "package": str(Path(journal.__file__).parent.parent)}))
        return
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        memories = ("lexical", "hybrid")
        report: dict[str, Any] = {"per_run_overhead": [], "year_simulation": []}
        if not args.year_only:
            report["per_run_overhead"] = [per_run_overhead(work, 500 if args.quick else 5000, 50 if args.quick else 200, memory) for memory in memories]
            report["year_simulation"] = [year_simulation(work, 30 if args.quick else 365, memory) for memory in memories]
        if args.baseline:
            report["year_against_baseline"] = year_against_baseline(work, 30 if args.quick else 365, args.baseline, args.rounds)
        if not args.memory_only and not args.year_only:
            report["parallel_agents"] = parallel_agents(work, 6 if args.quick else 50, 5 if args.quick else 30)
            report["scheduler_idle"] = scheduler_idle_rss(work)
    print(json.dumps(report, indent=2))
    lines = [f"per run, {run['memory']} memory: {run['mean_ms']} ms mean, {run['p95_ms']} ms p95 at {run['entries']} entries (target <= 50 ms); "
             f"as a `ghostrunner run` process: {run['cli_process_ms']} ms" for run in report["per_run_overhead"]]
    lines += [f"{year['days']}-day simulation, {year['memory']} memory: {year['runs']} runs in {year['seconds']} s (target <= 60 s), "
              f"{year['cpu_seconds']} s of CPU, load average {year['load_average']}"
              for year in report["year_simulation"]]
    lines += [f"{year['days']}-day hybrid simulation, {year['tree']}: {year['runs']} runs in {year['seconds']} s, {year['cpu_seconds']} s of CPU, "
              f"peak RSS {year['peak_rss_mb']} MB, load average {year['load_average']}" for year in report.get("year_against_baseline", [])]
    if not args.memory_only and not args.year_only:
        fleet = report["parallel_agents"]
        lines.append(f"{fleet['agents']} agents x {fleet['days']} days: {fleet['one_process_s']} s in one process, "
                     f"{fleet['workers_s']} s with {fleet['workers']} workers (speed-up {fleet['speedup']}x)")
        lines.append(f"scheduler idle RSS: {report['scheduler_idle']['rss_mb']} MB (target <= 120 MB)")
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    main()
