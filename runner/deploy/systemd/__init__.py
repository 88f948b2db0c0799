"""systemd units: the service and the timers rendered from the templates in ``runner/data/systemd``, sandboxed."""

__all__: list[str] = []
