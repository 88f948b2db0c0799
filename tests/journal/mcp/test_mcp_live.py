"""``ghostjournal mcp`` alongside other processes: their appends seen live, exactly-once under a race, SIGTERM, the raw wire, --nn.

Races are real: the test holds the journal's writer lock while two servers and
three runner processes line up behind it, then lets them all go at once.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from journal import Journal
from journal.encoding import load_encoder
from tests._support import SIMPLE_AGENT, entries, reap, with_key, write_config
from tests.journal._mcp import holding_write_lock, mcp_server


def _ghostjournal(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("ghostjournal") or "ghostjournal", *args], input=stdin, capture_output=True, text=True, check=False, timeout=60)


def test_an_append_by_another_process_is_seen_by_the_next_search(tmp_path: Path) -> None:
    """An entry that `ghostjournal append` writes while the server runs is found by the server's next search, no restart."""
    root = tmp_path / "journal"
    Journal(root).close()
    with mcp_server(root, "--agent", "motoko") as server:
        assert server.ok("journal_search", query="lighthouse keeper")["hits"] == []
        payload = {"kind": "note", "agent": "motoko", "theme": "lighthouse", "voice": "Met the lighthouse keeper at dusk."}
        written = _ghostjournal("--root", str(root), "append", stdin=json.dumps(payload))
        assert written.returncode == 0, written.stderr
        entry_id = json.loads(written.stdout)["entry"]["id"]
        assert [hit["entry_id"] for hit in server.ok("journal_search", query="lighthouse keeper")["hits"]] == [entry_id]
        assert server.ok("journal_list")["entries"][0]["id"] == entry_id


SLOTS = ("2026-09-05T08", "2026-09-05T12", "2026-09-05T16")


def _wait_for_text(path: Path, *texts: str, timeout: float = 60) -> None:
    """Until one of *texts* is in the file at *path*."""
    deadline = time.monotonic() + timeout
    text = " or ".join(texts)
    while not any(one in path.read_text("utf-8", errors="replace") for one in texts):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} did not appear in {path} within {timeout} s:\n{path.read_text('utf-8', errors='replace')[-2000:]}")
        time.sleep(0.02)


def test_two_servers_and_the_runner_store_each_client_key_once(tmp_path: Path) -> None:
    """Two servers and three `ghostrunner run` processes append the same three keys at once; each key is stored exactly once.

    Every party gets the same entry back for a key, and exactly one of them reports it appended. The three runs share
    their agent and routine, so two of them wait for the first one's slot lock (long enough never to end busy) and
    then race the servers in turn.
    """
    config = write_config(tmp_path, SIMPLE_AGENT, runner='slot_lock_wait = "2m"\n')
    root = tmp_path / "journal"
    Journal(root).close()
    keys = [f"motoko:pulse-4h:{slot}" for slot in SLOTS]
    runners: list[subprocess.Popen[str]] = []
    with mcp_server(root, "--agent", "motoko") as one, mcp_server(root) as two:
        try:
            with holding_write_lock(root):
                for slot in SLOTS:
                    log = tmp_path / f"runner-{slot}.stderr"
                    with log.open("w") as stream:
                        runners.append(subprocess.Popen(
                            [shutil.which("ghostrunner") or "ghostrunner", "run", "pulse-4h", "--agent", "motoko", "--at", f"{slot}:00",
                             "--config", str(config)], stdout=subprocess.PIPE, stderr=stream, text=True,
                        ))
                calls = [
                    (server, key, server.call_soon("journal_append", {
                        "kind": "pulse", "agent": "motoko", "theme": f"from {name}", "voice": f"Written over MCP by {name} for {key}.",
                        "client_key": key,
                    }))
                    for name, server in (("one", one), ("two", two)) for key in keys
                ]
                for server in (one, two):
                    server.wait_for_event("mcp.tool.started", tool="journal_append")
                for slot in SLOTS:  # queued on the journal's writer lock, or on the first run's slot lock
                    _wait_for_text(tmp_path / f"runner-{slot}.stderr", '"run.started"', '"run.waiting"')
            # Released: every party now races for the lock.
            results: dict[str, list[tuple[str, str]]] = {key: [] for key in keys}
            for _server, key, future in calls:
                result = future.result(timeout=120)
                assert not result.is_error, result.content
                results[key].append((result.structured_content["outcome"], result.structured_content["entry"]["id"]))
            for runner in runners:
                out, _ = runner.communicate(timeout=120)
                assert runner.returncode == 0, out
                printed = json.loads(out)
                results[printed["client_key"]].append((printed["outcome"], printed["entry_id"]))
        finally:
            for runner in runners:
                reap(runner)
    for key in keys:
        stored = with_key(root, key)
        assert len(stored) == 1, key
        assert {entry_id for _, entry_id in results[key]} == {stored[0].id}
        assert sorted(outcome for outcome, _ in results[key]) == ["appended", "duplicate", "duplicate"]
    assert len(entries(root)) == len(keys)


