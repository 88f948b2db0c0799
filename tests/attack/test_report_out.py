"""Where the commands write what they are told to: both reports' and the export's --out, backups, render, download-model.

The kernel reads ``reports/`` as a directory and would refuse to create a file by that name; the report must
not write a file called ``reports`` instead, nor replace ``page.html`` when told ``page.html/.``. No output
lands inside a journal (its entry files, manifest, index or entries directory, reached by a link or ``..``),
and a file that is no earlier output of the same kind is replaced only with --force.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from journal import Journal
from journal.errors import UnsafePathError
from journal.frame.outfile import write_output
from journal.pages.report import JOURNAL_REPORT
from tests._support import tree_digest, write_config
from tests.attack._faults import AS_NOBODY, NOBODY
from tests.runner._runlogs import FLEET, NOW, run_log


@pytest.fixture(scope="module")
def journal_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("out") / "journal"
    with Journal(root) as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "harbour", "voice": "The tide.", "ts": "2026-08-01T09:00:00+00:00"})
    return root


@pytest.mark.parametrize("name", ["reports/", "reports//", "reports/."])
def test_a_missing_directory_named_with_its_slash_is_refused_and_no_file_takes_its_name(journal_root: Path, tmp_path: Path, name: str) -> None:
    done = subprocess.run(["ghostjournal", "--root", str(journal_root), "report", "--agent", "motoko", "--out", name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False, env={**os.environ, "TZ": "UTC"})
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith(f"ghostjournal: error: refused {name!r}: ") and "names a directory" in line
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_as_a_directory_is_left_as_it_was(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_bytes(b"the old page")
    for name in (f"{page}/", f"{page}/.", f"{tmp_path}/.."):
        with pytest.raises(UnsafePathError, match="names a directory"):
            write_output(name, b"new", kind=JOURNAL_REPORT)
    assert page.read_bytes() == b"the old page"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["page.html"]


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="becoming the unprivileged user 65534 needs root (CI runs as root, and never skips)")
def test_an_output_directory_this_user_may_not_write_is_named_with_a_fix_about_it_not_the_journal() -> None:
    """The journal's owner writing the page where it may not: the fix is about that directory, the journal has no part in it."""
    with tempfile.TemporaryDirectory() as base:  # pytest's own temporary directories are root's alone (0700)
        os.chmod(base, 0o755)  # noqa: S103 - the unprivileged user must reach the journal and the directory beside it
        root = Path(base) / "journal"
        with Journal(root) as journal:
            journal.append({"kind": "note", "agent": "motoko", "theme": "harbour", "voice": "The tide.", "ts": "2026-08-01T09:00:00+00:00"})
        for directory, _, files in os.walk(root):
            for name in [directory, *(os.path.join(directory, file) for file in files)]:
                os.chown(name, NOBODY, NOBODY)
        shared = Path(base) / "shared"
        shared.mkdir(mode=0o755)  # root's: 65534 may read it, not write into it
        done = subprocess.run([sys.executable, str(AS_NOBODY), "ghostjournal", "--root", str(root), "report", "--agent", "motoko",
                               "--out", str(shared / "motoko.html")], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "TZ": "UTC"})
        assert done.returncode == 77, done.stderr
        expected = (f"ghostjournal: error: cannot write the report into {str(shared)!r}: permission denied (EACCES); "
                    "name a file in a directory this user may write, or give it write access to that one")
        assert done.stderr.splitlines() == [expected]
        assert list(shared.iterdir()) == []


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "TZ": "UTC"})


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory holding a journal of motoko's (``journal/motoko``, the configured agent's), a runner configuration and a log."""
    write_config(tmp_path, FLEET, runner='journal_root = "./journal/{agent}"\n')
    (tmp_path / "ghostrunner.toml").write_text((tmp_path / "ghostrunner.toml").read_text().replace('journal_root = "./journal"\n', "", 1))
    (tmp_path / "runs.log").write_text("\n".join(run_log()) + "\n", encoding="utf-8")
    with Journal(tmp_path / "journal" / "motoko") as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "harbour", "voice": "The tide.", "ts": "2026-09-01T09:00:00+00:00"})
    return tmp_path


#: Each command that writes a file at --out, as the argument list before its --out value.
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "ghostjournal-report": lambda site: ["ghostjournal", "--root", str(site / "journal" / "motoko"), "report", "--agent", "motoko"],
    "ghostjournal-export": lambda site: ["ghostjournal", "--root", str(site / "journal" / "motoko"), "export"],
    "ghostrunner-report": lambda site: ["ghostrunner", "report", "--config", str(site / "ghostrunner.toml"), "--log", str(site / "runs.log"),
                                        "--now", NOW],
}


def _entry_file(journal: Path) -> str:
    [entry] = [path for path in (journal / "entries").rglob("*.json") if path.is_file()]
    return str(entry.relative_to(journal.parent.parent))


#: Where --out points into motoko's journal, relative to the site: given the journal, the path (a link is made first where named).
PLACES: dict[str, Callable[[Path], str]] = {
    "entry-file": _entry_file,
    "manifest": lambda journal: "journal/motoko/manifest.json",
    "new-in-index": lambda journal: "journal/motoko/index/page.html",
    "new-in-entries": lambda journal: "journal/motoko/entries/page.html",
    "write-lock": lambda journal: "journal/motoko/.write.lock",
    "dot-dot": lambda journal: "elsewhere/../journal/motoko/manifest.json",
    "linked-parent": lambda journal: "linked/index/journal.sqlite3",
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_inside_a_journal_is_refused_in_one_line_and_the_journal_stays_as_it_was(site: Path, command: str, place: str) -> None:
    """--out at a journal's entry file, manifest, a new file in index/ or entries/, its lock, by '..' or a linked parent: exit 2, nothing changed."""
    journal = site / "journal" / "motoko"
    (site / "elsewhere").mkdir()
    (site / "linked").symlink_to(journal, target_is_directory=True)
    target = PLACES[place](journal)
    before = tree_digest(journal)
    done = _run([*COMMANDS[command](site), "--out", target], site)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    prog = command.split("-")[0]
    assert line.startswith(f"{prog}: error: refused {target!r}: the output file for the ") and " is inside " in line, line
    assert tree_digest(journal) == before
    with Journal(journal, create=False) as opened:
        assert opened.verify().is_clean and len(opened.list(limit=10)) == 1
    assert sorted(path.name for path in (site / "elsewhere").iterdir()) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_inside_a_journal_no_command_names_is_refused_too(site: Path, command: str) -> None:
    """A directory holding a journal manifest is a journal: --out below a copy of one, which neither --root nor the configuration names, is refused."""
    shutil.copytree(site / "journal" / "motoko", site / "copy")
    before = tree_digest(site / "copy")
    done = _run([*COMMANDS[command](site), "--out", "copy/index/page.html"], site)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"is inside the journal {str(site / 'copy')!r}" in done.stderr
    assert tree_digest(site / "copy") == before


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unrelated_file_is_replaced_only_with_force_and_an_earlier_output_without(site: Path, command: str) -> None:
    """A file that is no earlier output of the command stays, with exit 2 naming it and --force; with --force, or when the command wrote it, it is replaced."""
    notes = site / "notes.txt"
    notes.write_bytes(b"my own notes, no report\n")
    refused = _run([*COMMANDS[command](site), "--out", "notes.txt"], site)
    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"{command.split('-')[0]}: error: refused 'notes.txt': the output file for the ") and "--force" in line, line
    assert notes.read_bytes() == b"my own notes, no report\n"
    forced = _run([*COMMANDS[command](site), "--out", "notes.txt", "--force"], site)
    assert forced.returncode != 2 and notes.read_bytes() != b"my own notes, no report\n", forced.stderr
    first = notes.read_bytes()
    again = _run([*COMMANDS[command](site), "--out", "notes.txt"], site)  # now an earlier output of the same kind
    assert again.returncode == forced.returncode, again.stderr
    assert notes.read_bytes()[:64] == first[:64]
    empty = site / "made-by-mktemp"
    empty.touch()
    assert _run([*COMMANDS[command](site), "--out", "made-by-mktemp"], site).returncode == forced.returncode
    assert empty.stat().st_size > 0


