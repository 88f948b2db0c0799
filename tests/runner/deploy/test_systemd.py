"""`ghostrunner systemd render`: units that systemd-analyze accepts, OnCalendar= that fires when the cron schedule does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from runner.cron.oncalendar import ScheduleNotExpressibleError, skipped_local_times, to_on_calendar
from runner.cron.slots import cron_trigger, fire_times
from runner.deploy.systemd.units import render_units, systemd_escape
from runner.settings.config import load_config
from tests._support import PERSONA, REPO, SIMPLE_AGENT, ghostrunner, write_config
from tests.runner._units import ANALYZE, exec_path, render, verify

if ANALYZE is None:  # the check is a requirement, not an option: fail loudly instead of skipping
    raise RuntimeError("systemd-analyze is required by these tests (Debian/Ubuntu: apt-get install systemd)")

#: Schedules of every shape the converter handles: steps, ranges, lists, names, crontab's 0/7 Sunday, day AND weekday.
SCHEDULES = {
    "every-4h": ("0 */4 * * *", "hour"),
    "evening": ("30 21 * * *", "day"),
    "weekly": ("0 22 * * 0", "week"),
    "weekdays": ("0 7 * * 1-5", "day"),
    "office": ("*/15 9-17 * * mon-fri", "minute"),
    "odd": ("5/20 1,3,5-8 1-10/3 jan,mar-may *", "minute"),
    "weekend": ("0 12 * * 6,7", "day"),
    "first-sunday": ("0 9 1-7 * sun", "day"),
    "monthly": ("0 8 1 * *", "month"),
}

AGENTS = """
[agents.motoko]
persona = "motoko.toml"
routines = [{routines}]

