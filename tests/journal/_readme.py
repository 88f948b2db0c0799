"""Running the documentation's shell blocks as written, line by line, in a working directory (see :mod:`tests._docs`)."""

from __future__ import annotations

from pathlib import Path

from tests._docs import block_after, run_block

__all__ = ["readme_block", "run_readme_block"]


def readme_block(heading: str, *, page: str | None = None) -> list[str]:
    """The lines of the first ```sh block after *heading*, on *page* or on the one page of the documentation holding it."""
    return block_after(heading, page=page)


def run_readme_block(heading: str, cwd: Path, *, lines: int, page: str | None = None) -> list[str]:
    """Run each of the *lines* lines of the block after *heading* with bash in *cwd*; each must exit 0. Their stdouts."""
    return run_block(heading, cwd, lines=lines, page=page)