def test_an_output_of_another_kind_is_not_an_earlier_one(site: Path) -> None:
    """Each kind knows only its own: a journal report is no export nor runs page, a jsonl export stands for a tar one and back."""
    outputs = {name: site / f"{name}.out" for name in COMMANDS}
    for name, path in outputs.items():
        assert _run([*COMMANDS[name](site), "--out", str(path)], site).returncode in (0, 1), name  # the runs log holds a failed run: 1
    kept = {name: path.read_bytes() for name, path in outputs.items()}
    for name in COMMANDS:
        for other, path in outputs.items():
            if other != name:
                done = _run([*COMMANDS[name](site), "--out", str(path)], site)
                assert done.returncode == 2 and "--force" in done.stderr, (name, other, done.stderr)
    assert {name: path.read_bytes() for name, path in outputs.items()} == kept
    export = COMMANDS["ghostjournal-export"](site)
    assert _run([*export, "--format", "tar", "--out", str(outputs["ghostjournal-export"])], site).returncode == 0
    assert _run([*export, "--out", str(outputs["ghostjournal-export"])], site).returncode == 0


def test_a_refused_runs_report_exits_2_never_a_status_code(site: Path) -> None:
    """The runs log holds a failed run (status 1): a refused --out still exits 2, which no verdict of status uses."""
    written = _run([*COMMANDS["ghostrunner-report"](site), "--out", "runs.html"], site)
    assert written.returncode == 1, written.stderr
    for target in ("journal/motoko/manifest.json", "runs.html/", "notes/"):
        done = _run([*COMMANDS["ghostrunner-report"](site), "--out", target], site)
        assert done.returncode == 2 and done.stderr.startswith(f"ghostrunner: error: refused {target!r}: "), done.stderr


