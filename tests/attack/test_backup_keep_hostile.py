"""`ghostrunner backup --into PARENT --keep N` and the `[backup]` table, attacked as an operator's mistakes and a busy host would.

The promises (docs/runner.md "Backups on a schedule", docs/deploying.md "Backups on a timer"): a new dated
directory per run, `-2`, `-3` for runs within one second; only what backup made is removed, after a clean
backup; a failure leaves no target; a `dir` inside a journal is refused when the file is read; every
mistake is one line with its exit code, never a traceback.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.frame import claim_partial_directory
from runner.deploy.backup import MARKER, backup_deployment, backup_into, prune_backups
from runner.errors import ConfigError
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, ghostrunner, terminated_while_locked, tree_digest, write_config
from tests.attack._faults import AS_NOBODY, NOBODY, Mounts, fill
from tests.attack.hostile import hostile_json_bytes

AT = datetime(2026, 9, 5, 3, 30, tzinfo=UTC)
_FORK = multiprocessing.get_context("fork")


def _simulated(tmp_path: Path, body: str = "") -> Path:
    config = write_config(tmp_path, SIMPLE_AGENT + body)
    done = ghostrunner("--config", str(config), "simulate", "--agent", "motoko", "--days", "1", "--start", "2026-09-01", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return config


def _together(count: int, work: Any, *args: Any) -> list[Any]:
    """Run *work(*args)* in *count* forked processes released at one instant; what each returned, or its error as text."""
    barrier = _FORK.Barrier(count)
    results = _FORK.Queue()

    def child() -> None:
        barrier.wait()
        try:
            results.put(("ok", work(*args)))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts there was none
            results.put(("error", f"{type(exc).__name__}: {exc}"))

    processes = [_FORK.Process(target=child) for _ in range(count)]
    for process in processes:
        process.start()
    got = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    return got


def _backup_name(config_path: Path, parent: Path) -> str:
    return Path(backup_into(load_config(config_path), parent, now=AT).out).name


def test_two_backups_started_in_the_same_second_both_succeed_under_their_own_names(tmp_path: Path) -> None:
    """Two processes racing into one PARENT within one second: one gets the plain name, the other -2; both are whole and verified."""
    config = _simulated(tmp_path)
    parent = tmp_path / "backups"
    parent.mkdir()
    got = _together(2, _backup_name, config, parent)
    assert all(status == "ok" for status, _ in got), got
    assert sorted(name for _, name in got) == ["ghostrunner-backup-20260905T033000Z", "ghostrunner-backup-20260905T033000Z-2"]
    assert sorted(path.name for path in parent.iterdir()) == sorted(name for _, name in got)
    for _, name in got:
        assert json.loads((parent / name / MARKER).read_text())["ok"] is True


def _fake_backups(parent: Path, count: int) -> list[str]:
    names = [f"ghostrunner-backup-20260101T{hour:02d}{minute:02d}00Z" for hour in range(3) for minute in range(count // 3 + 1)][:count]
    for name in names:
        (parent / name / "journals").mkdir(parents=True)
        (parent / name / MARKER).write_text(json.dumps({"made_by": "ghostrunner backup", "ok": True}))
    return names


def test_two_prunes_at_once_remove_each_old_backup_once_and_neither_fails(tmp_path: Path) -> None:
    """Two --keep runs pruning one PARENT at the same moment: no error from either, each old backup removed by exactly one of them."""
    parent = tmp_path / "backups"
    names = _fake_backups(parent, 30)
    got = _together(2, prune_backups, parent, 1)
    assert all(status == "ok" for status, _ in got), got
    removed = [name for _, pruned in got for name in pruned]
    assert sorted(removed) == names[:-1]
    assert sorted(path.name for path in parent.iterdir()) == names[-1:]


def test_a_backup_dated_in_the_future_never_makes_keep_remove_the_backup_just_made(tmp_path: Path) -> None:
    """A backup made while the clock was years ahead stays the newest by name; --keep 1 keeps it and the one this run made, removing the rest."""
    config = load_config(_simulated(tmp_path))
    parent = tmp_path / "backups"
    old = Path(backup_into(config, parent, now=AT - timedelta(days=1)).out).name
    future = Path(backup_into(config, parent, now=AT + timedelta(days=3650)).out).name
    fresh = backup_into(config, parent, keep=1, now=AT)
    assert Path(fresh.out).is_dir(), "the run removed the backup it had just made"
    assert fresh.pruned == [old]
    assert sorted(path.name for path in parent.iterdir()) == sorted([future, Path(fresh.out).name])


def test_look_alikes_with_a_copied_marker_but_no_date_backup_could_write_are_left_alone(tmp_path: Path) -> None:
    """Dated names backup never writes (month 13, non-ASCII digits), each holding a copy of a real marker: neither counted nor removed."""
    config = load_config(_simulated(tmp_path))
    parent = tmp_path / "backups"
    first = Path(backup_into(config, parent, now=AT).out)
    foreign = ["ghostrunner-backup-20261301T000000Z", "ghostrunner-backup-\u0662\u0660\u0662\u0666\u0660\u0669\u0660\u0665T000000Z"]
    for name in foreign:
        shutil.copytree(first, parent / name)
    second = backup_into(config, parent, keep=1, now=AT + timedelta(days=1))
    assert second.pruned == [first.name]
    assert sorted(path.name for path in parent.iterdir()) == sorted([*foreign, Path(second.out).name])


def test_sigterm_during_a_backup_leaves_no_partial_copy(tmp_path: Path) -> None:
    """systemctl stop (SIGTERM) while the backup waits for the journal's lock: exit 143 and nothing left in PARENT, hidden or not."""
    config = _simulated(tmp_path)
    parent = tmp_path / "backups"
    parent.mkdir()
    done = terminated_while_locked(tmp_path / "journal", ["ghostrunner", "--config", str(config), "backup", "--into", str(parent)], parent,
                                   ".ghostrunner-backup-")
    assert done.returncode == 143, done.stderr
    assert list(parent.iterdir()) == []


