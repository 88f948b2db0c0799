"""Budgets benchmark (not a test): a year of three agents under cost_per_day against a usage-reporting server on 127.0.0.1.

Run:  python bench/bench_budgets.py [--days 365] [--checks 1000]

Each slot of each agent (a pulse every four hours and an evening, three
agents) runs in order through ``run_at``, the code path of ``ghostrunner
run``, against a chat-completions server on the loopback that reports a
``usage`` that varies from call to call. Every agent has a model and price of
its own and a ``cost_per_day`` that lets about half its runs through. It
checks, and prints:

* the cap is never exceeded on any day by more than one run's cost;
* every slot skipped for budget is recorded (``skipped``, reason ``budget``);
* the server is never called for a skipped slot (the requests it got are
  exactly the admitted runs', by model, routine and slot);
* the ledger's cost equals the sum of the runs' costs.

Then it times the budget check (``Budgets.admit`` and ``settle`` back to
back, with nothing between them: so the admission's sync of the ledger, which
a run covers with its own work, is waited for whole by ``settle``) with the
ledger holding at least 10,000 recorded runs.

With ``--base TREE`` (a checkout of the code to compare with, e.g. a
``git worktree`` of main) it then measures, in turns, in processes of that
tree and of this one, what a run waits for at the budget step on its path:
real ``run_at`` runs of an agent with room in its budget, 10,000 runs in the
ledger, each timing its ``Budgets.admit`` and its wait for the reservation to
be on the disk before its backend is asked (``Admission.durable``, where the
tree has it). It prints p50 / p95 per tree and the load average.

    python bench/bench_budgets.py --days 0 --base ../main-tree   # the wait alone

Targets: the four checks hold; the budget step costs a run at most 1 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# The code measured: this checkout, or the one named in BENCH_TREE (the processes --base starts for each tree).
sys.path.insert(0, os.environ.get("BENCH_TREE") or str(Path(__file__).resolve().parents[1]))

import runner
from runner import configure_logging, load_config
from runner.cron.slots import cron_trigger, fire_times
from runner.run.budgets import Admission, Budgets
from runner.run.contract import RunIdentity
from runner.run.engine import run_at

REPO = Path(__file__).resolve().parents[1]
TREE = Path(runner.__file__).resolve().parents[1]  # where the measured code was imported from
PERSONA = REPO / "examples" / "agents" / "motoko.toml"
AGENTS = ("a1", "a2", "a3")
PRICE = (3.0, 15.0)  # per million tokens in, out
CAP = 0.03  # a day's cost per agent: about half of its seven runs


class UsageServer:
    """A chat-completions server answering a valid entry with a usage that varies, recording (model, user message) per request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][1]["content"]
                server.requests.append((body["model"], user))
                n = len(server.requests)
                usage = {"prompt_tokens": 800 + (n * 37) % 900, "completion_tokens": 100 + (n * 53) % 400}
                content = json.dumps({"voice": f"Reflection {n}.", "theme": "the harbour"})
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}], "usage": usage}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _config(directory: Path, url: str, cap: float = CAP) -> Path:
    shutil.copy(PERSONA, directory / "motoko.toml")
    text = '[runner]\njournal_root = "./journal"\ntimezone = "UTC"\n'
    for agent in AGENTS:
        text += (
            f'[agents.{agent}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening"]\n'
            f'backend = {{type = "openai", base_url = "{url}", model = "m-{agent}", attempts = 1}}\n'
            f'[prices."m-{agent}"]\ninput = {PRICE[0]}\noutput = {PRICE[1]}\n'
        )
    text += "[budgets]\n" + "".join(f"[budgets.agents.{agent}]\ncost_per_day = {cap}\n" for agent in AGENTS)
    path = directory / "ghostrunner.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _year(path: Path, days: int, server: UsageServer) -> dict[str, Any]:
    config = load_config(path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=days)
    fires = sorted(
        (fire, agent, routine)
        for agent in AGENTS
        for routine in ("pulse-4h", "evening")
        for fire in fire_times(cron_trigger(config.routines[routine].schedule, config.timezone), start, end)
    )
    results = []
    began = time.perf_counter()
    for fire, agent, routine in fires:
        results.append((agent, run_at(config, agent, routine, at=fire, run_timeout=60.0)))
    seconds = time.perf_counter() - began
    per_day: dict[tuple[str, str], list[float]] = defaultdict(list)
    skipped = asked = 0
    expected_requests = []
    for agent, result in results:
        if result.reason == "budget":
            skipped += 1
            assert result.outcome == "skipped", result
            assert result.attempts == 0, result
            continue
        assert result.outcome == "appended", result
        asked += 1
        per_day[(agent, result.scheduled[:10])].append(result.cost or 0.0)
        expected_requests.append((f"m-{agent}", result.routine, result.slot))
    most_run = max(cost for costs in per_day.values() for cost in costs)
    over = max(sum(costs) - CAP for costs in per_day.values())
    seen = sorted((model, *re.match(r"Routine: (\S+) .*?, slot (\S+),", user).groups()) for model, user in server.requests)  # type: ignore[union-attr]
    ledger_cost = Budgets(config).used()[1]
    run_cost = sum(result.cost or 0.0 for _, result in results)
    return {
        "days": days,
        "runs": len(results),
        "asked": asked,
        "skipped_for_budget": skipped,
        "seconds": round(seconds, 1),
        "most_over_cap_in_a_day": round(over, 6),
        "most_one_run_cost": round(most_run, 6),
        "cap_held": over <= most_run,
        "server_calls": len(server.requests),
        "server_called_only_for_admitted_runs": seen == sorted(expected_requests),
        "ledger_cost": round(ledger_cost, 6),
        "sum_of_run_costs": round(run_cost, 6),
        "ledger_equals_sum": abs(ledger_cost - run_cost) < 1e-6,
    }


