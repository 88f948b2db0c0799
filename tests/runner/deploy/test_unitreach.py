"""What a unit's program needs to start, followed through real files and links in a fake host tree.

The tree lives in a temporary directory: its ``home`` stands for ``/home`` (hidden by ProtectHome=yes), its ``tmp``
for ``/tmp`` (PrivateTmp=yes); ``usr`` and ``opt`` are what the sandbox shows. Every link and ``#!`` line is real.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.deploy.systemd._reach import Step
from tests.runner._hosts import Host, pyenv_python


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def test_a_console_script_of_a_venv_from_a_python_under_home_warns_about_the_interpreter(host: Host) -> None:
    """The program is outside /home, but its #! python is a link into /home: every start would fail with 203/EXEC."""
    installation = f"{host.base}/home/dev/.pyenv/versions/3.11.7"
    host.link("opt/venv/bin/python3", pyenv_python(host))
    host.venv("opt/venv", f"{installation}/bin")
    program = host.script("opt/venv/bin/ghostrunner", f"{host.base}/opt/venv/bin/python3")
    [warning] = host.warnings(program)  # the links, the binary and the venv's home all lie in one installation: one line
    assert warning.startswith(f"the --exec program {program!r} needs '{installation}/bin/python3' to start ({program!r} -> #! interpreter "
                              f"'{host.base}/opt/venv/bin/python3' -> symbolic link '{installation}/bin/python3'), which is under "
                              f"{host.base}/home, which ProtectHome=yes hides from the service: every start fails (203/EXEC); ")
    assert "install the project with a system Python" in warning
    assert f"ProtectHome=tmpfs and BindReadOnlyPaths={installation} " in warning


def test_the_whole_chain_is_followed_link_by_link(host: Host) -> None:
    """Each link is a step, relative ones resolved from their own directory, and the #! interpreter's links after it."""
    python = pyenv_python(host)
    host.link("opt/venv/bin/python3", os.path.relpath(python, host.path("opt/venv/bin")))
    host.script("opt/venv/bin/ghostrunner", f"{host.base}/opt/venv/bin/python3")
    program = host.link("usr/local/bin/ghostrunner", "../../../opt/venv/bin/ghostrunner")
    assert [(step.how, step.path) for step in host.chain(program)] == [
        ("program", program),
        ("symbolic link", f"{host.base}/opt/venv/bin/ghostrunner"),
        ("#! interpreter", f"{host.base}/opt/venv/bin/python3"),
        ("symbolic link", python),
        ("symbolic link", f"{host.base}/home/dev/.pyenv/versions/3.11.7/bin/python3.11"),
    ]


def test_a_link_on_the_way_through_home_warns_even_when_the_program_ends_outside(host: Host) -> None:
    """/usr/local/bin/x -> /home/dev/x -> /opt/x: the kernel must look in /home on the way, and the sandbox shows it nothing there."""
    real = host.binary("opt/tool/bin/ghostrunner")
    host.link("home/dev/bin/ghostrunner", real)
    program = host.link("usr/local/bin/ghostrunner", f"{host.base}/home/dev/bin/ghostrunner")
    [warning] = host.warnings(program, known=(program, real))  # the program's own path and its end are warned about elsewhere
    assert f"needs '{host.base}/home/dev/bin/ghostrunner' to start ({program!r} -> symbolic link '{host.base}/home/dev/bin/ghostrunner')" in warning
    assert f"BindReadOnlyPaths={host.base}/home/dev " in warning


@pytest.mark.parametrize("shebang", ["{env} python3", "{env} -S python3 -u", "{env} -S PYTHONSAFEPATH=1 python3"])
def test_an_env_shebang_finds_its_interpreter_on_the_units_path_not_the_callers(host: Host, monkeypatch: pytest.MonkeyPatch,
                                                                                 shebang: str) -> None:
    """`#!/usr/bin/env python3` runs the first python3 on the PATH the unit has; the caller's own PATH (a venv first) changes nothing."""
    env = host.binary("usr/bin/env")
    host.link("usr/local/bin/python3", pyenv_python(host))  # a link into /home, first on the units' PATH
    host.binary("usr/bin/python3")
    host.binary("opt/elsewhere/python3")
    monkeypatch.setenv("PATH", f"{host.base}/opt/elsewhere:{os.environ['PATH']}")
    program = host.script("opt/tool/ghostrunner", shebang.format(env=env))
    [warning] = host.warnings(program)
    assert f"-> #! interpreter {env!r} -> 'env python3' on the units' PATH '{host.base}/usr/local/bin/python3' -> symbolic link" in warning
    (host.path("usr/local/bin/python3")).unlink()
    assert host.warnings(program) == []  # the next one on the PATH, /usr/bin/python3, is visible
    assert host.chain(program)[-1] == Step(f"{host.base}/usr/bin/python3", "'env python3' on the units' PATH")


def test_an_env_program_in_exec_is_followed_like_a_shebang(host: Host) -> None:
    """--exec "/usr/bin/env ghostrunner" runs the ghostrunner found on the units' PATH."""
    env = host.binary("usr/bin/env")
    host.link("usr/local/bin/ghostrunner", host.script("home/dev/venv/bin/ghostrunner", "/usr/bin/python3"))
    [warning] = host.warnings(env, "ghostrunner")
    assert f"'env ghostrunner' on the units' PATH '{host.base}/usr/local/bin/ghostrunner' -> symbolic link '{host.base}/home/dev/venv/bin/ghostrunner'" \
        in warning


