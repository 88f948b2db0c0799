"""What a reload of ``serve`` (SIGHUP) changes: the pairs added, removed and rescheduled, and what it may not change.

A reload reads the configuration file again, validated whole as on start. A
new configuration that fails to load, or that changes what a running
scheduler cannot change (``runner.lock_file``: the deployment lock is held on
the old path), is refused; the old one keeps serving. Runs in flight finish
under the configuration they started with: each worker read the file when it
started.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import ConfigError
from runner.settings.config import RunnerConfig

__all__ = ["ConfigChange", "pairs_of"]


def pairs_of(config: RunnerConfig) -> set[tuple[str, str]]:
    """Every configured (agent, routine)."""
    return {(agent.name, name) for agent in config.agents.values() for name in agent.routines}


def _names(pairs: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{agent}:{routine}" for agent, routine in pairs)


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """The difference between the configuration being served and the one a reload read."""

    added: frozenset[tuple[str, str]]
    removed: frozenset[tuple[str, str]]
    rescheduled: frozenset[tuple[str, str]]  # kept pairs whose schedule or timezone changed

    @classmethod
    def between(cls, old: RunnerConfig, new: RunnerConfig) -> ConfigChange:
        """The change from *old* to *new*.

        Raises:
            ConfigError: *new* moves ``runner.lock_file``, which a running scheduler holds.
        """
        if new.lock_file != old.lock_file:
            raise ConfigError(
                new.source,
                "runner.lock_file",
                f"the lock file serve holds, {str(old.lock_file)!r} (a running serve cannot move its lock: restart it to use another)",
                repr(str(new.lock_file)),
            )
        before, after = pairs_of(old), pairs_of(new)
        rescheduled = {
            (agent, routine)
            for agent, routine in before & after
            if old.routines[routine].schedule != new.routines[routine].schedule or old.timezone != new.timezone
        }
        return cls(frozenset(after - before), frozenset(before - after), frozenset(rescheduled))

    def to_fields(self) -> dict[str, list[str]]:
        """The change as log fields: ``agent:routine`` names, sorted."""
        return {"added": _names(set(self.added)), "removed": _names(set(self.removed)), "rescheduled": _names(set(self.rescheduled))}
