"""A real writer process appending without pause (``_child.py``'s busy mode), for tests that check a reader while it writes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BusyWriter", "busy_writer"]

CHILD = Path(__file__).with_name("_child.py")


class BusyWriter:
    """The writer's process and the client keys of the appends it reported as returned, in order."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen([sys.executable, str(CHILD), json.dumps({"mode": "busy", "root": str(root), "start": 0})],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.appended: list[str] = []
        self._grew = threading.Condition()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._grew:
                self.appended.append(line.split()[0])
                self._grew.notify_all()

    def wait_for_more(self, timeout: float = 60) -> list[str]:
        """Wait until the writer reports one more append than now (it gets the lock between two checks); the keys reported by then."""
        with self._grew:
            seen = len(self.appended)
            assert self._grew.wait_for(lambda: len(self.appended) > seen, timeout=timeout), "the writer stopped appending"
            return list(self.appended)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self._pump.join()
        assert self.process.stdout is not None
        self.process.stdout.close()


@contextmanager
def busy_writer(root: Path) -> Iterator[BusyWriter]:
    """A :class:`BusyWriter` on the journal at *root*, killed when the block ends."""
    writer = BusyWriter(root)
    try:
        yield writer
    finally:
        writer.close()
