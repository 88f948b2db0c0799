"""``import``: idempotent, all or nothing about the stream, conflicts skipped never overwritten, a kill at any point finished by a rerun."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from journal import EntryValidationError, ImportStreamError, Journal
from journal.carry.importer import IMPORT_GROUP
from runner.run.simulate import simulate
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, entry_files, tree_digest, write_config
from tests.journal._fakes import FakeEncoder
from tests.journal._killer import IMPORT_KILLER
from tests.journal._readme import run_readme_block


def _payload(n: int, agent: str = "alice", **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "theme": f"harbour {n}", "voice": f"The harbour lights, evening {n}.",
            "ts": f"2026-09-{1 + n % 9:02d}T0{n % 3}:00:00Z", "client_key": f"{agent}:{n}", **extra}


def _exported(root: Path, count: int = 8, **kwargs: Any) -> bytes:
    with Journal(root) as journal:
        first = journal.append(_payload(0))
        for n in range(1, count):
            journal.append(_payload(n, signals={"continuity_refs": [first.id]}))
        out = io.BytesIO()
        journal.export(out, **kwargs)
    return out.getvalue()


def _cli(root: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ghostjournal", "--root", str(root), "import", "--json", *args], input=stdin, capture_output=True, check=False, timeout=120)


def _summary(done: subprocess.CompletedProcess[bytes]) -> dict[str, int]:
    document = json.loads(done.stdout)
    return {key: document[key] for key in ("appended", "duplicate", "conflict")}


def test_an_import_keeps_every_byte_and_a_second_one_stores_nothing(tmp_path: Path) -> None:
    """Into an empty journal the files are the source's byte for byte; the same stream again is all duplicates and changes nothing."""
    stream = _exported(tmp_path / "a")
    first = _cli(tmp_path / "b", "-", stdin=stream)
    assert first.returncode == 0, first.stderr
    assert _summary(first) == {"appended": 8, "duplicate": 0, "conflict": 0}
    assert entry_files(tmp_path / "b") == entry_files(tmp_path / "a")
    before = tree_digest(tmp_path / "b" / "entries")
    second = _cli(tmp_path / "b", "-", stdin=stream)
    assert second.returncode == 0 and _summary(second) == {"appended": 0, "duplicate": 8, "conflict": 0}
    assert tree_digest(tmp_path / "b" / "entries") == before


def test_an_id_or_key_held_with_other_bytes_is_a_conflict_never_overwritten(tmp_path: Path) -> None:
    """An entry whose id, or whose client_key, the journal holds with other bytes is listed as a conflict, skipped, and exit 4."""
    stream = _exported(tmp_path / "a", count=3)
    lines = stream.splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    with Journal(tmp_path / "b") as journal:
        journal.append({**first, "voice": "another text under the same id"})
        journal.append({**second, "id": "another-id"})  # the same client_key
    before = entry_files(tmp_path / "b")
    done = _cli(tmp_path / "b", "-", stdin=stream)
    assert done.returncode == 4 and b"clash with entries this journal holds" in done.stderr
    document = json.loads(done.stdout)
    assert _summary(done) == {"appended": 1, "duplicate": 0, "conflict": 2}
    assert [(c["line"], c["id"]) for c in document["conflicts"]] == [(1, first["id"]), (2, second["id"])]
    after = entry_files(tmp_path / "b")
    assert all(after[name] == digest for name, digest in before.items())  # nothing overwritten


def _bad_streams(stream: bytes, tmp_path: Path) -> dict[str, tuple[bytes | Path, int]]:
    lines = stream.splitlines(keepends=True)
    changed = lines[2].replace(b"evening", b"morning")
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.write(lines[0] + b'{"voice": "')
        handle.truncate(2**30)  # a sparse 1 GiB line: never read whole
    return {
        "changed": (b"".join([*lines[:2], changed, *lines[3:]]), 9),
        "truncated": (b"".join(lines[:-1]), 9),
        "cut mid-line": (b"".join(lines)[: len(stream) - 40], 9),
        "NUL": (b"".join([*lines[:3], b'{"a":"\x00"}\n', *lines[3:]]), 4),
        "deep nesting": (b"".join([*lines[:1], b"[" * 100_000 + b"]" * 100_000 + b"\n", *lines[1:]]), 2),
        "lone surrogate": (b"".join([*lines[:4], lines[4].replace(b"evening", b"\\ud800"), *lines[5:]]), 5),
        "a 1 GiB line": (huge, 2),
    }


