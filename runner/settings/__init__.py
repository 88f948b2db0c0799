"""The configuration and the state directory.

Bounded TOML, the host's defaults, personas, the validated records and their schema, and the
``[fleet]`` and ``[backup]`` tables.
"""

from runner.settings._model import AgentConfig, FleetConfig, RunnerConfig

__all__ = [
    "AgentConfig",
    "FleetConfig",
    "RunnerConfig",
]
