"""The backup timer under a live systemd: the [backup] table and lines of docs/deploying.md, and a backup that opens as a journal and verifies."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator

import pytest

from tests._docs import page_text
from tests.deploy._deploy import CONFIG, STAGE, STATE, VENV, configure, entries
from tests.deploy._live import LiveSystem
from tests.journal._readme import readme_block

pytestmark = pytest.mark.live_systemd

HEADING = "Backups on a timer"
PAGE = "docs/deploying.md"
BACKUPS = "/var/backups/ghostrunner"
DEPLOYMENT = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"

[agents.tachikoma]          # an agent of this module's own: the last test damages its journal
persona = "agents/motoko.toml"
routines = ["evening"]
backend = "simulated"
"""


def _readme_table() -> str:
    """The ```toml block after the heading: the [backup] table as docs/deploying.md gives it."""
    text = page_text(PAGE)
    return text[text.index("## " + HEADING):].split("```toml\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def backed_up(system: LiveSystem) -> Iterator[str]:
    """A journal with one entry, then the docs' backup lines run as written; the new backup's directory."""
    table = _readme_table()
    assert f'dir = "{BACKUPS}"' in table
    configure(system, DEPLOYMENT)  # no [backup] yet: one run, so that the journal has an entry to copy
    system.systemctl("start", "ghostrunner-run-evening@tachikoma.service")
    system.path(f"{STAGE}/ghostrunner.toml").write_text(DEPLOYMENT + table, encoding="utf-8")
    system.run("install", "-m", "0644", f"{STAGE}/ghostrunner.toml", CONFIG)
    lines = readme_block(HEADING, page=PAGE)
    assert len(lines) == 5, lines
    try:
        for line in lines:
            system.sh(line, timeout=120)
        [made] = [path.name for path in system.path(BACKUPS).iterdir()]
        yield f"{BACKUPS}/{made}"
    finally:
        system.systemctl("disable", "--now", "ghostrunner-backup.timer", check=False)


def test_the_backup_service_writes_a_dated_backup_that_opens_as_a_journal_and_verifies(system: LiveSystem, backed_up: str) -> None:
    assert backed_up.startswith(f"{BACKUPS}/ghostrunner-backup-")
    shown = system.show("ghostrunner-backup.service", "Result", "ExecMainStatus", "ActiveState", "Type")
    assert shown == {"Result": "success", "ExecMainStatus": "0", "ActiveState": "inactive", "Type": "oneshot"}
    copy = f"{backed_up}/journals/tachikoma"
    verified = system.run("runuser", "-u", "ghostrunner", "--", f"{VENV}/bin/ghostjournal", "--root", copy, "verify", "--json")
    report = json.loads(verified.stdout)
    assert report["problems"] == [] and report["files"] == 1
    listed = json.loads(system.run("runuser", "-u", "ghostrunner", "--", f"{VENV}/bin/ghostjournal", "--root", copy, "list").stdout)
    assert [entry["id"] for entry in listed] == [entry["id"] for entry in entries(system, "tachikoma")]
    marker = json.loads(system.path(f"{backed_up}/ghostrunner-backup.json").read_text())
    assert marker["ok"] is True and marker["journals"]["tachikoma"]["journal"] == f"{STATE}/tachikoma"
    assert system.path(f"{backed_up}/config/ghostrunner.toml").read_text() == system.path(CONFIG).read_text()


def test_the_backup_ran_in_the_sandbox_as_the_service_user(system: LiveSystem, backed_up: str) -> None:
    sandbox = system.show("ghostrunner-backup.service", "ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges", "User",
                          "RestrictAddressFamilies", "ReadWritePaths", "Restart")
    assert sandbox == {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "NoNewPrivileges": "yes", "User": "ghostrunner",
                       "RestrictAddressFamilies": "AF_UNIX", "ReadWritePaths": BACKUPS, "Restart": "no"}
    user = int(system.run("id", "-u", "ghostrunner").stdout)
    info = system.path(backed_up).stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user, 0o700)
    marker = system.path(f"{backed_up}/ghostrunner-backup.json").stat()
    assert (marker.st_uid, stat.S_IMODE(marker.st_mode)) == (user, 0o600)


def test_the_timer_is_enabled_apart_from_the_timers_target(system: LiveSystem, backed_up: str) -> None:
    timer = system.show("ghostrunner-backup.timer", "ActiveState", "UnitFileState", "Persistent", "TimersCalendar", "PartOf")
    assert (timer["ActiveState"], timer["UnitFileState"], timer["Persistent"], timer["PartOf"]) == ("active", "enabled", "yes", "")
    assert "03:30:00 Asia/Tokyo" in timer["TimersCalendar"]


def test_a_copy_that_does_not_verify_fails_the_unit_with_4_once_and_removes_nothing(system: LiveSystem, backed_up: str) -> None:
    """A damaged entry file in the journal: the copy does not verify, the oneshot fails with status 4, is not restarted, and the earlier
    backup stays beside the failed one (kept for a look)."""
    [entry] = list(system.path(f"{STATE}/tachikoma/entries").rglob("*.json"))
    original = entry.read_bytes()
    entry.write_bytes(original.replace(b'"voice"', b'"voicX"', 1))
    try:
        started = system.systemctl("start", "ghostrunner-backup.service", check=False, timeout=120)
        assert started.returncode != 0
        shown = system.show("ghostrunner-backup.service", "Result", "ExecMainStatus", "NRestarts", "ActiveState")
        assert shown == {"Result": "exit-code", "ExecMainStatus": "4", "NRestarts": "0", "ActiveState": "failed"}
        made = sorted(path.name for path in system.path(BACKUPS).iterdir())
        assert len(made) == 2 and f"{BACKUPS}/{made[0]}" == backed_up
        failed = json.loads(system.path(f"{BACKUPS}/{made[1]}/ghostrunner-backup.json").read_text())
        assert failed["ok"] is False and failed["journals"]["tachikoma"]["verify"]["problems"]
    finally:
        entry.write_bytes(original)
        system.systemctl("reset-failed", "ghostrunner-backup.service", check=False)
