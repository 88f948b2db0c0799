"""The configuration and the state directory.

Bounded TOML, the host's defaults, personas, the validated records and their schema, and the
``[fleet]`` and ``[backup]`` tables.
"""

__all__: list[str] = []
