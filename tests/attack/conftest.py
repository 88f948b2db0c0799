"""Fixtures of the attack suite: real filesystem mounts and real HTTP servers, each torn down when its test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.attack._faults import Mounts
from tests.attack._http import Answer, HostileServer


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    made = Mounts()
    try:
        yield made
    finally:
        made.release()


@pytest.fixture
def servers() -> Iterator[Callable[..., HostileServer]]:
    """Start servers on demand; all are stopped when the test ends."""
    started: list[HostileServer] = []

    def start(answer: Answer | None = None) -> HostileServer:
        started.append(HostileServer(answer))
        return started[-1]

    yield start
    for server in started:
        server.close()
