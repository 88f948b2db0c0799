"""Running the README's shell blocks as written, line by line, in a working directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["readme_block", "run_readme_block"]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(heading: str) -> list[str]:
    """The lines of the first ```sh block after *heading* in the README."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(heading):].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def run_readme_block(heading: str, cwd: Path, *, lines: int) -> list[str]:
    """Run each of the *lines* lines of the block after *heading* with bash in *cwd*; each must exit 0. Their stdouts."""
    block = readme_block(heading)
    assert len(block) == lines, block
    outputs = []
    for line in block:
        done = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    return outputs