[agents.batou-2]
persona = "motoko.toml"
routines = ["evening"]
"""


def _schedules_config(tmp_path: Path, timezone: str = "Europe/Berlin") -> Path:
    body = "".join(
        f'[routines.{name}]\nkind = "note"\nschedule = "{schedule}"\nslot = "{slot}"\nquestion = "q?"\nprompt = "p"\n\n'
        for name, (schedule, slot) in SCHEDULES.items()
    )
    body += AGENTS.format(routines=", ".join(f'"{name}"' for name in SCHEDULES))
    return write_config(tmp_path, body, runner=f'timezone = "{timezone}"\n')


def _analyze(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ANALYZE, *args], check=False, capture_output=True, text=True, timeout=60, cwd=cwd, env={**os.environ, "TZ": "UTC", "SYSTEMD_COLORS": "0"})


def test_rendered_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """Every rendered unit, each timer instance and its service included, verifies with no message at all."""
    out = render(tmp_path, _schedules_config(tmp_path))
    names = sorted(path.name for path in out.iterdir())
    assert "ghostrunner.service" in names and "ghostrunner-timers.target" in names
    instances = [f"ghostrunner-run-{name}@motoko.{suffix}" for name in SCHEDULES for suffix in ("timer", "service")]
    instances += [r"ghostrunner-run-evening@batou\x2d2.timer"]
    result = verify(out, [name for name in names if "@." not in name] + instances)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_verify_would_catch_a_broken_unit(tmp_path: Path) -> None:
    """The verify check is meaningful: a bad OnCalendar= or a missing ExecStart program makes it fail."""
    out = render(tmp_path, _schedules_config(tmp_path))
    timer = out / "ghostrunner-run-evening@.timer"
    timer.write_text(re.sub(r"OnCalendar=.*", "OnCalendar=*-*-* 25:00:00", timer.read_text()))
    service = out / "ghostrunner.service"
    service.write_text(re.sub(r"ExecStart=\S+", "ExecStart=/nonexistent/ghostrunner", service.read_text()))
    result = verify(out, ["ghostrunner.service", "ghostrunner-run-evening@motoko.timer"])
    assert result.returncode != 0
    assert "Failed to parse calendar specification" in result.stderr and "/nonexistent/ghostrunner" in result.stderr


def test_serve_unit_settings_and_security_exposure(tmp_path: Path) -> None:
    """The serve unit is Type=notify with watchdog and reload by SIGHUP, KillMode=mixed, a stop timeout past shutdown_timeout, and rates OK in systemd-analyze security."""
    out = render(tmp_path, _schedules_config(tmp_path))
    text = (out / "ghostrunner.service").read_text()
    for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "KillMode=mixed", "Restart=on-failure", "User=ghostrunner", "ProtectSystem=strict", "NoNewPrivileges=yes",
                 "PrivateTmp=yes", "ProtectHome=yes", "UMask=0077", "CapabilityBoundingSet=", "WatchdogSec=60s", "TimeoutStopSec=150s"):
        assert f"\n{line}\n" in text, line
    assert f"ExecStart={exec_path()} serve --config {tmp_path / 'ghostrunner.toml'}\n" in text
    result = subprocess.run([ANALYZE, "security", "--offline=true", "--man=no", "--threshold=20", str(out / "ghostrunner.service")],
                            check=False, capture_output=True, text=True, timeout=60, env={**os.environ, "SYSTEMD_UNIT_PATH": f"{out}:", "SYSTEMD_COLORS": "0"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert re.search(r"Overall exposure level for ghostrunner.service: [01]\.\d OK", result.stdout)


def _calendar_times(expression: str, base: datetime, count: int) -> list[datetime]:
    result = _analyze("calendar", f"--iterations={count}", f"--base-time=@{int(base.timestamp())}", expression)
    assert result.returncode == 0, result.stderr
    found = re.findall(r"(?:Next elapse|Iter\. #\d+): \w{3} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", result.stdout)
    return [datetime.fromisoformat(text).replace(tzinfo=UTC) for text in found]


@pytest.mark.parametrize(("timezone", "base"), [
    ("Europe/Berlin", datetime(2026, 3, 20, tzinfo=UTC)),    # spring forward on 2026-03-29
    ("America/New_York", datetime(2026, 10, 25, tzinfo=UTC)),  # fall back on 2026-11-01
    ("Asia/Tokyo", datetime(2026, 12, 28, tzinfo=UTC)),       # no DST; a year boundary
], ids=["berlin-spring", "new-york-fall", "tokyo-new-year"])
def test_on_calendar_fires_when_the_runner_would(tmp_path: Path, timezone: str, base: datetime) -> None:
    """For every routine, systemd-analyze calendar's next 25 elapses equal the runner's own next 25 fire times (one per slot)."""
    out = render(tmp_path, _schedules_config(tmp_path, timezone))
    config = load_config(tmp_path / "ghostrunner.toml")
    for name, (schedule, slot) in SCHEDULES.items():
        [line] = [line for line in (out / f"ghostrunner-run-{name}@.timer").read_text().splitlines() if line.startswith("OnCalendar=")]
        expression = line.removeprefix("OnCalendar=")
        assert expression.endswith(f" {timezone}")
        times = fire_times(cron_trigger(schedule, config.timezone), base + timedelta(seconds=1), base + timedelta(days=3 * 366), granularity=slot)
        runner_times = list(islice(times, 25))
        assert len(runner_times) == 25
        assert _calendar_times(expression, base, 25) == [moment.astimezone(UTC) for moment in runner_times], (name, schedule, expression)


def test_inexpressible_schedule_is_refused_naming_routine_and_schedule(tmp_path: Path) -> None:
    """A schedule using the runner's `last` day is refused with exit 78 and one line naming the routine and the schedule."""
    body = '[routines.month-end]\nkind = "note"\nschedule = "0 9 last * *"\nslot = "month"\nquestion = "q?"\nprompt = "p"\n'
    path = write_config(tmp_path, body + '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["month-end"]\n')
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), "--exec", exec_path())
    assert result.returncode == 78
    assert result.stderr.startswith("ghostrunner: error: routine 'month-end': schedule '0 9 last * *' cannot be written as a systemd OnCalendar=")
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "units").exists()
    with pytest.raises(ScheduleNotExpressibleError, match=r"routine 'r': schedule '0 9 \* \* 8'.*day of week '8' is not 0-7"):
        to_on_calendar("r", "0 9 * * 8", ZoneInfo("UTC"))