def test_a_backup_dir_inside_a_journal_through_dot_dot_or_a_link_is_refused_when_read(tmp_path: Path) -> None:
    """`other/../journal/b` and `link/b` (link -> journal) are inside the journal: refused naming backup.dir, as `journal/b` is."""
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to("journal", target_is_directory=True)
    (tmp_path / "journal").mkdir()
    for directory in ("./other/../journal/b", "./link/b", "./link/.."):
        config = write_config(tmp_path, SIMPLE_AGENT + f'\n[backup]\ndir = "{directory}"\n')
        with pytest.raises(ConfigError) as raised:
            load_config(config)
        assert raised.value.key == "backup.dir" and "a directory outside the journal of agent 'motoko'" in str(raised.value), directory


def test_backup_into_a_parent_inside_the_journal_writes_nothing_there(tmp_path: Path) -> None:
    """`--into journal/../journal/b` on the command line: one line, exit 2, and no directory made inside the journal."""
    config = _simulated(tmp_path)
    before = tree_digest(tmp_path / "journal")
    names = sorted(os.listdir(tmp_path / "journal"))
    done = ghostrunner("--config", str(config), "backup", "--into", "other/../journal/b", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "inside" in done.stderr, done.stderr
    assert sorted(os.listdir(tmp_path / "journal")) == names
    assert tree_digest(tmp_path / "journal") == before


@pytest.mark.parametrize("kind", ["dangling-link", "fifo", "file", "below-a-file", "out-below-a-file", "out-missing-parent"])
def test_a_target_that_cannot_hold_backups_is_one_line(tmp_path: Path, kind: str) -> None:
    """--into a dangling link, a FIFO, a file or a path below a file; --out below a file or in a missing directory: one line, no traceback."""
    config = _simulated(tmp_path)
    made = {"dangling-link": lambda p: p.symlink_to(tmp_path / "nowhere"), "fifo": os.mkfifo, "file": lambda p: p.write_text("x")}
    target = tmp_path / "target"
    made.get(kind, lambda p: p.write_text("x") if kind != "out-missing-parent" else None)(target)
    option, where = ("--out", "target/new") if kind.startswith("out-") else ("--into", "target/new" if kind == "below-a-file" else "target")
    before = tree_digest(tmp_path)
    done = ghostrunner("--config", str(config), "backup", option, where, cwd=tmp_path)
    assert done.returncode in (2, 74), done.stderr
    assert done.stderr.startswith("ghostrunner: error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert tree_digest(tmp_path) == before


def test_a_backup_dir_that_is_a_symbolic_link_here_is_warned_about_at_render(tmp_path: Path) -> None:
    """backup --into refuses a PARENT that is a link, so a [backup] dir that is one would fail every timer run: render says so (as a
    warning, which --strict turns into a refusal)."""
    (tmp_path / "real-backups").mkdir()
    (tmp_path / "backups").symlink_to(tmp_path / "real-backups", target_is_directory=True)
    config = write_config(tmp_path, SIMPLE_AGENT + '\n[backup]\ndir = "./backups"\n')
    done = ghostrunner("systemd", "render", "--config", str(config), "--out", str(tmp_path / "units"), "--exec", "/usr/bin/true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"ghostrunner: warning: backup.dir {str(tmp_path / 'backups')!r} is a symbolic link" in done.stderr, done.stderr


_STATES = st.sampled_from(["clean", "failed", "no-marker", "link"])


@settings(max_examples=150, deadline=None)
@given(states=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 3), _STATES), min_size=1, max_size=12, unique_by=lambda t: t[:2]),
       keep=st.integers(1, 4), made_at=st.integers(0, 11))
