"""systemd units: the service and the timers (or a fleet's beat and workers) rendered from the templates in ``runner/data/systemd``, sandboxed."""

__all__: list[str] = []
