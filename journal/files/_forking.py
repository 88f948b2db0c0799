"""A fork waits for the calls in progress on every open journal of the process.

SQLite keeps each process's lock state in memory: a fork taken while another
thread is inside a write copies "this process holds the write lock" into the
child, where a new connection then waits for a lock nobody will release. With
every open journal's call lock taken before the fork, no call is in progress
when it happens; both processes release the locks afterwards.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

__all__ = ["Forkable", "watch_for_fork"]


class Forkable(Protocol):
    """An open journal's parts, as far as a fork cares: its call lock, the process it was opened in, and whether it is closed."""

    calls: threading.RLock
    opened_in: int
    closed: bool


_OPEN: weakref.WeakSet[Forkable] = weakref.WeakSet()
_HELD: list[Forkable] = []


def watch_for_fork(keeper: Forkable) -> None:
    """Have every fork of this process wait until *keeper* has no call in progress (for as long as it lives)."""
    _OPEN.add(keeper)


def _hold_calls() -> None:
    for keeper in list(_OPEN):
        if keeper.opened_in == os.getpid() and not keeper.closed:
            keeper.calls.acquire()
            _HELD.append(keeper)


def _release_calls() -> None:
    while _HELD:
        _HELD.pop().calls.release()


os.register_at_fork(before=_hold_calls, after_in_parent=_release_calls, after_in_child=_release_calls)
