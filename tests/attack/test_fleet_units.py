"""`systemd render` of a configuration with a `[fleet]` table: the fleet's own units, never a `serve` unit or a timer beside the fleet.

`serve` refuses a fleet's configuration, and a timer per slot beside the fleet would run every slot a
second time. So render writes `ghostrunner-fleet-beat.service` and `ghostrunner-fleet-worker@.service`
(an instance per shard): `KillMode=mixed`, the sandbox of `serve`'s unit, and a network limited to the
broker's address (and, for a worker, what its backends need). Each unit is read back by the real
`systemd-analyze verify` and `security`, and a directory that holds units of `serve` or the timers is
refused before anything is written there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._support import ghostrunner, tree_digest, write_config

ANALYZE = shutil.which("systemd-analyze")
if ANALYZE is None:  # a requirement, as in tests/runner/deploy/test_systemd.py: fail loudly instead of skipping
    raise RuntimeError("systemd-analyze is required by these tests (Debian/Ubuntu: apt-get install systemd)")

EXEC = "/usr/bin/python3 -m runner"
TWO_AGENTS = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening", "digest"]
journal_root = "/var/lib/ghostrunner/journals/motoko"

[agents.batou]
persona = "motoko.toml"
routines = ["evening"]
journal_root = "/var/lib/ghostrunner/journals/batou"
{backend}
"""
BACKENDS = {
    "simulated": "",
    "local openai": 'backend = { type = "openai", base_url = "http://127.0.0.1:11434/v1" }',
    "remote openai": 'backend = { type = "openai", base_url = "https://api.example.com/v1" }',
    "command": 'backend = { type = "command", command = ["/usr/bin/true"] }',
}
FLEET = '\n[fleet]\nbroker = "{broker}"\n[fleet.shards]\neast = ["motoko"]\nwest-2 = ["batou"]\n'
BACKUP = '\n[backup]\ndir = "/var/backups/ghostrunner"\n'
SERVE_AND_TIMERS = ("ghostrunner.service", "ghostrunner-timers.target", "ghostrunner-run-")


def _config(tmp_path: Path, *, backend: str = "simulated", broker: str = "redis://10.0.0.5:6379/0", fleet: bool = True, backup: bool = False) -> Path:
    body = TWO_AGENTS.format(backend=BACKENDS[backend]) + (FLEET.format(broker=broker) if fleet else "") + (BACKUP if backup else "")
    return write_config(tmp_path, body, runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n')


def _render(config: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return ghostrunner("systemd", "render", "--config", str(config), "--out", str(out), "--exec", EXEC,
                       "--installed-config", "/etc/ghostrunner/ghostrunner.toml", *extra)


def _analyze(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ANALYZE), *args], check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_UNIT_PATH": f"{out}:", "SYSTEMD_COLORS": "0"})


def _settings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith(("#", "["))]


def _sandbox(text: str) -> list[str]:
    """The sandbox lines, from ProtectSystem= to RemoveIPC=, with the network lines after them left out."""
    lines = _settings(text)
    return lines[lines.index(next(line for line in lines if line.startswith("ProtectSystem="))) : lines.index("RemoveIPC=yes") + 1]


def _network(text: str) -> list[str]:
    lines = text.splitlines()
    return [line for line in lines[lines.index("RemoveIPC=yes") + 1 :] if line.startswith(("RestrictAddressFamilies=", "IPAddress"))]


@pytest.mark.parametrize("backup", [False, True], ids=["alone", "with backup"])
def test_a_fleet_configuration_renders_the_fleets_units_and_never_serve_or_timers(tmp_path: Path, backup: bool) -> None:
    """The units directory holds the beat, the worker template (and the backup units), no serve unit and no timer of a slot; every unit
    and a worker instance per shard verify with no message, rate OK in systemd-analyze security, and stop with KillMode=mixed."""
    out = tmp_path / "units"
    done = _render(_config(tmp_path, backup=backup), out)
    assert done.returncode == 0, done.stderr
    names = sorted(path.name for path in out.iterdir())
    assert names == sorted(["ghostrunner-fleet-beat.service", "ghostrunner-fleet-worker@.service",
                            *(["ghostrunner-backup.service", "ghostrunner-backup.timer"] if backup else [])])
    assert not [name for name in names if name.startswith(SERVE_AND_TIMERS)]
    assert "ghostrunner-fleet-worker@east.service ghostrunner-fleet-worker@west-2.service" in done.stdout
    assert "ghostrunner.service" not in done.stdout and "timers.target" not in done.stdout
    instances = ["ghostrunner-fleet-worker@east.service", "ghostrunner-fleet-worker@west-2.service"]
    verified = _analyze(out, "verify", "--man=no", "--generators=no", "--recursive-errors=yes",
                        *(str(out / name) for name in [*[n for n in names if "@." not in n], *instances]))
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", "")
    for name in ("ghostrunner-fleet-beat.service", "ghostrunner-fleet-worker@east.service"):
        rated = _analyze(out, "security", "--offline=true", "--man=no", "--threshold=20", str(out / name))
        assert rated.returncode == 0 and f"Overall exposure level for {name}: 1." in rated.stdout, rated.stdout[-1500:]
    beat = (out / "ghostrunner-fleet-beat.service").read_text()
    worker = (out / "ghostrunner-fleet-worker@.service").read_text()
    assert f"\nExecStart={EXEC} fleet beat --config /etc/ghostrunner/ghostrunner.toml\n" in beat
    assert f"\nExecStart={EXEC} fleet worker --shard %i --config /etc/ghostrunner/ghostrunner.toml\n" in worker
    for text in (beat, worker):
        for line in ("KillMode=mixed", "Restart=on-failure", "User=ghostrunner", "Conflicts=ghostrunner.service ghostrunner-timers.target"):
            assert f"\n{line}\n" in text, line
    assert "\nTimeoutStopSec=330s\n" in worker  # run_timeout (5 min) and a margin: the runs in flight finish


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_the_fleets_sandbox_is_serves_with_its_network_limited_to_the_broker(tmp_path: Path, backend: str) -> None:
    """A worker has serve's sandbox line for line; the beat runs no backend, so only CPython runs and it reaches the broker alone; a
    worker reaches the broker and what its backends need, exactly as serve's unit limits it otherwise."""
    served = tmp_path / "serve"
    assert _render(_config(tmp_path / "s", backend=backend, fleet=False), served).returncode == 0
    out = tmp_path / "fleet"
    done = _render(_config(tmp_path / "f", backend=backend), out)
    assert done.returncode == 0, done.stderr
    serve = (served / "ghostrunner.service").read_text()
    beat = (out / "ghostrunner-fleet-beat.service").read_text()
    worker = (out / "ghostrunner-fleet-worker@.service").read_text()
    assert _sandbox(worker) == _sandbox(serve)
    assert [line for line in _sandbox(beat) if not line.startswith(("ReadWritePaths=", "MemoryDenyWriteExecute="))] == [
        line for line in _sandbox(serve) if not line.startswith(("ReadWritePaths=", "MemoryDenyWriteExecute="))]
    assert "\nMemoryDenyWriteExecute=yes\n" in beat
    inet = "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"
    assert _network(beat) == [inet, "IPAddressDeny=any", "IPAddressAllow=10.0.0.5"]
    expected = {
        "simulated": [inet, "IPAddressDeny=any", "IPAddressAllow=10.0.0.5"],
        "local openai": [inet, "IPAddressDeny=any", "IPAddressAllow=localhost 10.0.0.5"],
        "remote openai": [inet],
        "command": [inet],
    }
    assert _network(worker) == expected[backend]


