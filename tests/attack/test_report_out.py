"""Both reports' --out given names a careless operator types: a directory written with its trailing slash, ``file/.``.

The kernel reads ``reports/`` as a directory and would refuse to create a file by that name; the report must
not write a file called ``reports`` instead, nor replace ``page.html`` when told ``page.html/.``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from journal.errors import UnsafePathError
from journal.outfile import write_output


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