def _fill(budgets: Budgets) -> tuple[int, int]:
    """Fill the ledger with recorded runs (in 2030 and after) up to 10,000; the rows it holds and how many were added."""
    filled = 0
    with budgets.writing() as db:
        (rows,) = db.execute("SELECT count(*) FROM runs").fetchone()
        day = datetime(2030, 1, 1, tzinfo=UTC)
        for n in range(max(0, 10_000 - rows)):
            at = day + timedelta(hours=4 * n)
            db.execute(
                "INSERT INTO runs VALUES (?, ?, 'a1', 'pulse-4h', ?, 1000, 0.001, 0)", (f"fill-{n}", f"a1:pulse-4h:{n}", at.timestamp())
            )
            filled += 1
        (rows,) = db.execute("SELECT count(*) FROM runs").fetchone()
    return rows, filled


def _percentiles(timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    return {"median_ms": round(statistics.median(ordered), 3), "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3)}


def _checks(path: Path, count: int) -> dict[str, Any]:
    """Time admit + settle with the ledger holding at least 10,000 runs (filled with recorded runs first if it has fewer)."""
    config = load_config(path)
    budgets = Budgets(config)
    routine = config.routines["pulse-4h"]
    rows, filled = _fill(budgets)
    timings = []
    base = datetime(2035, 1, 1, tzinfo=UTC)
    for n in range(count):
        scheduled = base + timedelta(days=n)  # a fresh day each: every check sums a window and admits
        identity = RunIdentity.of("a2", routine, scheduled, config.timezone)
        began = time.perf_counter()
        admission = budgets.admit(identity, scheduled)
        if isinstance(admission, Admission):
            admission.settle(_FakeResult())  # type: ignore[arg-type]
        timings.append((time.perf_counter() - began) * 1000)
    return {"ledger_runs": rows, "filled": filled, "checks": count, **_percentiles(timings)}


def _waits(directory: Path, runs: int, warmup: int) -> dict[str, Any]:
    """What each of *runs* real runs (after *warmup* unmeasured ones) waits for at its budget step, 10,000 runs in the ledger.

    The wait is the run's ``Budgets.admit`` plus, where the tree has it, its ``Admission.durable`` (the wait for
    the reservation's sync just before the backend call); wall time, and the CPU time of the run's thread in them.
    """
    server = UsageServer()
    path = _config(directory, server.url, cap=1e9)  # room for every run: each is admitted and asks the server
    config = load_config(path)
    rows, _ = _fill(Budgets(config))
    waits: list[float] = []
    cpu: list[float] = []
    sync_waits: list[float] = []  # the part of each wait spent in Admission.durable (0 where the tree has none)

    def timed(method: Any, *, adds: bool) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                wall, used = (time.perf_counter() - began) * 1000, (time.thread_time() - began_cpu) * 1000
                if adds:
                    waits[-1] += wall
                    cpu[-1] += used
                    sync_waits[-1] += wall
                else:
                    waits.append(wall)
                    cpu.append(used)
                    sync_waits.append(0.0)

        return wrapper

    Budgets.admit = timed(Budgets.admit, adds=False)  # type: ignore[method-assign]
    has_durable = hasattr(Admission, "durable")
    if has_durable:
        Admission.durable = timed(Admission.durable, adds=True)  # type: ignore[attr-defined]
    base = datetime(2035, 1, 1, tzinfo=UTC)
    for n in range(warmup + runs):
        result = run_at(config, "a1", "pulse-4h", at=base + timedelta(hours=4 * n), run_timeout=60.0)
        assert result.outcome == "appended", result
    server.httpd.shutdown()
    assert len(server.requests) == warmup + runs
    return {
        "tree": str(TREE),
        "ledger_runs": rows,
        "waits_ms": waits[warmup:],
        "cpu_ms": cpu[warmup:],
        "sync_waits_ms": sync_waits[warmup:],
        "waits_for_sync": has_durable,
    }


def _compare(base: Path, rounds: int, runs: int) -> dict[str, Any]:
    """Run :func:`_waits` in processes of *base* and of this tree, in turns, *rounds* times each; p50 / p95 per tree."""
    load_before = os.getloadavg()
    found: dict[str, dict[str, list[float]]] = {"base": defaultdict(list), "this": defaultdict(list)}
    for _ in range(rounds):
        for name, tree in (("base", base), ("this", Path(__file__).resolve().parents[1])):
            done = subprocess.run(
                [sys.executable, __file__, "--wait-only", "--runs", str(runs)],
                env={**os.environ, "BENCH_TREE": str(tree)},
                check=True,
                capture_output=True,
                text=True,
            )
            measured = json.loads(done.stdout)
            found[name]["waits_ms"] += measured["waits_ms"]
            found[name]["cpu_ms"] += measured["cpu_ms"]
            found[name]["sync_waits_ms"] += measured["sync_waits_ms"]
            found[name]["tree"] = [measured["tree"]]  # type: ignore[list-item]
    return {
        "load_average_before": [round(load, 2) for load in load_before],
        "load_average_after": [round(load, 2) for load in os.getloadavg()],
        **{
            name: {
                "tree": values["tree"][0],
                "runs": len(values["waits_ms"]),
                "wait": _percentiles(values["waits_ms"]),
                "cpu": _percentiles(values["cpu_ms"]),
                "of_which_waiting_for_the_sync": _percentiles(values["sync_waits_ms"]),
            }
            for name, values in found.items()
        },
    }


class _FakeResult:
    """What settle reads of a run's result: one backend call that used 1,000 tokens."""

    attempts = 1
    tokens = {"in": 800, "out": 200}  # noqa: RUF012 - read only
    cost = 0.0054


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365, help="days of the simulated year (0: none)")
    parser.add_argument("--checks", type=int, default=1000, help="admit + settle pairs timed (0: none)")
    parser.add_argument("--base", type=Path, help="a checkout to compare the run's wait at the budget step with")
    parser.add_argument("--rounds", type=int, default=4, help="turns of each tree with --base")
    parser.add_argument("--runs", type=int, default=50, help="runs measured in each turn with --base")
    parser.add_argument("--wait-only", action="store_true", help=argparse.SUPPRESS)  # one turn of --base, in BENCH_TREE
    args = parser.parse_args()
    configure_logging(json=True, level="error", stream=sys.stderr)
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        if args.wait_only:
            print(json.dumps(_waits(directory, args.runs, warmup=10)))
            return
        if args.days:
            server = UsageServer()
            path = _config(directory, server.url)
            year = _year(path, args.days, server)
            print(json.dumps({"year": year}, indent=2), flush=True)
            server.httpd.shutdown()
            if args.checks:
                print(json.dumps({"budget_checks": _checks(path, args.checks)}, indent=2), flush=True)
    if args.base is not None:
        print(json.dumps({"budget_step_wait": _compare(args.base.resolve(), args.rounds, args.runs)}, indent=2))


if __name__ == "__main__":
    main()