@pytest.mark.parametrize("kind", ["changed", "truncated", "cut mid-line", "NUL", "deep nesting", "lone surrogate", "a 1 GiB line"])
def test_a_bad_stream_imports_nothing_and_names_the_line(tmp_path: Path, kind: str) -> None:
    """A changed, truncated or hostile stream: exit 65, one line naming the line, no entry stored; --partial stores the good lines."""
    stream = _exported(tmp_path / "a")
    bad, line = _bad_streams(stream, tmp_path)[kind]
    Journal(tmp_path / "b").close()
    args = (str(bad),) if isinstance(bad, Path) else ("-",)
    stdin = b"" if isinstance(bad, Path) else bad
    done = _cli(tmp_path / "b", *args, stdin=stdin)
    assert done.returncode == 65, done.stderr
    assert done.stderr.decode().startswith(f"ghostjournal: error: import stream line {line}: ") and done.stderr.count(b"\n") == 1
    assert b"nothing was imported (pass --partial" in done.stderr
    assert entry_files(tmp_path / "b") == {}
    partial = _cli(tmp_path / "b", *args, "--partial", stdin=stdin)
    assert partial.returncode == 0, partial.stderr
    document = json.loads(partial.stdout)
    assert document["bad_lines"] and document["bad_lines"][0]["line"] == line
    assert document["appended"] == len(entry_files(tmp_path / "b")) > 0


def test_an_agent_map_renames_and_an_invalid_name_is_refused_before_reading(tmp_path: Path) -> None:
    """--agent-map alice=carol stores carol's entries; a name that is no agent name is a usage error (exit 2) and nothing is stored."""
    stream = _exported(tmp_path / "a", count=3)
    refused = _cli(tmp_path / "b", "-", "--agent-map", "alice=no spaces", stdin=stream)
    assert refused.returncode == 2 and b"--agent-map" in refused.stderr and b'"no spaces"' in refused.stderr
    assert not (tmp_path / "b").exists()
    done = _cli(tmp_path / "b", "-", "--agent-map", "alice=carol", stdin=stream)
    assert done.returncode == 0, done.stderr
    with Journal(tmp_path / "b") as journal:
        assert {e.agent for e in journal.list(limit=10)} == {"carol"}
        with pytest.raises(EntryValidationError, match="agent-map"):
            journal.import_stream(io.BytesIO(stream), agent_map={"alice": "../x"})


def test_an_import_with_agent_stores_that_agents_entries_alone(tmp_path: Path) -> None:
    """``ghostjournal --agent alice import`` (alice's own journal in the state directory) of a stream that also holds bob's
    entries stores alice's alone and counts bob's as left out, as --agent keeps every command to that agent's entries; with
    --agent-map, the agent is the name the entries are stored under; the Python import takes the same ``agent=``."""
    with Journal(tmp_path / "both") as journal:
        for n in range(3):
            journal.append(_payload(n, agent="alice"))
            journal.append(_payload(n, agent="bob"))
        out = io.BytesIO()
        journal.export(out)
    stream = out.getvalue()
    state = tmp_path / "state"
    done = subprocess.run(
        ["ghostjournal", "--agent", "alice", "import", "-", "--json"],
        input=stream, capture_output=True, check=False, timeout=120,
        env={**{k: v for k, v in os.environ.items() if k != "GHOSTJOURNAL_ROOT"}, "XDG_STATE_HOME": str(state)},
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["appended"], document["agent"], document["other_agents"], document["lines"]) == (3, "alice", 3, 6)
    with Journal(state / "ghostjournal" / "alice", create=False) as journal:
        assert sorted(e.client_key or "" for e in journal.list(limit=10)) == ["alice:0", "alice:1", "alice:2"]
    mapped = _cli(tmp_path / "mapped", "-", "--agent-map", "bob=carol", "--agent", "carol", stdin=stream)
    assert mapped.returncode == 0, mapped.stderr
    with Journal(tmp_path / "mapped") as journal:
        assert {e.agent for e in journal.list(limit=10)} == {"carol"}
        summary = journal.import_stream(io.BytesIO(stream), agent="alice")
        assert (summary.appended, summary.other_agents) == (3, 3)
        assert {e.agent for e in journal.list(limit=10)} == {"carol", "alice"}