def test_render_warns_about_a_time_the_timezone_skips(tmp_path: Path) -> None:
    """02:30 does not exist on Berlin's spring-forward day: the finder names it and render warns on stderr."""
    assert [moment.isoformat() for moment in skipped_local_times("r", "30 2 * * *", ZoneInfo("Europe/Berlin"), date(2026, 1, 1), 365)] == [
        "2026-03-29T02:30:00+01:00"]
    assert skipped_local_times("r", "0 */4 * * *", ZoneInfo("Europe/Berlin"), date(2026, 1, 1), 365) == []
    body = '[routines.night]\nkind = "note"\nschedule = "30 2 * * *"\nslot = "day"\nquestion = "q?"\nprompt = "p"\n'
    path = write_config(tmp_path, body + '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["night"]\n', runner='timezone = "Europe/Berlin"\n')
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), "--exec", exec_path())
    assert result.returncode == 0
    assert "ghostrunner: warning: routine 'night' (30 2 * * *) is due at" in result.stderr
    assert "a time Europe/Berlin skips for daylight saving" in result.stderr


def test_relative_exec_is_refused(tmp_path: Path) -> None:
    """--exec must start with an absolute path, because systemd runs it without a PATH search of the operator's shell."""
    path = _schedules_config(tmp_path)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), "--exec", "ghostrunner")
    assert result.returncode == 2
    assert "the command units run must start with an absolute path, got 'ghostrunner'; pass --exec /usr/local/bin/ghostrunner" in result.stderr


def test_network_sandbox_follows_the_backends(tmp_path: Path) -> None:
    """Simulated agents get no network, local openai loopback only, remote openai and command backends no IP filter."""
    def service_for(backend: str) -> str:
        path = write_config(tmp_path / backend.split()[0].strip('{="'), f'[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\nbackend = {backend}\n')
        return render_units(load_config(path), exec_argv=["/usr/bin/ghostrunner"], config_path="/etc/g.toml").files["ghostrunner.service"]

    simulated = service_for('"simulated"')
    local = service_for('{ type = "openai", base_url = "http://localhost:11434/v1" }')
    remote = service_for('{ type = "openai", base_url = "https://api.example.com/v1" }')
    command = service_for('{ type = "command", command = ["/usr/bin/my-agent"] }')
    assert "RestrictAddressFamilies=AF_UNIX\nIPAddressDeny=any\n" in simulated and "IPAddressAllow" not in simulated
    assert "IPAddressDeny=any\nIPAddressAllow=localhost\n" in local
    assert "IPAddressDeny" not in remote and "AF_INET6" in remote
    assert "IPAddressDeny" not in command and "MemoryDenyWriteExecute=no" in command
    assert "MemoryDenyWriteExecute=yes" in simulated


def test_unit_name_escaping_matches_systemd_escape() -> None:
    """Agent names in timer instance names are escaped exactly as systemd-escape does."""
    names = ["motoko", "batou-2", "a.b_c", "x@y", "日本"]
    expected = subprocess.run([shutil.which("systemd-escape") or "systemd-escape", *names], capture_output=True, text=True, check=True).stdout.split()
    assert [systemd_escape(name) for name in names] == expected


def test_checked_in_units_match_a_fresh_render(tmp_path: Path) -> None:
    """systemd/*.service|timer|target are exactly what render makes of systemd/ghostrunner.toml, so they never drift."""
    deploy = tmp_path / "etc"
    (deploy / "agents").mkdir(parents=True)
    shutil.copy(REPO / "systemd" / "ghostrunner.toml", deploy / "ghostrunner.toml")
    shutil.copy(PERSONA, deploy / "agents" / "motoko.toml")
    rendering = render_units(load_config(deploy / "ghostrunner.toml"), exec_argv=["/usr/local/bin/ghostrunner"],
                             config_path="/etc/ghostrunner/ghostrunner.toml")
    checked_in = {path.name: path.read_text() for path in (REPO / "systemd").iterdir() if path.suffix in (".service", ".timer", ".target")}
    assert checked_in == rendering.files
    assert rendering.warnings == ()


def _restart_settings(text: str) -> dict[str, str]:
    keys = ("Restart", "RestartSec", "RestartPreventExitStatus", "StartLimitIntervalSec", "StartLimitBurst")
    return {key: value for key, _, value in (line.partition("=") for line in text.splitlines()) if key in keys}