def test_keep_removes_exactly_what_the_docs_say_whatever_parent_holds(states: list[tuple[int, int, str]], keep: int, made_at: int) -> None:
    """Any mix of clean and failed backups, look-alikes without a marker and links: the newest *keep* clean ones stay, so does every
    look-alike, link and the run's own, and nothing newer than the keep-th clean one goes; everything removed was an older backup."""
    with tempfile.TemporaryDirectory() as place:
        parent = Path(place) / "backups"
        parent.mkdir()
        kinds = {}
        for day, n, state in states:
            name = f"ghostrunner-backup-2026090{day}T033000Z" + (f"-{n}" if n > 1 else "")
            kinds[name] = state
            if state == "link":
                (parent / name).symlink_to(place, target_is_directory=True)
                continue
            (parent / name).mkdir()
            if state != "no-marker":
                (parent / name / MARKER).write_text(json.dumps({"made_by": "ghostrunner backup", "ok": state == "clean"}))
        backups = sorted((name for name, state in kinds.items() if state in ("clean", "failed")), key=_order, reverse=True)
        made = backups[made_at % len(backups)] if backups else None
        removed = prune_backups(parent, keep, made=made)
        left = {path.name for path in parent.iterdir()}
    newest_clean = [name for name in backups if kinds[name] == "clean"][:keep]
    assert set(removed) | left == set(kinds) and not set(removed) & left
    assert all(kinds[name] in ("clean", "failed") for name in removed)
    assert set(newest_clean) <= left and (made is None or made in left)
    if len(newest_clean) == keep:
        assert all(_order(name) < _order(newest_clean[-1]) for name in removed)
    else:
        assert removed == []
    assert removed == sorted(removed, key=_order)


def _order(name: str) -> tuple[str, int]:
    stamp, _, n = name.removeprefix("ghostrunner-backup-").partition("-")
    return stamp, int(n or 1)


def _prune_beside(marker: bytes) -> None:
    """An old dated directory whose marker holds *marker*: not ours, so neither counted nor removed, and the prune goes on."""
    with tempfile.TemporaryDirectory() as place:
        parent = Path(place)
        names = _fake_backups(parent, 2)
        (parent / "ghostrunner-backup-20000101T000000Z").mkdir()
        (parent / "ghostrunner-backup-20000101T000000Z" / MARKER).write_bytes(marker)
        assert prune_backups(parent, 1) == names[:1]
        assert sorted(path.name for path in parent.iterdir()) == ["ghostrunner-backup-20000101T000000Z", names[1]]


@pytest.mark.parametrize("marker", [b"[" * 200_000 + b"]" * 200_000, b'{"x":' * 100_000 + b"1" + b"}" * 100_000,
                                    b'{"made_by": "ghostrunner backup", "ok": NaN}', b'{"made_by": "ghostrunner backup", "ok": 1}',
                                    b"\xff\xfe", b"1" * 5000], ids=["deep-array", "deep-object", "nan", "ok-not-bool", "not-utf8", "huge-int"])
def test_a_look_alike_with_a_hostile_marker_is_left_alone_and_fails_no_prune(marker: bytes) -> None:
    """Nested 200,000 deep, NaN, a number for ok, bytes that are no UTF-8, a 5,000-digit number: no error, the look-alike stays."""
    _prune_beside(marker)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(marker=hostile_json_bytes())
