#!/usr/bin/env python3
"""Benchmark of ``ghostjournal mcp``: journal_search over stdio, lexical and hybrid, at 10,000 entries.

This is a benchmark, not a test: it prints figures. For each server (lexical,
then ``--nn``, where ``auto`` means hybrid) it prints the first call, then
calls per second and p50/p95 latency of sequential journal_search calls as the
MCP SDK's own stdio client sees them (a round trip: JSON-RPC framing both ways,
the worker thread, the search, and the client's check of the structured result
against the tool's output schema), next to the server's own time for the same
calls (from its ``mcp.tool.finished`` log lines) and to ``Journal.search`` in
this process over the same queries, all from the same run.

The entries' vectors are random unit vectors stored under the real model's
identity, as in ``bench_retrieval.py speed``: embedding 10,000 voices of
300-1,200 characters takes most of an hour on a loaded 2-core CPU and does not
change what a query costs. The server embeds every query with the real model.
``--real-vectors`` embeds the entries for real instead.

    python bench/bench_mcp.py                     # 10,000 entries, 300 queries per server
    python bench/bench_mcp.py --entries 2000 --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from bench_journal import Synth, fast_fill, header, pct
from mcp import ClientSession, StdioServerParameters, stdio_client

from journal import Journal
from journal.encoding import load_encoder


def _ms(values: Sequence[float], q: float) -> str:
    return f"{pct(values, q) * 1000:7.2f}"


async def _drive(root: Path, nn: bool, queries: list[tuple[str, str]], errlog: Path) -> tuple[float, list[float]]:
    command = shutil.which("ghostjournal") or "ghostjournal"
    params = StdioServerParameters(command=command, args=["--root", str(root), *(["--nn"] if nn else []), "mcp"], env=dict(os.environ))
    with errlog.open("w") as stream:
        async with stdio_client(params, errlog=stream) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            text, agent = queries[0]
            started = time.perf_counter()
            first = await session.call_tool("journal_search", {"query": text, "agent": agent, "k": 8})
            cold = time.perf_counter() - started
            assert not first.is_error, first.content
            durations = []
            for text, agent in queries[1:]:
                started = time.perf_counter()
                result = await session.call_tool("journal_search", {"query": text, "agent": agent, "k": 8})
                durations.append(time.perf_counter() - started)
                assert not result.is_error, result.content
    return cold, durations


def _server_times(errlog: Path) -> list[float]:
    times = []
    for line in errlog.read_text().splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "mcp.tool.finished" and event.get("tool") == "journal_search":
                times.append(event["duration_ms"] / 1000)
    return times[1:]  # the first call is reported on its own


def _in_process(root: Path, nn: bool, queries: list[tuple[str, str]]) -> list[float]:
    with Journal(root, enable_nn=nn, encoder=load_encoder() if nn else None) as journal:
        journal.search(queries[0][0], k=8, agent=queries[0][1])
        durations = []
        for text, agent in queries[1:]:
            started = time.perf_counter()
            journal.search(text, k=8, agent=agent)
            durations.append(time.perf_counter() - started)
    return durations


class _RandomDocuments:
    """An encoder that gives each entry a random unit vector under the real model's identity (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self._model = load_encoder()
        self.identity = self._model.identity
        self.dimension = self._model.dimension
        self._rng = np.random.default_rng(seed)

    def encode(self, texts: Sequence[str]) -> Any:
        vectors = self._rng.standard_normal((len(texts), self.dimension)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--real-vectors", action="store_true", help="embed every entry with the real model (slow)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        root = Path(tmp) / "journal"
        Journal(root).close()
        synth = Synth(seed=args.seed)
        fast_fill(root, synth, args.entries)
        with Journal(root) as journal:
            assert journal.reindex() == args.entries
        started = time.perf_counter()
        # Every entry gets its vector now, so no server pays for it in a call (an open embeds nothing; a ranking would).
        with Journal(root, enable_nn=True, encoder=None if args.real_vectors else _RandomDocuments(args.seed)) as journal:
            journal.embed()
        embed_s = time.perf_counter() - started
        vectors = "embedded by the model" if args.real_vectors else "random unit vectors under the model's identity"
        queries = [(text, agent) for text, agent, _ in synth.queries(args.queries + 1)]
        print(header(Path(tmp)))
        print(f"{args.entries:,} entries (vectors: {vectors}, stored in {embed_s:.0f} s), {args.queries} sequential journal_search "
              "calls, k=8, one agent per query, queries embedded by the model\n")
        print(f"{'server':<10} {'first call ms':>13} {'calls/s':>8} {'p50 ms':>7} {'p95 ms':>7} | {'server p50':>10} {'p95':>7} "
              f"| {'in-process p50':>14} {'p95':>7}")
        for nn in (False, True):
            errlog = Path(tmp) / f"mcp-{'nn' if nn else 'lexical'}.stderr"
            cold, durations = anyio.run(_drive, root, nn, queries, errlog)
            server = _server_times(errlog)
            local = _in_process(root, nn, queries)
            print(f"{'hybrid' if nn else 'lexical':<10} {cold * 1000:13.1f} {len(durations) / sum(durations):8.0f} {_ms(durations, 50)} "
                  f"{_ms(durations, 95)} | {_ms(server, 50):>10} {_ms(server, 95)} | {_ms(local, 50):>14} {_ms(local, 95)}")
        print(f"\nloadavg after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; mean of the last figure's calls "
              f"{statistics.mean(durations) * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