def test_every_other_written_path_keeps_out_of_a_journal(site: Path) -> None:
    """Render's --out, download-model's --to and both backups' targets inside a journal: exit 2, one line, nothing made, nothing fetched."""
    journal = site / "journal" / "motoko"
    shutil.copytree(journal, site / "copy")
    config = str(site / "ghostrunner.toml")
    before = {name: tree_digest(site / name) for name in ("journal", "copy")}
    attempts = [
        ["ghostrunner", "systemd", "render", "--config", config, "--out", "journal/motoko/index"],
        ["ghostrunner", "systemd", "render", "--config", config, "--out", "copy/units"],
        ["ghostrunner", "k8s", "render", "--config", config, "--image", "registry.example/ghostrunner:0.1.0", "--out", "linked/k8s"],
        ["ghostrunner", "backup", "--config", config, "--into", "copy/backups"],
        ["ghostrunner", "backup", "--config", config, "--out", "copy/entries/b"],
        ["ghostjournal", "--root", str(journal), "backup", "--out", "copy/b"],
        ["ghostjournal", "--root", str(journal), "download-model", "--to", "journal/motoko/models",
         "--index-url", "https://127.0.0.1:9/simple"],  # refused before any connection: nothing listens there anyway
        ["ghostjournal", "--root", str(journal), "download-model", "--to", "copy/models", "--index-url", "https://127.0.0.1:9/simple"],
    ]
    (site / "linked").symlink_to(journal, target_is_directory=True)
    for args in attempts:
        done = _run(args, site)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith(f"{args[0]}: error: refused ") and " is inside " in done.stderr, (args, done.stderr)
    assert {name: tree_digest(site / name) for name in ("journal", "copy")} == before


@pytest.mark.parametrize("lock_file", ["./journal/motoko/entries/ghostrunner.lock", "./journal/motoko/manifest.json",
                                       "./elsewhere/../journal/motoko/ghostrunner.lock", "./linked/index/ghostrunner.lock",
                                       "./copy/ghostrunner.lock"])
def test_a_lock_file_inside_a_journal_is_refused_when_read_and_its_state_directory_never_made_there(site: Path, lock_file: str) -> None:
    """runner.lock_file inside a journal (a configured agent's, through '..' or a link, or a copy no agent names): runs would write
    the lock, the pauses, the slot locks and the budget ledger beside it. Every command refuses the file as it reads it: exit 78,
    one line naming the key, the journal byte for byte as it was and verifying clean."""
    journal = site / "journal" / "motoko"
    shutil.copytree(journal, site / "copy")
    (site / "linked").symlink_to(journal, target_is_directory=True)
    config = site / "ghostrunner.toml"
    config.write_text(config.read_text(encoding="utf-8").replace("[runner]\n", f"[runner]\nlock_file = {lock_file!r}\n", 1), encoding="utf-8")
    before = {name: tree_digest(site / name) for name in ("journal", "copy")}
    for args in (["pause", "motoko"], ["run", "evening", "--agent", "motoko"], ["status"]):
        done = _run(["ghostrunner", "--config", str(config), *args], site)
        assert done.returncode == 78 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert "runner.lock_file: expected a path outside every journal" in done.stderr and lock_file in done.stderr, done.stderr
    assert {name: tree_digest(site / name) for name in ("journal", "copy")} == before
    assert _run(["ghostjournal", "--root", str(journal), "verify"], site).returncode == 0