def test_a_look_alike_with_any_hostile_json_marker_is_left_alone(marker: bytes) -> None:
    """Hypothesis's hostile JSON as the marker of a look-alike: the same."""
    _prune_beside(marker)


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="mounting a tmpfs needs root (CI runs as root, and never skips)")
@pytest.mark.parametrize("leave_pages", [0, 6])
def test_backup_into_a_full_disk_leaves_no_claimed_name_and_no_partial_copy(tmp_path: Path, leave_pages: int) -> None:
    """PARENT on a tmpfs with no room (or too little for the copy): exit 74 in one line, and PARENT holds what it held: neither the dated
    name the run claimed nor its hidden copy; an older backup there is untouched."""
    config = _simulated(tmp_path)
    mounts = Mounts()
    try:
        disk = mounts.tmpfs(size_kib=2048)
        parent = disk / "backups"
        old = Path(backup_into(load_config(config), parent, now=AT - timedelta(days=1)).out)
        before = tree_digest(parent)
        fill(disk, leave_pages=leave_pages)
        done = ghostrunner("--config", str(config), "backup", "--into", str(parent), "--keep", "1", cwd=tmp_path)
        assert done.returncode == 74, done.stderr
        assert done.stderr.startswith("ghostrunner: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert sorted(os.listdir(parent)) == [old.name] and tree_digest(parent) == before
    finally:
        mounts.release()


def _backup_out(config_path: Path, out: Path) -> str:
    return backup_deployment(load_config(config_path), out).out


def test_two_backups_racing_for_one_out_directory_give_one_backup_and_one_clear_refusal(tmp_path: Path) -> None:
    """Two --out runs naming the same new directory at the same moment: one backup, whole; the other refused as 'exists', never a traceback."""
    config = _simulated(tmp_path)
    got = _together(2, _backup_out, config, tmp_path / "copy")
    assert sorted(status for status, _ in got) == ["error", "ok"], got
    [error] = [text for status, text in got if status == "error"]
    assert error.startswith("OutputPathError: ") and "the backup directory exists" in error
    assert json.loads((tmp_path / "copy" / MARKER).read_text())["ok"] is True
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".copy.")] == []


def _claim_again_and_again(target: Path, times: int) -> int:
    """Claim a partial directory for *target* *times* over, each checked to be there (made, locked, not removed under it) and given back."""
    for _ in range(times):
        work, held = claim_partial_directory(target)
        try:
            assert work.is_dir(), f"{work} was removed while its claim was held"
            os.rmdir(work)
        finally:
            os.close(held)
    return times


def test_claims_racing_with_each_others_removal_of_leftovers_never_lose_their_directory(tmp_path: Path) -> None:
    """Each claim first removes the partial directories no process holds; four processes claiming for one target over and over: no
    claim's directory is ever removed between its making and its lock (the race lost one of two racing backups with ENOENT)."""
    got = _together(4, _claim_again_and_again, tmp_path / "copy", 300)
    assert got == [("ok", 300)] * 4, got
    assert os.listdir(tmp_path) == []


def _four_agents(tmp_path: Path) -> Path:
    """motoko with a journal of entries, and three agents whose journals no backup can read: a corrupt manifest, a file where the
    directory belongs, a path below that file."""
    _simulated(tmp_path)
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "manifest.json").write_text("{not json")
    (tmp_path / "a-file").write_text("no journal")
    body = "".join(f'\n[agents.{name}]\npersona = "motoko.toml"\njournal_root = "{root}"\nroutines = ["evening"]\n'
                   for name, root in [("corrupt", "./corrupt"), ("filed", "./a-file"), ("below", "./a-file/journal")])
    return write_config(tmp_path, SIMPLE_AGENT + body)


