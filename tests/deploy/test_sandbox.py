"""The rendered sandbox under a live systemd: what a backend program may not do, and who owns the journal."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import pytest

from tests.deploy._deploy import CONFIG, STAGE, STATE, configure, entries
from tests.deploy._live import LiveSystem

pytestmark = pytest.mark.live_systemd

UNIT = "ghostrunner-run-probe@prober.service"
OPEN_DIR = f"{STAGE}/open"  # mode 0777: only the sandbox keeps the service user from writing here
SECRET = "/home/probe/secret"  # noqa: S105 - a file's path, not a password. Mode 0644: only the sandbox keeps the service user from reading it
ROUTINE = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"

[routines.probe]
kind = "note"
schedule = "0 12 * * *"
slot = "day"
question = "what may I do?"
prompt = "Write one line."
"""
#: The units are rendered from this simulated-only configuration: no network at all.
SIMULATED = ROUTINE + """
[agents.prober]
persona = "agents/motoko.toml"
routines = ["probe"]
backend = "simulated"
"""
#: Then the installed configuration gives the agent a program (without rendering again), so that
#: a program of the test's runs inside the units a simulated-only configuration gets.
PROGRAM = ROUTINE + f"""
[agents.prober]
routines = ["probe"]
backend = {{ type = "command", command = ["/usr/bin/python3", "{STAGE}/probe.py"], timeout = "30s" }}
"""
PROBE = f"""
import errno, json, socket, sys

request = json.load(sys.stdin)


def attempt(action):
    try:
        action()
    except OSError as error:
        return errno.errorcode[error.errno]
    return "allowed"


def write(path):
    def action():
        with open(path, "w") as file:
            file.write("probe")
    return action


def read(path):
    def action():
        with open(path) as file:
            file.read()
    return action


def open_socket(family):
    return lambda: socket.socket(family, socket.SOCK_STREAM).close()


found = {{
    "write outside ReadWritePaths": attempt(write({OPEN_DIR!r} + "/written")),
    "write in the state directory": attempt(write({STATE!r} + "/probe-written")),
    "read /home": attempt(read({SECRET!r})),
    "open an AF_INET socket": attempt(open_socket(socket.AF_INET)),
    "open an AF_INET6 socket": attempt(open_socket(socket.AF_INET6)),
    "open an AF_UNIX socket": attempt(open_socket(socket.AF_UNIX)),
}}
print(json.dumps({{"voice": json.dumps(found, sort_keys=True), "theme": "probe"}}))
"""


@pytest.fixture(scope="module")
def probed(system: LiveSystem) -> dict[str, Any]:
    """What the probe program found in the run unit's sandbox, by attempt."""
    configure(system, SIMULATED)
    assert system.show(UNIT, "RestrictAddressFamilies")["RestrictAddressFamilies"] == "AF_UNIX"
    system.path(f"{STAGE}/probe.py").write_text(PROBE)
    system.sh(f"install -d -m 0777 {OPEN_DIR} && install -d -m 0755 /home/probe && echo secret > {SECRET} && chmod 0644 {SECRET}")
    # Without the sandbox, the service user could do each of these: the denials below are the sandbox's.
    system.run("runuser", "-u", "ghostrunner", "--", "/bin/sh", "-c", f"cat {SECRET} && echo control > {OPEN_DIR}/control")
    system.path(f"{STAGE}/ghostrunner.toml").write_text(PROGRAM)
    system.run("install", "-m", "0644", f"{STAGE}/ghostrunner.toml", CONFIG)
    system.systemctl("start", UNIT)  # a oneshot: returns when the run is over
    [entry] = entries(system, "prober")
    found = json.loads(str(entry["voice"]))
    assert isinstance(found, dict)
    return found


def test_a_backend_program_cannot_write_outside_read_write_paths(probed: dict[str, Any]) -> None:
    assert probed["write outside ReadWritePaths"] == "EROFS"
    assert probed["write in the state directory"] == "allowed"


def test_a_backend_program_cannot_read_home(probed: dict[str, Any]) -> None:
    assert probed["read /home"] == "EACCES"  # ProtectHome=yes: /home is an inaccessible directory


def test_a_backend_program_of_a_simulated_only_configuration_cannot_open_a_network_socket(probed: dict[str, Any]) -> None:
    assert probed["open an AF_INET socket"] == probed["open an AF_INET6 socket"] == "EAFNOSUPPORT"
    assert probed["open an AF_UNIX socket"] == "allowed"


def test_journal_files_belong_to_the_service_user_with_private_modes(system: LiveSystem, probed: dict[str, Any]) -> None:
    user = system.run("id", "-u", "ghostrunner").stdout.strip()
    group = system.run("id", "-g", "ghostrunner").stdout.strip()
    state = system.path(STATE).stat()
    assert (state.st_uid, state.st_gid, stat.S_IMODE(state.st_mode)) == (int(user), int(group), 0o700)
    journal = system.path(f"{STATE}/prober")
    seen = []
    for directory, _directories, files in os.walk(journal):
        for name in [directory, *(os.path.join(directory, f) for f in files)]:
            info = os.lstat(name)
            expected = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
            seen.append((os.path.relpath(name, journal), info.st_uid, info.st_gid, oct(stat.S_IMODE(info.st_mode))))
            assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (int(user), int(group), expected), seen[-1]
    assert any(path.startswith("entries/") and path.endswith(".json") for path, *_ in seen), seen
