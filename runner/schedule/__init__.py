"""``ghostrunner serve``.

APScheduler wiring and its loop, catch-up, the run queue, reload, the deployment lock and the
systemd notification protocol.
"""

__all__: list[str] = []
