"""Defects found by the second hostile pass over the merged fixes of issue 9, one regression test each.

Each test drives the real mechanism (the real console script, real IANA zones) and asserts the README's promise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.conftest import SIMPLE_AGENT, _clean_logging, ghostrunner, write_config

__all__ = ["_clean_logging"]  # fixture used here


@pytest.mark.parametrize("option", ["--out", "--exec", "--installed-config"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_render_option_is_a_usage_error_not_the_working_directory_or_a_default(tmp_path: Path, option: str, value: str) -> None:
    """Like `--root ""`: Path("") is ".", so `systemd render --out ""` wrote the units into the working directory,
    and an empty --exec or --installed-config silently rendered the defaults."""
    path = write_config(tmp_path / "conf", SIMPLE_AGENT)
    work = tmp_path / "work"
    work.mkdir()
    args = ["--out", str(tmp_path / "units")] if option != "--out" else []
    result = ghostrunner("systemd", "render", "--config", str(path), *args, option, value, cwd=work)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"ghostrunner: error: Invalid value for {option}: expected a non-empty value, got {value!r}"]
    assert list(work.iterdir()) == []
    assert not (tmp_path / "units").exists()
