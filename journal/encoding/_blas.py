"""BLAS held to one thread while the NumPy encoder encodes or the semantic arm ranks: one guard, shared by both.

threadpoolctl is imported at the first encode, never at module level, and
only when installed; without it the guard does nothing.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Final

__all__ = ["one_blas_thread"]


class _OneBlasThread:
    """While any encode runs, BLAS runs on one thread (when threadpoolctl is installed).

    The forward pass is many small matrix products (12 heads per text for
    attention): waking BLAS's thread pool for each costs more than it saves.
    On a busy two-core machine a one-text encode was 5-20 times slower, and a
    batch 3-8 times slower, on BLAS's two threads than on one. The limit is
    process-wide, so it is counted: the first encode in sets it, the last one
    out restores it; other BLAS work meanwhile (a cosine ranking in another
    thread) runs on one thread too, slower, never wrong.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._controller: Any = None
        self._restore: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                if self._controller is None:
                    try:  # through import_module, typed Any: threadpoolctl ships no annotations
                        self._controller = importlib.import_module("threadpoolctl").ThreadpoolController()
                    except ImportError:
                        self._controller = False
                if self._controller:
                    self._restore = self._controller.limit(limits=1, user_api="blas")
            self._inside += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._restore is not None:
                self._restore.restore_original_limits()
                self._restore = None


#: The guard every encode runs under; the cosine ranking takes it too (see journal.encoding.semantic).
one_blas_thread: Final = _OneBlasThread()
