"""``ghostrunner`` run in a process where the nn extra's libraries cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._support import REPO

__all__ = ["WITHOUT_NN", "without_nn"]

#: Python run before the CLI, making the nn extra's libraries really absent from the process.
WITHOUT_NN = "import sys\nfor name in ('numpy', 'tokenizers'):\n    sys.modules[name] = None\nfrom runner.cli.cli import main\nsys.exit(main())\n"


def without_nn(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ghostrunner`` in a process where numpy and tokenizers cannot be imported."""
    return subprocess.run([sys.executable, "-c", WITHOUT_NN, *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(cwd / "state")})
