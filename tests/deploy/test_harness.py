"""The harness itself: the booted system is isolated, and the README's step 1 gives a working ghostrunner."""

from __future__ import annotations

import os

import pytest

from tests.deploy._deploy import GHOSTRUNNER, STATE
from tests.deploy._live import LiveSystem

pytestmark = pytest.mark.live_systemd


def test_booted_system_is_running_in_its_own_namespaces(system: LiveSystem) -> None:
    assert system.run("systemctl", "is-system-running").stdout.strip() == "running"
    for namespace in ("pid", "mnt", "net", "uts", "ipc"):
        assert os.readlink(f"/proc/{system.pid}/ns/{namespace}") != os.readlink(f"/proc/self/ns/{namespace}")
    assert system.run("systemd-detect-virt", "--container", check=False).stdout.strip() != "none"


def test_the_installed_ghostrunner_runs_as_the_service_user(system: LiveSystem) -> None:
    user = system.run("getent", "passwd", "ghostrunner").stdout.strip().split(":")
    assert user[5:] == [STATE, "/usr/sbin/nologin"]
    assert int(user[2]) < 1000  # a system user
    result = system.run("runuser", "-u", "ghostrunner", "--", GHOSTRUNNER, "--help")
    assert "serve" in result.stdout