def test_a_copied_venv_python_warns_about_its_base_installation(host: Host) -> None:
    """A venv made with --copies has its own python binary, but the standard library stays where pyvenv.cfg's home says."""
    python = host.binary("opt/venv/bin/python3")
    host.venv("opt/venv", f"{host.base}/home/dev/python/bin")
    host.binary("home/dev/python/bin/python3")
    [warning] = host.warnings(python, "-m", "runner")
    assert f"needs '{host.base}/home/dev/python/bin' to start ({python!r} -> its venv's base installation (pyvenv.cfg home)" in warning
    assert "every start fails (Python finds no standard library)" in warning
    assert f"BindReadOnlyPaths={host.base}/home/dev/python " in warning


def test_an_interpreter_that_is_a_script_is_followed_too(host: Host) -> None:
    """A wrapper script's interpreter may be a script itself: its own #! line is followed."""
    wrapper = host.script("opt/tool/python-wrapper", f"{host.base}/home/dev/bin/python3")
    host.binary("home/dev/bin/python3")
    program = host.script("opt/tool/ghostrunner", wrapper)
    [warning] = host.warnings(program)
    assert f"-> #! interpreter {wrapper!r} -> #! interpreter '{host.base}/home/dev/bin/python3')" in warning


def test_under_tmp_the_warning_names_private_tmp(host: Host) -> None:
    host.binary("tmp/build/bin/python3")
    program = host.script("opt/tool/ghostrunner", f"{host.base}/tmp/build/bin/python3")
    [warning] = host.warnings(program)
    assert (f"which is under {host.base}/tmp, which PrivateTmp=yes replaces with the service's own empty directory: "
            "every start fails (203/EXEC); install it elsewhere") in warning


def test_loops_end_and_a_visible_chain_warns_about_nothing(host: Host) -> None:
    """A link loop and a script that is its own interpreter end the chain; nothing outside the hidden directories is warned about."""
    host.link("opt/loop/a", f"{host.base}/opt/loop/b")
    host.link("opt/loop/b", f"{host.base}/opt/loop/a")
    assert host.warnings(f"{host.base}/opt/loop/a") == []
    selfish = host.script("opt/tool/selfish", f"{host.base}/opt/tool/selfish")
    assert len(host.chain(selfish)) == 6  # the program, then its interpreter as often as render follows one
    host.binary("usr/bin/python3.11")
    host.link("usr/bin/python3", "python3.11")
    host.venv("opt/ghostrunner", f"{host.base}/usr/bin")
    host.link("opt/ghostrunner/bin/python3", f"{host.base}/usr/bin/python3")
    program = host.link("usr/local/bin/ghostrunner", host.script("opt/ghostrunner/bin/ghostrunner", f"{host.base}/opt/ghostrunner/bin/python3"))
    assert host.warnings(program) == []
    assert host.warnings(f"{host.base}/opt/missing/ghostrunner") == []  # rendered for another host: nothing to follow


def test_a_bare_command_backend_is_found_on_the_units_path(host: Host) -> None:
    """A command backend named without a path runs what the units' PATH finds; a name found nowhere gives nothing to follow."""
    host.link("usr/local/bin/backend", host.script("home/dev/backend/run", "/usr/bin/python3"))
    [warning] = host.warnings("backend", "--reply")
    assert warning.startswith(f"the --exec program '{host.base}/usr/local/bin/backend' needs '{host.base}/home/dev/backend/run' to start")
    assert host.chain("nowhere-on-the-path") == []


def test_an_editable_install_from_a_source_tree_under_home_warns(host: Host) -> None:
    """The venv's Python is visible, but a .pth file puts a source tree under /home on sys.path: the import fails in the sandbox."""
    host.binary("usr/bin/python3")
    host.venv("opt/venv", f"{host.base}/usr/bin")
    host.link("opt/venv/bin/python3", f"{host.base}/usr/bin/python3")
    (host.path("home/dev/src/ghostjournal")).mkdir(parents=True)
    site = host.path("opt/venv/lib/python3.11/site-packages")
    site.mkdir(parents=True)
    (site / "_ghostjournal.pth").write_text(f"# a comment\n{host.base}/home/dev/src/ghostjournal\n{host.base}/home/dev/gone\n"
                                            "import os; os.environ\n")
    (site / "relative.pth").write_text("local-dir\n")
    (site / "local-dir").mkdir()
    program = host.script("opt/venv/bin/ghostrunner", f"{host.base}/opt/venv/bin/python3")
    # Only the directories that exist, a relative one from site-packages; comments and import lines are no paths.
    assert [step.path for step in host.chain(program)][-2:] == [f"{host.base}/home/dev/src/ghostjournal", str(site / "local-dir")]
    [warning] = host.warnings(program)
    assert f"needs '{host.base}/home/dev/src/ghostjournal' to start" in warning
    assert "-> a directory its _ghostjournal.pth puts on sys.path" in warning
    assert "every start fails (what it imports from there is missing)" in warning
    assert f"BindReadOnlyPaths={host.base}/home/dev/src/ghostjournal " in warning
