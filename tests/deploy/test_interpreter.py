"""A program whose Python lives under a home directory, under a live systemd: render warns, the unit cannot start, the named fix works.

The program is a console script like the README's, in a venv made with ``python -m venv`` from a
Python under ``/root`` or ``/home`` (this machine's own base installation when it lives there, as a
pyenv one does; else a copy of the system's Python binary under ``/home``): its path is plain, but
its ``#!`` python links into the home directory, which ``ProtectHome=yes`` hides.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.deploy.systemd._reach import UNIT_PATH
from tests.deploy._deploy import CONFIG, GHOSTRUNNER, STAGE, VENV, configure, entries
from tests.deploy._live import LiveSystem

pytestmark = pytest.mark.live_systemd

HOME_VENV = "/opt/ghostrunner-home-python"
PROGRAM = "/usr/local/bin/ghostrunner-home-python"
UNIT = "ghostrunner-run-reach@reacher.service"
DROP_IN = "/etc/systemd/system/ghostrunner-run-reach@.service.d/home-python.conf"
SIMULATED = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"

[routines.reach]
kind = "note"
schedule = "0 12 * * *"
slot = "day"
question = "did it start?"
prompt = "Write one line."

[agents.reacher]
persona = "agents/motoko.toml"
routines = ["reach"]
backend = "simulated"
"""


def _home_python(system: LiveSystem) -> str:
    """A Python installed under a home directory, readable by the service user but for the sandbox."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    if base.exists() and any(base.resolve().is_relative_to(home) for home in ("/root", "/home")):
        system.run("chmod", "0755", "/root")  # the booted system's own /root (an overlay): only the sandbox hides it now
        return str(base)
    # Without one on this machine: the system's binary copied under /home finds its standard library in /usr, where it was built for.
    system.sh('install -D -m 0755 "$(readlink -f /usr/bin/python3)" /home/builder/python/bin/python3')
    return "/home/builder/python/bin/python3"


def _render(system: LiveSystem, program: str, out: str, *options: str) -> tuple[int, list[str]]:
    result = system.run("ghostrunner", "systemd", "render", "--config", CONFIG, "--exec", program, "--out", out, *options, check=False)
    return result.returncode, result.stderr.splitlines()


@pytest.fixture(scope="module")
def home_python(system: LiveSystem) -> Iterator[str]:
    """The console script of a venv made from a Python under a home directory, with the project importable; yields that Python."""
    python = _home_python(system)
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    system.run(python, "-m", "venv", "--without-pip", HOME_VENV)
    site = system.run(f"{HOME_VENV}/bin/python3", "-c", purelib).stdout.strip()
    # The project and its dependencies as README step 1 installed them (pure Python): the same packages, another interpreter.
    system.path(f"{site}/ghostrunner.pth").write_text(system.run(f"{VENV}/bin/python3", "-c", purelib).stdout)
    script = system.path(f"{HOME_VENV}/bin/ghostrunner")
    script.write_text(f"#!{HOME_VENV}/bin/python3\nimport sys\nfrom runner.cli.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    system.run("ln", "-s", f"{HOME_VENV}/bin/ghostrunner", PROGRAM)
    configure(system, SIMULATED)
    # Outside the sandbox the service user starts it: what the units meet below is the sandbox's doing.
    assert "serve" in system.run("runuser", "-u", "ghostrunner", "--", PROGRAM, "--help").stdout
    yield python
    system.run("rm", "-rf", str(Path(DROP_IN).parent), PROGRAM, HOME_VENV)
    configure(system, SIMULATED)  # the README's units again, for whoever renders next


def test_the_units_path_is_the_booted_managers(system: LiveSystem) -> None:
    """render looks up `#!/usr/bin/env python3` on the PATH the units get: the manager's, since they set none."""
    environment = dict(line.split("=", 1) for line in system.run("systemctl", "show-environment").stdout.splitlines())
    assert environment["PATH"] == UNIT_PATH


def test_the_readme_installation_renders_without_a_warning_even_strict(system: LiveSystem, home_python: str) -> None:
    code, stderr = _render(system, GHOSTRUNNER, f"{STAGE}/readme-units", "--strict")
    assert (code, stderr) == (0, [])


def test_render_warns_strict_refuses_the_unit_cannot_start_and_the_named_fix_starts_it(system: LiveSystem, home_python: str) -> None:
    installation = str(Path(system.run("readlink", "-f", home_python).stdout.strip()).parent.parent)
    code, stderr = _render(system, PROGRAM, f"{STAGE}/strict-units", "--strict")
    assert code == 78 and not system.path(f"{STAGE}/strict-units").exists(), stderr
    assert stderr[-1].startswith("ghostrunner: error: --strict: render found 1 problem (the warning above) and wrote no unit")
    code, stderr = _render(system, PROGRAM, "/etc/systemd/system")
    assert code == 0
    [warning] = [line for line in stderr if line.startswith("ghostrunner: warning: ")]
    assert warning.startswith(f"ghostrunner: warning: the --exec program {PROGRAM!r} needs "), warning
    assert f"-> #! interpreter '{HOME_VENV}/bin/python3' -> symbolic link {home_python!r}" in warning
    assert "which ProtectHome=yes hides from the service: every start fails (203/EXEC)" in warning
    system.systemctl("daemon-reload")
    assert system.systemctl("start", UNIT, check=False).returncode != 0
    assert system.show(UNIT, "Result", "ExecMainStatus") == {"Result": "exit-code", "ExecMainStatus": "203"}  # 203: EXEC
    assert entries(system, "reacher") == []
    fix = re.search(r"give the units a drop-in with (ProtectHome=tmpfs) and (BindReadOnlyPaths=\S+)", warning)
    assert fix is not None and fix.group(2) == f"BindReadOnlyPaths={installation}", warning
    system.path(DROP_IN).parent.mkdir(parents=True)
    system.path(DROP_IN).write_text(f"[Service]\n{fix.group(1)}\n{fix.group(2)}\n")
    system.systemctl("daemon-reload")
    system.systemctl("stop", UNIT)  # 203 is in RestartPreventExitStatus=: nothing waits to restart, and stopping a failed unit is harmless
    system.systemctl("start", UNIT)  # a oneshot: returns when the run is over
    assert system.show(UNIT, "Result", "ExecMainStatus") == {"Result": "success", "ExecMainStatus": "0"}
    [entry] = entries(system, "reacher")
    assert entry["meta"]["source_routine"] == "reach" and str(entry["client_key"]).startswith("reacher:reach:")
