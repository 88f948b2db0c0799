"""Rendering units with the real ``ghostrunner systemd render`` and checking them with the real ``systemd-analyze verify``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests._support import ghostrunner

__all__ = ["ANALYZE", "exec_path", "render", "verify"]

ANALYZE = shutil.which("systemd-analyze")


def exec_path() -> str:
    found = shutil.which("ghostrunner")
    assert found is not None, "the ghostrunner console script must be installed (pip install -e .)"
    return str(Path(found).resolve())


def render(tmp_path: Path, config: Path, *extra: str) -> Path:
    out = tmp_path / "units"
    result = ghostrunner("systemd", "render", "--config", str(config), "--out", str(out), "--exec", exec_path(), *extra, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return out


def verify(units: Path, names: list[str]) -> subprocess.CompletedProcess[str]:
    # Units are found through SYSTEMD_UNIT_PATH (the trailing ':' keeps the system path for targets
    # like timers.target); --recursive-errors=yes also fails on errors in what they pull in.
    env_args = ["verify", "--man=no", "--generators=no", "--recursive-errors=yes", *(str(units / name) for name in names)]
    return subprocess.run([ANALYZE, *env_args], check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:", "SYSTEMD_COLORS": "0"})
