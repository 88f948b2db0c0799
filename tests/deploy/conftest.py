"""The booted systemd the deployment tests share: one boot for the session, always torn down."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy._deploy import install
from tests.deploy._live import SYSTEMD, LiveSystem


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live_systemd: boots the machine's systemd in private namespaces (root only; ~1 minute)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of the booted system runs on one xdist worker, so the session boots it once, not once per worker."""
    for item in items:
        if "system" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("live_systemd"))


def _cannot_boot() -> str | None:
    """Why this machine cannot boot a private systemd, or None."""
    if os.geteuid() != 0:
        return "booting systemd in private namespaces needs root (CI runs as root, and never skips)"
    missing = [tool for tool in ("unshare", "nsenter", "chroot", "setpriv") if shutil.which(tool) is None]
    if missing or not Path(SYSTEMD).exists():
        return f"booting a private systemd needs {SYSTEMD} and util-linux's unshare, nsenter, chroot, setpriv (missing: {missing or SYSTEMD})"
    return None


@pytest.fixture(scope="session")
def system() -> Iterator[LiveSystem]:
    """systemd booted once, with ghostrunner installed by the README's step 1; powered off and removed at the end."""
    reason = _cannot_boot()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the live systemd tests: {reason}")
        pytest.skip(reason)
    live = LiveSystem(Path(tempfile.mkdtemp(prefix="ghostrunner-deploy-")))
    try:
        live.boot()
        install(live)
        yield live
    finally:
        left = live.close()
    assert not left, f"the booted system left traces behind: {left}"