def test_the_python_import_raises_for_a_bad_stream(tmp_path: Path) -> None:
    """Journal.import_stream raises ImportStreamError naming the line, as the command does."""
    stream = _exported(tmp_path / "a", count=2)
    with Journal(tmp_path / "b") as journal, pytest.raises(ImportStreamError, match=r"^import stream line 3: the stream has no manifest"):
        journal.import_stream(io.BytesIO(b"".join(stream.splitlines(keepends=True)[:-1])))


@pytest.mark.parametrize(("step", "after"), [("write_temp", 0), ("write_temp", 5), ("publish", 1), ("publish", 13), ("publish", 20)])
def test_an_import_killed_at_any_point_is_finished_exactly_by_a_rerun(tmp_path: Path, step: str, after: int) -> None:
    """SIGKILL before an entry is written or right after one is published: the rerun's summary counts exactly the stored entries as duplicates."""
    stream = _exported(tmp_path / "a", count=20)
    stream_file = tmp_path / "stream.jsonl"
    stream_file.write_bytes(stream)
    killer = tmp_path / "killer.py"
    killer.write_text(IMPORT_KILLER)
    killed = subprocess.run([sys.executable, str(killer), step, str(after), "--root", str(tmp_path / "b"), "import", str(stream_file)],
                            capture_output=True, check=False, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    stored = len(entry_files(tmp_path / "b"))
    # A name is given once a whole group's files are written: a kill among the writes leaves the groups before it.
    assert stored == (min(after, 20) if step == "publish" else after // IMPORT_GROUP * IMPORT_GROUP)
    rerun = _cli(tmp_path / "b", str(stream_file))
    assert rerun.returncode == 0, rerun.stderr
    assert _summary(rerun) == {"appended": 20 - stored, "duplicate": stored, "conflict": 0}
    assert entry_files(tmp_path / "b") == entry_files(tmp_path / "a")
    with Journal(tmp_path / "b") as journal:
        assert journal.verify().is_clean


@pytest.fixture(scope="module")
def three_groups(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A journal of two import groups and forty entries more, each continuing the first, and its export stream."""
    root = tmp_path_factory.mktemp("three-groups")
    stream = _exported(root / "a", count=2 * IMPORT_GROUP + 40)
    (root / "stream.jsonl").write_bytes(stream)
    return root / "a", root / "stream.jsonl"


@pytest.mark.parametrize(
    ("step", "after", "stored"),
    [
        ("write_temp", IMPORT_GROUP + 100, IMPORT_GROUP),  # among the second group's writes: the first group is stored
        ("sync_temp", 2, IMPORT_GROUP),  # the second group's files are on the disk, none named
        ("publish", IMPORT_GROUP + 100, IMPORT_GROUP + 100),  # a hundred of the second group's files named, its rows not committed
        ("sync_dirs", 2, 2 * IMPORT_GROUP),  # every name of the second group is on the disk, its rows not committed
    ],
)
def test_an_import_killed_inside_a_group_is_finished_exactly_by_a_rerun(
    tmp_path: Path, three_groups: tuple[Path, Path], step: str, after: int, stored: int
) -> None:
    """SIGKILL at each step of storing the second of three groups: what was named stays, the rest is lost whole, and the rerun's summary
    counts exactly what stayed as duplicates; the journal then holds the source's files byte for byte and verifies clean."""
    source, stream_file = three_groups
    total = 2 * IMPORT_GROUP + 40
    killer = tmp_path / "killer.py"
    killer.write_text(IMPORT_KILLER)
    killed = subprocess.run([sys.executable, str(killer), step, str(after), "--root", str(tmp_path / "b"), "import", str(stream_file)],
                            capture_output=True, check=False, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(entry_files(tmp_path / "b")) == stored
    assert set(entry_files(tmp_path / "b").items()) <= set(entry_files(source).items())  # each one whole, byte for byte
    rerun = _cli(tmp_path / "b", str(stream_file))
    assert rerun.returncode == 0, rerun.stderr
    assert _summary(rerun) == {"appended": total - stored, "duplicate": stored, "conflict": 0}
    assert entry_files(tmp_path / "b") == entry_files(source)
    with Journal(tmp_path / "b") as journal:
        report = journal.verify()
    assert report.is_clean and report.entries == total


@pytest.mark.long
def test_a_simulated_year_round_trips_with_equal_entries_and_equal_search_results(tmp_path: Path) -> None:
    """A runner-written year, exported, imported into an empty journal and verified: the same files, the same lexical and hybrid hits; again stores nothing."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    start = datetime(2025, 9, 1, tzinfo=config.timezone)
    simulate(config, ["motoko"], start, start + timedelta(days=365))
    source = config.agent("motoko").journal_root
    out = io.BytesIO()
    with Journal(source, enable_nn=True, encoder=FakeEncoder()) as journal:
        manifest = journal.export(out, agent="motoko")
        queries = ["what did I notice about light", "harbor rain", "what keeps returning?"]
        expected = {(q, mode): [(h.entry.id, round(h.score, 9)) for h in journal.search(q, k=8, agent="motoko", mode=mode)]
                    for q in queries for mode in ("lexical", "hybrid")}
    assert manifest.entries > 2500 and manifest.links_removed == []
    copy = tmp_path / "copy"
    with Journal(copy, enable_nn=True, encoder=FakeEncoder()) as journal:
        summary = journal.import_stream(io.BytesIO(out.getvalue()))
        assert (summary.appended, summary.duplicate, summary.conflict) == (manifest.entries, 0, 0)
        assert journal.verify().is_clean
        found = {(q, mode): [(h.entry.id, round(h.score, 9)) for h in journal.search(q, k=8, agent="motoko", mode=mode)]
                 for q in queries for mode in ("lexical", "hybrid")}
        again = journal.import_stream(io.BytesIO(out.getvalue()))
    assert entry_files(copy) == entry_files(source)
    assert found == expected and all(expected.values())
    assert (again.appended, again.duplicate, again.conflict) == (0, manifest.entries, 0)


def test_an_import_the_disk_clearly_cannot_hold_stores_nothing(tmp_path: Path) -> None:
    """The room an import needs is checked before anything is stored: a journal on a nearly full filesystem gets none of the stream."""
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    from tests.attack._faults import Mounts, fill

    mounts = Mounts()
    try:
        disk = mounts.tmpfs(size_kib=1024)
        Journal(disk / "b").close()
        fill(disk, leave_pages=8)
        done = _cli(disk / "b", "-", stdin=_exported(tmp_path / "a", count=20))
        assert done.returncode == 74, done.stderr
        assert done.stderr.decode().startswith(f"ghostjournal: error: cannot import the stream into {str(disk / 'b' / 'entries')!r}: no space left")
        assert entry_files(disk / "b") == {}
    finally:
        mounts.release()


def test_the_readme_import_commands_run_as_written(tmp_path: Path) -> None:
    """The import block of docs/ghostjournal.md: an export, an import, the same import storing nothing, and one under another agent's name."""
    with Journal(tmp_path / "journal") as journal:
        for n in range(3):
            journal.append(_payload(n, agent="motoko"))
    summaries = [json.loads(output) for output in run_readme_block("Bringing entries in: `ghostjournal import`", tmp_path, lines=4, page="docs/ghostjournal.md")]
    assert [(s["appended"], s["duplicate"]) for s in summaries[1:]] == [(3, 0), (0, 3), (3, 0)]
    with Journal(tmp_path / "renamed") as journal:
        assert {e.agent for e in journal.list()} == {"motoko-2"}


def _chain(root: Path) -> tuple[bytes, dict[str, str]]:
    """A stream of six entries: b and c continue a, d continues c, e continues nothing, f continues e; and their ids by letter."""
    ids: dict[str, str] = {}
    links = {"b": "a", "c": "a", "d": "c", "f": "e"}
    with Journal(root) as journal:
        for n, letter in enumerate("abcdef"):
            extra = {"signals": {"continuity_refs": [ids[links[letter]]]}} if letter in links else {}
            ids[letter] = journal.append({**_payload(n, theme=f"chain {letter}"), "ts": f"2026-09-01T0{n}:00:00Z", **extra}).id
        out = io.BytesIO()
        journal.export(out)
    return out.getvalue(), ids


def test_partial_leaves_out_what_continues_a_bad_line_and_so_on_in_turn(tmp_path: Path) -> None:
    """--partial dropping a's line leaves out b and c (they continue a) and d (it continues c), each listed with the link's field and, for d,
    the line it continues: stored, their links would dangle and verify would fail for good. e and f are stored, verify is clean, and a
    rerun stores nothing and lists the same lines."""
    stream, ids = _chain(tmp_path / "a")
    lines = stream.splitlines(keepends=True)
    damaged = b"".join([lines[0].replace(b"evening", b"\\ud800"), *lines[1:]])  # a's line: a lone surrogate
    done = _cli(tmp_path / "b", "-", "--partial", stdin=damaged)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    left_out = {bad["line"]: bad["reason"] for bad in document["bad_lines"] if bad["reason"].startswith("signals.")}
    assert [bad["line"] for bad in document["bad_lines"] if bad["line"] not in left_out] == [1, 7]  # a's line, and the manifest's hash
    unknown = "signals.continuity_refs[0] names no entry of agent 'alice' that this journal holds or this import brings in"
    assert left_out == {2: unknown, 3: unknown, 4: "signals.continuity_refs[0] links to the entry of line 3, which this import leaves out"}
    assert _summary(done) == {"appended": 2, "duplicate": 0, "conflict": 0}
    with Journal(tmp_path / "b") as journal:
        assert {entry.id for entry in journal.list(limit=10)} == {ids["e"], ids["f"]}
        assert journal.verify().is_clean
    rerun = _cli(tmp_path / "b", "-", "--partial", stdin=damaged)
    assert rerun.returncode == 0, rerun.stderr
    assert _summary(rerun) == {"appended": 0, "duplicate": 2, "conflict": 0}
    assert json.loads(rerun.stdout)["bad_lines"] == document["bad_lines"]
    with pytest.raises(ImportStreamError, match=r"^import stream line 1: "), Journal(tmp_path / "c") as journal:
        journal.import_stream(io.BytesIO(damaged))  # without partial the bad line still stops the import before anything is stored
    assert entry_files(tmp_path / "c") == {}


def test_a_link_outside_the_stream_is_kept_only_where_the_journal_holds_its_entry(tmp_path: Path) -> None:
    """An export --since after a lists b's and c's links to a under links_outside, a report and no licence: into an empty journal b, c
    and d (it continues c) are left out as links an append refuses, or nothing is imported without --partial; into a journal holding a,
    every entry is stored, as appends would store them."""
    _, ids = _chain(tmp_path / "a")
    with Journal(tmp_path / "a") as journal:
        out, a_only = io.BytesIO(), io.BytesIO()
        manifest = journal.export(out, since="2026-09-01T01:00:00Z")
        journal.export(a_only, until="2026-09-01T00:30:00Z")
    assert {(link["entry"], link["link"]) for link in manifest.links_outside} == {(ids["b"], ids["a"]), (ids["c"], ids["a"])}
    with Journal(tmp_path / "b") as journal:
        with pytest.raises(ImportStreamError, match=r"^import stream line 1: signals.continuity_refs\[0\] names no entry of agent 'alice'"):
            journal.import_stream(io.BytesIO(out.getvalue()))
        assert entry_files(tmp_path / "b") == {}
        summary = journal.import_stream(io.BytesIO(out.getvalue()), partial=True)
        assert [bad["line"] for bad in summary.bad_lines] == [1, 2, 3]
        assert {entry.id for entry in journal.list(limit=10)} == {ids["e"], ids["f"]}
        assert journal.verify().is_clean
    with Journal(tmp_path / "c") as journal:
        assert journal.import_stream(io.BytesIO(a_only.getvalue())).appended == 1
        summary = journal.import_stream(io.BytesIO(out.getvalue()))
        assert summary.appended == 5 and summary.bad_lines == []
        assert journal.verify().is_clean


def test_a_manifest_whose_key_is_written_with_escapes_is_still_the_manifest(tmp_path: Path) -> None:
    """A line is looked at as a manifest only if it could name the manifest's key, written plainly or with escapes: the same
    manifest with its key spelled in ``\\u`` escapes still ends the stream, and the entries are imported."""
    stream = _exported(tmp_path / "a", count=3)
    *entries, manifest = stream.splitlines(keepends=True)
    escaped = manifest.replace(b'"ghostjournal_export"', b'"\\u0067hostjournal\\u005fexport"')
    assert escaped != manifest and json.loads(escaped) == json.loads(manifest)
    with Journal(tmp_path / "b") as journal:
        summary = journal.import_stream(io.BytesIO(b"".join(entries) + escaped))
    assert (summary.appended, summary.bad_lines) == (3, [])
    assert entry_files(tmp_path / "b") == entry_files(tmp_path / "a")
