"""Shared fixtures: a fresh journal root, a journal, and entry payloads."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from journal import Journal


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a developer's own journal settings out of every test."""
    monkeypatch.delenv("GHOSTJOURNAL_ROOT", raising=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "journal"


@pytest.fixture
def journal(root: Path) -> Iterator[Journal]:
    with Journal(root) as opened:
        yield opened


@pytest.fixture
def make_payload() -> Callable[..., dict[str, Any]]:
    """Build a valid payload; keyword arguments override or add fields."""

    def build(**overrides: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "kind": "note",
            "agent": "motoko",
            "theme": "harbor light",
            "voice": "The harbor lights flickered while the ferry left; I kept thinking about the tide tables.",
            "tags": ["harbor", "light"],
        }
        payload.update(overrides)
        return payload

    return build


def tree_digest(path: Path) -> dict[str, str]:
    """Map every file below *path* (relative name) to a hash of its bytes; symlinks by target."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            full = Path(dirpath) / name
            rel = str(full.relative_to(path))
            if full.is_symlink():
                result[rel] = "link:" + os.readlink(full)
            else:
                result[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return result


def entry_files(root: Path) -> dict[str, str]:
    """Hashes of the canonical entry files only."""
    return {k: v for k, v in tree_digest(root / "entries").items() if not Path(k).name.startswith(".")}