def test_one_unusable_journal_never_stops_the_backup_of_the_others(tmp_path: Path) -> None:
    """Three agents whose journals cannot be read: motoko is still backed up and verified; each of the three is one error line naming
    the agent and its journal's path; exit 4; the marker says which failed and is not ok, so --keep removes no older backup."""
    parent = tmp_path / "backups"
    old = Path(backup_into(load_config(_simulated(tmp_path)), parent, now=AT - timedelta(days=1)).out)
    config = _four_agents(tmp_path)
    done = ghostrunner("--config", str(config), "backup", "--into", str(parent), "--keep", "1", "--json", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    for name, root in [("corrupt", "corrupt"), ("filed", "a-file"), ("below", "a-file/journal")]:
        [line] = [line for line in lines if line.startswith(f"ghostrunner: error: agent {name!r}: ")]
        assert repr(str(tmp_path / root)) in line, line
    assert len(lines) == 4 and "not whole" in lines[-1], done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["pruned"] == []
    assert report["journals"]["motoko"]["verify"]["ok"] is True and report["journals"]["motoko"]["files"] > 0
    assert sorted(name for name, item in report["journals"].items() if "error" in item) == ["below", "corrupt", "filed"]
    made = Path(report["out"])
    assert json.loads((made / MARKER).read_text())["ok"] is False
    assert sorted(path.name for path in (made / "journals").iterdir()) == ["motoko"]
    assert sorted(path.name for path in parent.iterdir()) == sorted([old.name, made.name]), "--keep pruned after a backup that is not whole"


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="dropping to uid 65534 needs root (CI runs as root, and never skips)")
def test_a_journal_this_user_may_not_read_is_one_line_and_the_others_are_backed_up() -> None:
    """Run as uid 65534: its own journal is backed up; root's 0700 journal beside it is one line naming the agent and the path; exit 4."""
    base = Path(tempfile.mkdtemp(prefix="gj-backup-", dir="/tmp"))  # outside pytest's 0700 tmp_path, so that uid 65534 reaches it
    try:
        base.chmod(0o755)
        body = "".join(f'\n[agents.{name}]\npersona = "motoko.toml"\njournal_root = "./{name}"\nroutines = ["evening"]\n' for name in ("mine", "root"))
        config = write_config(base, body)
        for name in ("mine", "root"):
            with Journal(base / name) as journal:
                journal.append({"kind": "note", "agent": name, "theme": "rain", "voice": "Rain on the roof."})
        (base / "backups").mkdir()
        for path in [base / "mine", *(base / "mine").rglob("*"), base / "backups"]:
            os.chown(path, NOBODY, NOBODY)
        done = subprocess.run([sys.executable, str(AS_NOBODY), "ghostrunner", "--config", str(config), "backup", "--into", str(base / "backups"),
                               "--json"], capture_output=True, text=True, timeout=120, cwd=base, check=False)
        assert done.returncode == 4, done.stderr
        [line] = [line for line in done.stderr.splitlines() if line.startswith("ghostrunner: error: agent 'root': ")]
        assert repr(str(base / "root")) in line and "Traceback" not in done.stderr, done.stderr
        report = json.loads(done.stdout)
        assert report["journals"]["mine"]["verify"]["ok"] is True and report["journals"]["mine"]["files"] == 1
        assert "error" in report["journals"]["root"]
    finally:
        shutil.rmtree(base)


#: ``ghostrunner ARGS...`` killed with SIGKILL as it first calls the function named by argv[1] (``module:attribute``, in runner.deploy.backup).
_KILLED_AT = """
import os, signal, sys
import runner.deploy.backup as backup
target, name = sys.argv[1].split(":")
owner = backup if target == "backup" else getattr(backup, target)
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
setattr(owner, name, killed)
from runner.cli.cli import main
sys.argv = ["ghostrunner", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize("point", ["Journal:backup", "backup:replace_durably", "shutil:rmtree"])
def test_a_backup_killed_at_any_point_leaves_nothing_the_next_run_keeps_or_counts(tmp_path: Path, point: str) -> None:
    """kill -9 as the journals are about to be copied, as the marker is about to be written, or midway through pruning: the next
    `backup --keep 2` removes the hidden partial copy, the empty dated directory the killed run claimed and the half-removed backup,
    and keeps the newest two real backups (an empty claimed name taken for one would have an older good backup pruned in its place)."""
    config = _simulated(tmp_path)
    parent = tmp_path / "backups"
    olds = [Path(backup_into(load_config(config), parent, now=AT - timedelta(days=days)).out).name for days in (3, 2, 1)]
    killed = subprocess.run([sys.executable, "-c", _KILLED_AT, point, "--config", str(config), "backup", "--into", str(parent), "--keep", "2"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert killed.returncode == -9, killed.stderr
    left = sorted(set(os.listdir(parent)) - set(olds))
    assert left, "the kill left nothing: the point was not reached"
    done = ghostrunner("--config", str(config), "backup", "--into", str(parent), "--keep", "2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    made = Path(json.loads(done.stdout)["out"]).name
    survivors = [name for name in olds if (parent / name / MARKER).is_file()]
    assert sorted(os.listdir(parent)) == sorted([survivors[-1], made]), left
    assert json.loads((parent / survivors[-1] / MARKER).read_text())["ok"] is True