def test_sigterm_during_a_call_lets_it_finish_and_exits_cleanly(tmp_path: Path) -> None:
    """SIGTERM while an append waits for the writer lock: the append completes, then the server exits 0 without a traceback."""
    root = tmp_path / "journal"
    Journal(root).close()
    with mcp_server(root, "--agent", "motoko") as server:
        with holding_write_lock(root):
            call = server.call_soon("journal_append", {"kind": "note", "theme": "late", "voice": "Written as the server stops.", "client_key": "k"})
            server.wait_for_event("mcp.tool.started", tool="journal_append")
            server.terminate()
            server.wait_for_event("mcp.stopping", reason="SIGTERM")
        assert server.exit_status() == 0
        with pytest.raises(MCPError):
            call.result(timeout=30)  # the connection closed before an answer; the append itself ran to its end
        events = server.events()
        assert [e["event"] for e in events[-3:]] == ["mcp.stopping", "mcp.tool.finished", "mcp.stopped"]
        assert events[-1]["reason"] == "SIGTERM" and events[-2]["outcome"] == "ok"
        assert "Traceback" not in server.stderr()
    with Journal(root) as journal:
        stored = journal.find_by_client_key("k")
        assert stored is not None and stored.voice == "Written as the server stops."
        assert [e.id for e in journal.list()] == [stored.id]
        assert journal.reindex() == 1


def _end(process: subprocess.Popen[bytes]) -> None:
    """Kill *process* if it still runs, wait for it and close its pipes (a pipe the server closed may refuse the flush)."""
    if process.poll() is None:
        process.kill()
    process.wait(10)
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(BrokenPipeError):
                pipe.close()


def _send(process: subprocess.Popen[bytes], line: bytes) -> None:
    assert process.stdin is not None
    process.stdin.write(line + b"\n")
    process.stdin.flush()


