"""Both reports' --out given names a careless operator types: a directory written with its trailing slash, ``file/.``.

The kernel reads ``reports/`` as a directory and would refuse to create a file by that name; the report must
not write a file called ``reports`` instead, nor replace ``page.html`` when told ``page.html/.``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from journal import Journal
from journal.errors import UnsafePathError
from journal.frame.outfile import write_output
from tests.attack._faults import AS_NOBODY, NOBODY


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
            write_output(name, b"new")
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
