"""``ghostrunner backup``: every configured agent's journal copied online and verified, with the configuration and the pause file."""

from __future__ import annotations

import json
from pathlib import Path

from journal import Journal
from tests._support import SIMPLE_AGENT, entry_files, ghostrunner, write_config


def test_backup_copies_each_journal_verified_the_config_and_the_pauses(tmp_path: Path) -> None:
    """After a simulated week and a pause, the backup holds a journal that opens with the same files, the configuration and the pause file."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    assert ghostrunner("--config", str(config), "simulate", "--agent", "motoko", "--days", "3", "--start", "2026-09-01", cwd=tmp_path).returncode == 0
    assert ghostrunner("--config", str(config), "pause", "motoko", "evening", cwd=tmp_path).returncode == 0
    done = ghostrunner("--config", str(config), "backup", "--json", "--out", str(tmp_path / "backup"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["journals"]["motoko"]["verify"]["ok"] is True
    copy = tmp_path / "backup" / "journals" / "motoko"
    source = Path(report["journals"]["motoko"]["journal"])
    assert entry_files(copy) == entry_files(source) and len(entry_files(copy)) == 3 * 7
    assert (tmp_path / "backup" / "config" / "ghostrunner.toml").read_bytes() == config.read_bytes()
    assert [Path(f).parent.name for f in report["files"]] == ["config", "state"]
    with Journal(copy, create=False) as journal:
        assert len(journal.list(limit=100)) == 21
    again = ghostrunner("--config", str(config), "backup", "--out", str(tmp_path / "backup"), cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.startswith("ghostrunner: error: refused ") and again.stderr.count("\n") == 1


def test_an_agent_whose_journal_does_not_exist_yet_is_reported_missing_and_the_others_are_copied(tmp_path: Path) -> None:
    """A configured agent that never ran has no journal: the backup says so for it, copies the rest, and creates none."""
    body = SIMPLE_AGENT + '\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["evening"]\njournal_root = "./batou"\n'
    config = write_config(tmp_path, body)
    assert ghostrunner("--config", str(config), "simulate", "--agent", "motoko", "--days", "1", "--start", "2026-09-01", cwd=tmp_path).returncode == 0
    done = ghostrunner("--config", str(config), "backup", "--json", "--out", str(tmp_path / "backup"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["journals"]["batou"]["missing"] is True and report["journals"]["motoko"]["verify"]["ok"] is True
    assert not (tmp_path / "batou").exists() and not (tmp_path / "backup" / "journals" / "batou").exists()


def test_an_empty_out_or_into_is_refused_naming_the_option(tmp_path: Path) -> None:
    """--out "" or --into "" is a usage error naming the option, exit 2; no backup appears where the command runs."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    work = tmp_path / "work"
    work.mkdir()
    for option, expected in (("--out", "a directory that does not exist yet"), ("--into", "a directory to make the dated backup in")):
        done = ghostrunner("--config", str(config), "backup", option, "", cwd=work)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"ghostrunner: error: Invalid value for '{option}': expected {expected}, got ''"), done.stderr
    done = ghostrunner("--config", "", "status", cwd=work)
    assert done.returncode == 2 and "Invalid value for '--config': expected a configuration file, got ''" in done.stderr, done.stderr
    assert list(work.iterdir()) == []


def test_a_backup_under_a_link_that_points_nowhere_says_so(tmp_path: Path) -> None:
    """--out or --into through a symbolic link whose target is gone is one line naming the link and that it points nowhere
    (exit 74), never a traceback nor only "a directory is missing"; nothing is written and the link is left as it was."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    link = tmp_path / "backups"
    link.symlink_to("unmounted")
    before = sorted(path.name for path in tmp_path.iterdir())
    for option in ("--out", "--into"):
        done = ghostrunner("--config", str(config), "backup", option, str(link / "nightly"), cwd=tmp_path)
        assert done.returncode == 74 and done.stderr.count("\n") == 1, (option, done.stderr)
        assert f"{str(link)!r} is a symbolic link that points nowhere ('unmounted' does not exist)" in done.stderr, (option, done.stderr)
    assert sorted(path.name for path in tmp_path.iterdir()) == before and link.is_symlink()