def test_oneshot_services_restart_a_failed_run_within_start_limits_that_end_before_the_next_fire(tmp_path: Path) -> None:
    """A daily or 4-hourly run restarts on failure (never on 2, 73, 77, 78, 203) within a start limit; a 15-minute schedule gets no restarts."""
    out = render(tmp_path, _schedules_config(tmp_path))
    # run_timeout 5m + 30 s margin, slot_retry_delay 5m, slot_retries 3: 4 starts within 4 x 630 s.
    daily = {"StartLimitIntervalSec": "2520s", "StartLimitBurst": "4", "Restart": "on-failure", "RestartSec": "300s", "RestartPreventExitStatus": "2 73 77 78 203"}
    for name in ("every-4h", "evening", "weekly", "monthly"):
        assert _restart_settings((out / f"ghostrunner-run-{name}@.service").read_text()) == daily, name
    for name in ("office", "odd"):  # every 15 and 20 minutes: even one rerun of 630 s would not end within half the gap
        assert _restart_settings((out / f"ghostrunner-run-{name}@.service").read_text()) == {"Restart": "no"}, name


def test_a_run_stopped_by_sigterm_is_no_failure_and_a_program_systemd_cannot_start_is_not_restarted(tmp_path: Path) -> None:
    """Every service counts exit 143 (stopped by SIGTERM, unwound) a success; serve and the reruns never restart on 203 (EXEC) or 2, 73, 77, 78."""
    config = write_config(tmp_path, '[backup]\ndir = "/var/backups/ghostrunner"\n' + SIMPLE_AGENT)
    out = render(tmp_path, config)
    services = sorted(path.name for path in out.glob("*.service"))
    assert "ghostrunner-backup.service" in services and "ghostrunner.service" in services
    for name in services:
        lines = (out / name).read_text().splitlines()
        assert lines.count("SuccessExitStatus=143") == 1, name
    serve = _restart_settings((out / "ghostrunner.service").read_text())
    assert serve["Restart"] == "on-failure" and serve["RestartPreventExitStatus"] == "2 73 77 78 203"
    for name in services:
        if name.startswith("ghostrunner-run-") and "Restart=on-failure" in (out / name).read_text():
            assert _restart_settings((out / name).read_text())["RestartPreventExitStatus"] == "2 73 77 78 203", name
    assert verify(out, services).returncode == 0


def test_slot_retry_settings_shape_the_restarts(tmp_path: Path) -> None:
    """slot_retries and slot_retry_delay set the burst and RestartSec; fewer reruns fit a tighter schedule; 0 turns restarts off."""
    def service(runner: str, schedule: str) -> dict[str, str]:
        body = (f'[routines.r]\nkind = "note"\nschedule = "{schedule}"\nslot = "minute"\nquestion = "q"\nprompt = "p"\n'
                '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["r"]\n')
        config = load_config(write_config(tmp_path, body, runner=runner))
        rendering = render_units(config, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/g.toml", today=date(2026, 9, 1))
        return _restart_settings(rendering.files["ghostrunner-run-r@.service"])

    fast = 'run_timeout = "30s"\nslot_retry_delay = "1m"\nslot_retries = 5\n'
    assert service(fast, "0 * * * *") == {"StartLimitIntervalSec": "720s", "StartLimitBurst": "6", "Restart": "on-failure", "RestartSec": "60s",
                                          "RestartPreventExitStatus": "2 73 77 78 203"}
    # Every 20 minutes: half the gap (600 s) holds 5 starts of 120 s each (30 s + 30 s margin + 60 s), so 4 reruns.
    assert service(fast, "*/20 * * * *")["StartLimitBurst"] == "5"
    assert service(fast.replace("slot_retries = 5", "slot_retries = 0"), "0 * * * *") == {"Restart": "no"}


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs sysfs, where no user may make a directory")
def test_units_the_filesystem_refuses_keep_the_renderers_own_fix(tmp_path: Path) -> None:
    """An --out the filesystem refuses (sysfs takes no new directory, whoever asks) is one line saying no unit was replaced,
    exit 77, never the journal's permission hint: the units' own error is passed on as it was, not relabelled."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", "/sys/ghostrunner-units", "--exec", exec_path())
    assert result.returncode == 77 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ghostrunner: error: cannot write the units into '/sys/ghostrunner-units': ")
    assert "no unit was replaced" in result.stderr and "journal" not in result.stderr, result.stderr
