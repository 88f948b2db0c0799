"""The two deployments under a live systemd: starting one stops the other ("pick one per host")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy._deploy import configure
from tests.deploy._live import LiveSystem, wait_until

pytestmark = pytest.mark.live_systemd

SERVICE, TARGET, TIMER = "ghostrunner.service", "ghostrunner-timers.target", "ghostrunner-run-evening@saito.timer"
#: Its own agent, so that the service's catch-up writes into no other test's journal.
CONFIG = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"

[agents.saito]
persona = "agents/motoko.toml"
routines = ["evening"]
backend = "simulated"
"""


@pytest.fixture(scope="module")
def deployed(system: LiveSystem) -> Iterator[None]:
    configure(system, CONFIG)
    try:
        yield
    finally:
        system.systemctl("stop", SERVICE, TARGET, TIMER, check=False)
        system.systemctl("reset-failed", SERVICE, check=False)


def _active(system: LiveSystem, unit: str) -> str:
    return system.systemctl("is-active", unit, check=False).stdout.strip()


def test_starting_the_timers_stops_the_service(system: LiveSystem, deployed: None) -> None:
    system.systemctl("start", SERVICE)
    system.systemctl("start", TARGET)
    wait_until("the service stopped", lambda: _active(system, SERVICE) == "inactive", 30, 0.2)
    assert _active(system, TIMER) == "active"


def test_starting_the_service_stops_the_timers(system: LiveSystem, deployed: None) -> None:
    system.systemctl("start", TARGET)
    assert _active(system, TIMER) == "active"
    system.systemctl("start", SERVICE)
    assert _active(system, TARGET) == "inactive"
    wait_until("the timer stopped", lambda: _active(system, TIMER) == "inactive", 5, 0.2)