@pytest.mark.parametrize(("broker", "allowed"), [("redis://localhost:6379/0", "localhost"), ("rediss://[::1]:6380/2", "::1"),
                                                 ("redis://192.168.7.9/0", "192.168.7.9")])
def test_a_broker_named_by_address_is_the_one_address_the_beat_may_reach(tmp_path: Path, broker: str, allowed: str) -> None:
    """IPAddressAllow= names the broker's host as the URL gives it (an IPv4 or IPv6 address, or localhost), and the units verify."""
    out = tmp_path / "units"
    assert _render(_config(tmp_path, broker=broker), out, "--strict").returncode == 0
    assert f"\nIPAddressDeny=any\nIPAddressAllow={allowed}\n" in (out / "ghostrunner-fleet-beat.service").read_text()
    verified = _analyze(out, "verify", "--man=no", "--generators=no", str(out / "ghostrunner-fleet-beat.service"))
    assert (verified.returncode, verified.stderr) == (0, "")


def test_a_broker_named_by_host_name_is_warned_about_and_refused_under_strict(tmp_path: Path) -> None:
    """IPAddressAllow= takes addresses: a broker named by host name leaves the units without an IP restriction, with one warning naming
    fleet.broker; --strict writes nothing and exits 78."""
    config = _config(tmp_path, broker="redis://redis.internal:6379/0")
    out = tmp_path / "units"
    done = _render(config, out)
    assert done.returncode == 0, done.stderr
    [warning] = done.stderr.splitlines()
    assert warning.startswith("ghostrunner: warning: fleet.broker 'redis://redis.internal:6379/0' names its host") and "IP address" in warning
    assert "IPAddressDeny" not in (out / "ghostrunner-fleet-beat.service").read_text()
    strict = _render(config, tmp_path / "strict", "--strict")
    assert strict.returncode == 78 and not (tmp_path / "strict").exists()


def test_a_fleet_rendering_into_a_directory_holding_serve_or_timers_is_refused(tmp_path: Path) -> None:
    """--out holding units of serve and the timers from an earlier render: one line naming them and how to stop them, exit 2, and the
    directory stays byte for byte as it was; once they are removed the fleet's units are written."""
    out = tmp_path / "units"
    assert _render(_config(tmp_path / "s", fleet=False), out).returncode == 0
    before = tree_digest(out)
    done = _render(_config(tmp_path / "f"), out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "ghostrunner.service" in done.stderr and "systemctl disable --now" in done.stderr
    assert tree_digest(out) == before
    for path in out.iterdir():
        if path.name.startswith(SERVE_AND_TIMERS):
            path.unlink()
    again = _render(_config(tmp_path / "f"), out)
    assert again.returncode == 0, again.stderr
    assert not [path.name for path in out.iterdir() if path.name.startswith(SERVE_AND_TIMERS)]


def test_serve_and_timers_rendered_into_a_directory_holding_a_fleets_units_are_refused(tmp_path: Path) -> None:
    """The other way round: [fleet] removed and render run again over the fleet's units. Timers and serve beside a beat and workers
    still enabled would run every slot a second time: one line naming the fleet's units and how to stop them, exit 2, nothing
    written; once they are removed serve's units and the timers are written."""
    out = tmp_path / "units"
    assert _render(_config(tmp_path / "f"), out).returncode == 0
    before = tree_digest(out)
    done = _render(_config(tmp_path / "s", fleet=False), out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "ghostrunner-fleet-beat.service" in done.stderr and "systemctl disable --now" in done.stderr
    assert tree_digest(out) == before
    for path in out.iterdir():
        path.unlink()
    again = _render(_config(tmp_path / "s", fleet=False), out)
    assert again.returncode == 0, again.stderr
    assert (out / "ghostrunner.service").is_file() and not [path.name for path in out.iterdir() if path.name.startswith("ghostrunner-fleet-")]
