"""Looking at a journal's files and index from outside the library, as the crash and concurrency tests do."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any


def index_rows(root: Path) -> list[tuple[str, str, str | None]]:
    """``(id, path, client_key)`` of every entry row in the index, read with a plain SQLite connection."""
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn:
        return sorted(conn.execute("SELECT id, path, client_key FROM entries").fetchall())


def entries_on_disk(root: Path) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    """Every published entry file under entries/ (parsed, by relative path), and the temp files."""
    files: dict[str, dict[str, Any]] = {}
    temps: list[Path] = []
    entries = root / "entries"
    for dirpath, _dirs, names in os.walk(entries):
        for name in names:
            path = Path(dirpath, name)
            if name.startswith(".tmp-"):
                temps.append(path)
            elif path.parent == entries and name == ".generation":
                continue  # the write counter, not an entry
            else:
                files[path.relative_to(entries).as_posix()] = json.loads(path.read_bytes())
    return files, temps