def _answer(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    message: dict[str, Any] = json.loads(process.stdout.readline())  # every stdout line must be one JSON-RPC message
    assert message["jsonrpc"] == "2.0"
    return message


def _call(number: int, arguments: str, tool: str = "journal_append") -> bytes:
    return (f'{{"jsonrpc":"2.0","id":{number},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}').encode()


def test_literal_nan_on_the_wire_and_sigterm_with_stdin_open(tmp_path: Path) -> None:
    """Raw JSON-RPC: NaN and Infinity literals are error results naming the field, the next call is answered, and SIGTERM
    ends an idle server (stdin still open) with exit 0."""
    root = tmp_path / "journal"
    Journal(root).close()
    errlog = tmp_path / "stderr"
    with errlog.open("w") as stream:
        process = subprocess.Popen([shutil.which("ghostjournal") or "ghostjournal", "--root", str(root), "mcp"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stream)
    try:
        _send(process, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
                       b'"clientInfo":{"name":"raw","version":"0"}}}')
        assert _answer(process)["result"]["serverInfo"]["name"] == "ghostjournal"
        _send(process, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        entry = '{"kind":"note","agent":"motoko","theme":"t","voice":"v",'
        _send(process, _call(2, entry + '"signals":{"novelty":NaN}}'))
        nan = _answer(process)["result"]
        assert nan["isError"] is True and "entry field 'signals.novelty'" in nan["content"][0]["text"] and "NaN" in nan["content"][0]["text"]
        _send(process, _call(3, entry + '"meta":{"x":[1,-Infinity]}}'))
        infinity = _answer(process)["result"]
        assert infinity["isError"] is True and "entry field 'meta.x[1]'" in infinity["content"][0]["text"]
        _send(process, b"this line is not JSON")
        _send(process, _call(4, '{"query":"anything"}', tool="journal_search"))
        answer = _answer(process)
        while "id" not in answer or answer["id"] != 4:  # a parse error may be reported first
            answer = _answer(process)
        assert answer["result"]["structuredContent"] == {"hits": []}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None and process.stdout.read() == b""
        events = [json.loads(line) for line in errlog.read_text().splitlines() if line.startswith("{")]
        assert events[-1] == {**events[-1], "event": "mcp.stopped", "reason": "SIGTERM"}
        assert "Traceback" not in errlog.read_text()
        assert entries(root) == []
    finally:
        _end(process)


def test_nn_server_ranks_by_meaning_with_one_warm_encoder(tmp_path: Path) -> None:
    """With --nn, hybrid search finds a paraphrase, ranks as the Journal API does with the same model, and embeds appends."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        for theme, voice in [("puppy", "We adopted a puppy today; she chewed my shoelaces."), ("budget", "Quarterly budget review ran long."),
                             ("garden", "Planted tomatoes along the south fence.")]:
            journal.append({"kind": "note", "agent": "motoko", "theme": theme, "voice": voice})
    with mcp_server(root, "--agent", "motoko", nn=True) as server:
        assert server.wait_for_event("mcp.started")["nn"] is True
        first = server.ok("journal_search", query="new canine companion", k=3)["hits"]
        assert first[0]["entry"]["theme"] == "puppy"
        stored = server.ok("journal_append", kind="note", theme="sailing", voice="Learned to tie a bowline on the boat.", client_key="s")
        found = server.ok("journal_search", query="knots aboard a yacht", k=1, mode="semantic")["hits"]
        assert [hit["entry_id"] for hit in found] == [stored["entry"]["id"]]
        with Journal(root, enable_nn=True, encoder=load_encoder()) as journal:
            expected = [hit.to_dict() for hit in journal.search("new canine companion", k=3, agent="motoko")]
        assert server.ok("journal_search", query="new canine companion", k=3)["hits"] == expected
        assert [e["event"] for e in server.events()].count("mcp.started") == 1
        # Below the relevance floor nothing is found by meaning alone; floor: false keeps every candidate.
        unrelated = "lattice gauge theory of quark confinement"
        assert server.ok("journal_search", query=unrelated, k=10)["hits"] == []
        assert len(server.ok("journal_search", query=unrelated, k=10, floor=False)["hits"]) == 4
        counts = [json.loads(server.ok("journal_context", query=unrelated, k=2, **extra)["text"].splitlines()[2])["matched"]
                  for extra in ({}, {"floor": False})]
        assert counts == [0, 2]
        assert "floor must be true or false" in server.error("journal_context", query=unrelated, floor="no")


def test_a_broken_stdout_ends_the_server_with_exit_74(tmp_path: Path) -> None:
    """The client closes its end of stdout: the next answer cannot be written, and the server exits 74 with one log line."""
    root = tmp_path / "journal"
    Journal(root).close()
    errlog = tmp_path / "stderr"
    with errlog.open("w") as stream:
        process = subprocess.Popen([shutil.which("ghostjournal") or "ghostjournal", "--root", str(root), "mcp"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stream)
    try:
        _send(process, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
                       b'"clientInfo":{"name":"raw","version":"0"}}}')
        assert _answer(process)["id"] == 1
        assert process.stdout is not None
        process.stdout.close()
        _send(process, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        _send(process, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        assert process.wait(timeout=30) == 74
        events = [json.loads(line) for line in errlog.read_text().splitlines() if line.startswith("{")]
        assert events[-1] == {**events[-1], "event": "mcp.stopped", "reason": "transport", "level": "error"}
        assert "Broken pipe" in events[-1]["error"]
    finally:
        _end(process)
