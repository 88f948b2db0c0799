"""One run of a routine, and many on a virtual clock.

Its contract (identity, outcome, result line), the engine, its worker process, retries, the slot
lock and later runs of a failed slot, pauses, the journal's memory, simulation and the demo.
"""

from runner.run._memory import Fallback, open_journal, settle_fallbacks

__all__ = [
    "Fallback",
    "open_journal",
    "settle_fallbacks",
]
