"""The systemd notification protocol (``sd_notify``), without libsystemd.

Under a ``Type=notify`` unit systemd passes ``NOTIFY_SOCKET``: the path of a
Unix datagram socket, or an abstract-namespace name when it starts with
``@``. A notification is one datagram of newline-separated ``KEY=VALUE``
lines (``READY=1``, ``STOPPING=1``, ``WATCHDOG=1``, ``STATUS=...``). With
``WatchdogSec=`` set, systemd also passes ``WATCHDOG_USEC`` (and
``WATCHDOG_PID``): the service must send ``WATCHDOG=1`` more often than that,
conventionally at half the interval. See sd_notify(3) and sd_watchdog_enabled(3).

Outside systemd (no ``NOTIFY_SOCKET``) every call is a no-op, so the same
code runs in a terminal, under a test, or in a container.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["Notifier", "WatchdogPinger"]

#: The longest watchdog interval taken from WATCHDOG_USEC, in seconds (a day; systemd's own are seconds to minutes).
_LONGEST_WATCHDOG: Final = 86400.0


@dataclass(frozen=True, slots=True)
class Notifier:
    """Sends state strings to systemd's notification socket, or does nothing without one.

    Attributes:
        address: the socket address (``None``: not under a notify unit); a
            leading ``@`` is turned into the abstract-namespace NUL byte.
        watchdog_seconds: systemd's watchdog interval for this process, if any.
    """

    address: str | None = None
    watchdog_seconds: float | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """The notifier systemd's environment describes (``NOTIFY_SOCKET``, ``WATCHDOG_USEC``, ``WATCHDOG_PID``)."""
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET") or None
        watchdog = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        # WATCHDOG_PID names the process the watchdog is meant for; a child that inherited it must not ping.
        # isascii: str.isdigit() is also true of '²', which int() refuses; the cap keeps Event.wait within what the
        # platform's timed wait accepts (a larger value killed the watchdog thread with OverflowError).
        if usec.isascii() and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            watchdog = min(int(usec) / 1_000_000, _LONGEST_WATCHDOG)
        return cls(address=address, watchdog_seconds=watchdog)

    @property
    def is_enabled(self) -> bool:
        """Whether there is a socket to notify."""
        return self.address is not None

    def notify(self, state: str) -> bool:
        """Send *state* (e.g. ``READY=1``) as one datagram; return whether it was sent.

        A failure to send is not an error of the service: systemd may be
        gone (shutdown) or the socket unreachable; the caller carries on.
        """
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(state.encode("utf-8"), target)
        except OSError:
            return False
        return True


class WatchdogPinger:
    """A daemon thread that calls ``send("WATCHDOG=1")`` every *interval* seconds until stopped."""

    def __init__(self, send: Callable[[str], object], interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"watchdog interval must be positive, got {interval!r}")
        self._send = send
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._send("WATCHDOG=1")

    def start(self) -> None:
        """Send a first ping now and keep pinging on the thread."""
        self._send("WATCHDOG=1")
        self._thread.start()

    def stop(self) -> None:
        """End the pings (returns once the thread is gone)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
