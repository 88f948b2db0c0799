"""Fixtures of the attack suite: real HTTP servers, each stopped when its test ends (real mounts: ``mounts`` in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.attack._http import Answer, HostileServer


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
