"""The files shipped as examples work as their comments say: the deployment's regenerate command, the example configuration's paths."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from runner.settings.config import load_config
from tests._support import REPO, ghostrunner
from tests.runner._no_nn import without_model


def test_the_example_configuration_writes_nothing_into_the_repository() -> None:
    """examples/ghostrunner.toml keeps its journals and lock file outside the checkout (they were ./ghostjournal-data beside it, untracked)."""
    config = load_config(REPO / "examples" / "ghostrunner.toml")
    for path in [config.lock_file, *(agent.journal_root for agent in config.agents.values())]:
        assert not path.resolve().is_relative_to(REPO), path
    assert config.agent("motoko").journal_root == Path.home() / ".local" / "state" / "ghostjournal" / "example-motoko"

def test_the_regenerate_command_in_the_example_deployments_header_works_from_the_repository(tmp_path: Path) -> None:
    """The render command systemd/ghostrunner.toml's header gives, run from the repository's top, finds the persona and rewrites the units unchanged."""
    header = []
    for line in (REPO / "systemd" / "ghostrunner.toml").read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    text = " ".join(header)
    command = shlex.split(text[text.index("ghostrunner systemd render"):].split(" After ")[0].replace("\\", " "))
    out = command.index("--out") + 1
    assert command[out] == "systemd/"
    units = tmp_path / "systemd"
    shutil.copytree(REPO / "systemd", units, symlinks=True)
    command[out] = str(units)  # the repository's own files stay as they are
    result = ghostrunner(*command[1:], cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert {p.name: p.read_text() for p in units.iterdir() if p.suffix in (".service", ".timer", ".target")} == {
        p.name: p.read_text() for p in (REPO / "systemd").iterdir() if p.suffix in (".service", ".timer", ".target")}


def test_the_example_configuration_runs_clean_where_no_embedding_model_is_installed(tmp_path: Path) -> None:
    """The simulation the example's header suggests appends every slot and says at most one short line where there is no model (the base install)."""
    completed = without_model("--config", str(REPO / "examples" / "ghostrunner.toml"), "simulate", "--agent", "motoko", "--days", "7",
                              "--start", "2026-08-03", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert set(json.loads(completed.stdout)["outcomes"]) == {"appended"}
    assert len(completed.stderr.splitlines()) <= 1 and len(completed.stderr) <= 200, completed.stderr
    assert (tmp_path / "home" / ".local" / "state" / "ghostjournal" / "example-motoko").is_dir()
