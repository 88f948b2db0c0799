"""systemd render's startup chain fed the files a careless host holds: FIFOs where a script or a venv file should be, #! lines split by a tab, env options that take an argument.

The host tree is the fake one of tests/runner/deploy/test_unitreach.py (its ``home`` stands for ``/home``); each file is real.
A FIFO is opened by a reader that would wait for a writer forever, so each test that meets one runs the chain in a
child process and gives it a bound far beyond what following a few files takes: a chain that waits is the defect.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.deploy.systemd._reach import Step
from tests.runner._hosts import Host, pyenv_python

#: Far beyond what reading a few small files takes: only a chain blocked on a FIFO reaches it.
_BLOCKED: float = 30.0


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def _chain_in_a_child(host: Host, program: str) -> list[tuple[str, str]]:
    """The chain of *program* computed by another process, which a blocking read would leave hanging (then the test fails)."""
    code = ("import sys; from runner.deploy.systemd._reach import startup_chain\n"
            "for step in startup_chain([sys.argv[1]], unit_path=sys.argv[2]): print(step.how + '\\t' + step.path)")
    try:
        done = subprocess.run([sys.executable, "-c", code, program, host.unit_path], capture_output=True, text=True, timeout=_BLOCKED,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the chain of {program!r} blocked reading a FIFO")
    assert done.returncode == 0, done.stderr
    return [(how, path) for how, path in (line.split("\t", 1) for line in done.stdout.splitlines())]


def test_a_fifo_as_the_program_ends_the_chain_instead_of_blocking_render(host: Host) -> None:
    program = host.path("opt/tool/ghostrunner")
    program.parent.mkdir(parents=True)
    os.mkfifo(program, 0o755)
    assert _chain_in_a_child(host, str(program)) == [("program", str(program))]


def test_a_fifo_as_a_venvs_pyvenv_cfg_or_pth_file_blocks_nothing(host: Host) -> None:
    python = host.binary("opt/venv/bin/python3")
    os.mkfifo(host.path("opt/venv/pyvenv.cfg"))
    site = host.path("opt/venv/lib/python3.11/site-packages")
    site.mkdir(parents=True)
    os.mkfifo(site / "editable.pth")
    assert _chain_in_a_child(host, python) == [("program", python)]


def test_a_shebang_split_by_a_tab_names_its_interpreter_as_the_kernel_reads_it(host: Host) -> None:
    """The kernel ends the interpreter at a space or a tab: `#!/usr/bin/env<TAB>python3` runs env, which runs python3."""
    env = host.binary("usr/bin/env")
    python = pyenv_python(host)
    host.link("usr/local/bin/python3", python)
    program = host.script("opt/tool/ghostrunner", f"{env}\tpython3")
    chain = host.chain(program)
    assert chain[1] == Step(env, "#! interpreter")
    assert Step(python, "symbolic link") in chain
    assert host.warnings(program) != []


@pytest.mark.parametrize("words", ["-u HOME python3", "-uHOME python3", "-iu HOME python3", "--unset HOME python3", "--unset=HOME python3",
                                   "-C / python3", "--chdir / python3", "-- python3", "- python3"])
def test_an_env_option_that_takes_an_argument_is_not_taken_for_the_command(host: Host, words: str) -> None:
    """--exec "/usr/bin/env -u HOME python3 ..." runs python3 (HOME is the option's argument): the python3 on the units' PATH is followed."""
    env = host.binary("usr/bin/env")
    host.link("usr/local/bin/python3", pyenv_python(host))
    argv = [env, *words.split(), "-m", "runner"]
    assert Step(f"{host.base}/usr/local/bin/python3", "'env python3' on the units' PATH") in host.chain(*argv)
    [warning] = host.warnings(*argv)
    assert "ProtectHome=yes hides" in warning


@pytest.mark.parametrize("words", ["-S -u HOME python3 -u", "-S -uHOME python3", "-S --unset=HOME python3"])
def test_an_env_shebangs_split_options_are_read_as_env_reads_them(host: Host, words: str) -> None:
    env = host.binary("usr/bin/env")
    host.link("usr/local/bin/python3", pyenv_python(host))
    program = host.script("opt/tool/ghostrunner", f"{env} {words}")
    assert Step(f"{host.base}/usr/local/bin/python3", "'env python3' on the units' PATH") in host.chain(program)
