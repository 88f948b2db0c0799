"""The documentation as tests read it: its pages, their headings and anchors, and their fenced blocks.

The pages are README.md and every docs/*.md. A block is found by the heading
it follows (its text, at any level), so a test keeps working when a section
moves between pages or changes level.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PAGES", "REPO", "Block", "anchors", "block_after", "blocks", "page_of", "page_text", "run_block", "slug"]

REPO = Path(__file__).resolve().parents[1]
#: Every page of the documentation, relative to the repository.
PAGES: tuple[str, ...] = ("README.md", *sorted(f"docs/{path.name}" for path in (REPO / "docs").glob("*.md")))
_HEADING = re.compile(r"^(#{1,6}) (.+)$")
_MARKER = re.compile(r"^<!-- not run: (.*) -->$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: its page, the line of its opening fence, its language, its text, and its not-run reason if marked."""

    page: str
    line: int
    language: str
    text: str
    not_run: str | None

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def page_text(page: str) -> str:
    return (REPO / page).read_text(encoding="utf-8")


def _lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """(index, line) of every line not inside a fenced block, fences themselves left out."""
    outside, fenced = [], False
    for number, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            outside.append((number, line))
    return outside


def blocks(page: str) -> list[Block]:
    """The fenced blocks of *page*, in order; a block's not-run reason is an HTML comment on the line before its fence."""
    lines = page_text(page).splitlines()
    found, start = [], None
    for number, line in enumerate(lines):
        if not line.startswith("```"):
            continue
        if start is None:
            start = number
            continue
        marker = _MARKER.match(lines[start - 1]) if start > 0 else None
        # A comment that is not of the marker's form must not pass for one: it is kept as the reason, and judged there.
        reason = marker.group(1) if marker else (lines[start - 1] if start > 0 and lines[start - 1].startswith("<!--") else None)
        found.append(Block(page, start + 1, lines[start][3:].strip(), "\n".join(lines[start + 1:number]) + "\n", reason))
        start = None
    assert start is None, f"{page}: a fence opened at line {start + 1 if start is not None else 0} is never closed"
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, markup and punctuation dropped (hyphens and underscores kept), spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: str) -> list[str]:
    """Every heading anchor of *page*, a repeated one suffixed -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    found = []
    for _, line in _lines_outside_fences(page_text(page)):
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.append(base if count == 0 else f"{base}-{count}")
    return found


def _heading_index(page: str, heading: str) -> int | None:
    wanted = heading.lstrip("#").strip()
    for number, line in _lines_outside_fences(page_text(page)):
        match = _HEADING.match(line)
        if match and match.group(2).strip() == wanted:
            return number
    return None


def page_of(heading: str) -> str:
    """The one page holding *heading* (its text, at any level)."""
    pages = [page for page in PAGES if _heading_index(page, heading) is not None]
    assert len(pages) == 1, f"the heading {heading!r} is on {pages or 'no page'}"
    return pages[0]


def block_after(heading: str, *, page: str | None = None, language: str = "sh") -> list[str]:
    """The non-blank lines of the first block of *language* after *heading* (on *page*, else on the one page holding it)."""
    page = page or page_of(heading)
    index = _heading_index(page, heading)
    assert index is not None, f"{page} has no heading {heading!r}"
    after = [block for block in blocks(page) if block.line > index + 1 and block.language == language]
    assert after, f"{page}: no ```{language} block after {heading!r}"
    return [line for line in after[0].text.splitlines() if line.strip()]


def run_block(heading: str, cwd: Path, *, lines: int, page: str | None = None) -> list[str]:
    """Run each of the *lines* lines of the shell block after *heading* with bash in *cwd*; each must exit 0. Their stdouts."""
    block = block_after(heading, page=page)
    assert len(block) == lines, block
    outputs = []
    for line in block:
        done = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    return outputs
