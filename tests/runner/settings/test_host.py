"""Where data goes without a journal_root, and which zone the embedded defaults keep: the state directory and the local zone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from journal import Journal
from runner.errors import ConfigError
from runner.settings._host import local_zone_name, state_directory
from runner.settings.config import load_config
from tests._support import REPO, SIMPLE_AGENT, ghostrunner, state_journal

ZONEINFO = Path("/usr/share/zoneinfo")


@pytest.mark.parametrize(("environ", "expected"), [
    ({"STATE_DIRECTORY": "/var/lib/ghostrunner", "XDG_STATE_HOME": "/x", "HOME": "/home/u"}, "/var/lib/ghostrunner"),
    ({"STATE_DIRECTORY": "/var/lib/a:/var/lib/b", "HOME": "/home/u"}, "/var/lib/a"),
    ({"STATE_DIRECTORY": "relative", "XDG_STATE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/ghostjournal"),
    ({"XDG_STATE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/ghostjournal"),
    ({"XDG_STATE_HOME": "state", "HOME": "/home/u"}, "/home/u/.local/state/ghostjournal"),
    ({"XDG_STATE_HOME": "", "HOME": "/home/u"}, "/home/u/.local/state/ghostjournal"),
], ids=["systemd", "systemd-several", "systemd-relative", "xdg", "xdg-relative", "home"])
def test_the_state_directory_follows_systemd_then_xdg_then_home(environ: dict[str, str], expected: str) -> None:
    """$STATE_DIRECTORY (its first entry) wins, then $XDG_STATE_HOME/ghostjournal, then ~/.local/state/ghostjournal; relative values never count."""
    assert state_directory("cfg", environ) == Path(expected)


def test_without_any_state_directory_a_journal_root_is_asked_for() -> None:
    """With neither variable nor an absolute $HOME, the error names runner.journal_root instead of falling back to the working directory."""
    with pytest.raises(ConfigError, match=r"^cfg: runner\.journal_root: expected a journal_root, since this process has no state directory"):
        state_directory("cfg", {"HOME": "."})


def test_a_configuration_without_journal_root_writes_into_the_state_directory_never_the_working_directory(tmp_path: Path) -> None:
    """A real run of a configuration file without journal_root leaves its working directory empty; under systemd it uses $STATE_DIRECTORY."""
    config_dir = tmp_path / "etc"
    config_dir.mkdir()
    (config_dir / "ghostrunner.toml").write_text('[runner]\ntimezone = "UTC"\n' + SIMPLE_AGENT.replace('"motoko.toml"', repr(str(REPO / "examples" / "agents" / "motoko.toml"))))
    work = tmp_path / "work"
    work.mkdir()
    args = ("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(config_dir / "ghostrunner.toml"))
    done = ghostrunner(*args, cwd=work)
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == [] and sorted(p.name for p in config_dir.iterdir()) == ["ghostrunner.toml"]
    assert len(Journal(state_journal("motoko"), create=False).list()) == 1
    unit = tmp_path / "var-lib-ghostrunner"
    unit.mkdir()
    under_systemd = ghostrunner(*args, cwd=work, env={"STATE_DIRECTORY": str(unit)})
    assert under_systemd.returncode == 0, under_systemd.stderr
    assert (unit / "motoko" / "manifest.json").is_file() and list(work.iterdir()) == []


def _link(tmp_path: Path, target: str) -> Path:
    link = tmp_path / "localtime"
    link.symlink_to(target)
    return link


@pytest.mark.parametrize(("tz", "expected"), [
    ("Europe/Berlin", "Europe/Berlin"),
    (":America/New_York", "America/New_York"),
    (str(ZONEINFO / "Asia" / "Kolkata"), "Asia/Kolkata"),
    (":" + str(ZONEINFO / "posix" / "Australia" / "Lord_Howe"), "Australia/Lord_Howe"),
    ("JST-9", "UTC"),
    ("", "UTC"),
    ("../../etc/passwd", "UTC"),
], ids=["name", "colon-name", "path", "posix-tree-path", "posix-rule", "empty", "traversal"])
def test_tz_wins_and_is_resolved_to_an_iana_name(tmp_path: Path, tz: str, expected: str) -> None:
    """$TZ, set, decides (as for the C library): a name or a zoneinfo path gives its IANA name; what names no zone is UTC."""
    localtime = _link(tmp_path, str(ZONEINFO / "Europe" / "Paris"))
    assert local_zone_name({"TZ": tz}, localtime=localtime, timezone_file=tmp_path / "none") == expected


def test_without_tz_the_localtime_link_then_etc_timezone_decide(tmp_path: Path) -> None:
    """The /etc/localtime link names the zone (the name linked, not what the tree links it on to); a copied file falls to /etc/timezone, then UTC."""
    timezone_file = tmp_path / "timezone"
    relative = os.path.relpath(ZONEINFO / "US" / "Eastern", tmp_path)  # US/Eastern is itself a link on to America/New_York
    assert local_zone_name({}, localtime=_link(tmp_path, relative), timezone_file=timezone_file) == "US/Eastern"
    (tmp_path / "localtime").unlink()
    (tmp_path / "localtime").write_bytes((ZONEINFO / "Asia" / "Tokyo").read_bytes())  # a copy, as some images ship it
    assert local_zone_name({}, localtime=tmp_path / "localtime", timezone_file=timezone_file) == "UTC"
    timezone_file.write_text("America/Sao_Paulo\n")
    assert local_zone_name({}, localtime=tmp_path / "localtime", timezone_file=timezone_file) == "America/Sao_Paulo"
    timezone_file.write_text("Not/A_Zone\n")
    assert local_zone_name({}, localtime=tmp_path / "localtime", timezone_file=timezone_file) == "UTC"


def test_the_embedded_defaults_keep_the_local_zone_and_the_demo_prints_it_and_where_it_wrote(tmp_path: Path) -> None:
    """With TZ=America/New_York the embedded defaults run in New York, not Tokyo; the demo prints the zone and its journal, cwd untouched."""
    env = {k: v for k, v in os.environ.items() if k != "GHOSTRUNNER_CONFIG"} | {"TZ": "America/New_York"}
    done = subprocess.run([sys.executable, "-m", "runner", "demo", "--days", "7"], check=False, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"motoko's journal: {state_journal('motoko')}",
                         "timezone: America/New_York (this system's local zone; set runner.timezone in a configuration to choose another)"]
    assert "Asia/Tokyo" not in done.stdout and list(tmp_path.iterdir()) == []
    with Journal(state_journal("motoko"), create=False) as journal:
        assert {entry.ts[-6:] for entry in journal.list(kind="evening")} == {"-04:00"}  # EDT in August


def test_load_config_of_the_embedded_defaults_uses_local_zone_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The embedded defaults' zone is local_zone_name(); a configuration file without timezone stays UTC."""
    monkeypatch.setenv("TZ", "Pacific/Auckland")
    assert load_config().timezone.key == "Pacific/Auckland"
    (tmp_path / "ghostrunner.toml").write_text(SIMPLE_AGENT.replace('"motoko.toml"', repr(str(REPO / "examples" / "agents" / "motoko.toml"))))
    assert load_config(tmp_path / "ghostrunner.toml").timezone.key == "UTC"
