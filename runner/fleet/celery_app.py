"""The fleet's Celery application at module level, for Celery's own tools: ``celery -A runner.fleet.celery_app ...``.

``celery -A runner.fleet.celery_app inspect active``, ``control revoke``,
``events`` and Flower (``celery -A runner.fleet.celery_app flower``) reach
the fleet's workers through it. It is built, on first use, from the
configuration ``$GHOSTRUNNER_CONFIG`` names, with the password and record
key from the same variables the workers read. Workers and beat are started
with ``ghostrunner fleet worker`` and ``fleet beat``, never with
``celery worker`` or ``celery beat``: those checks and logs are theirs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app"]  # noqa: F822 - app is made on first use, by the module's __getattr__

_built: list[Any] = []


def __getattr__(name: str) -> Any:
    # Built on first use, not at import: a module that imports this one (a docs check, a tool listing modules)
    # must not need the fleet's configuration in its environment.
    if name != "app":
        raise AttributeError(name)
    if not _built:
        from runner.fleet.app import fleet_app
        from runner.settings.config import load_config

        _built.append(fleet_app(load_config()))
    return _built[0]
