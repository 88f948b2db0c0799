"""A deployment on disk.

systemd units and timers, Kubernetes manifests, the writer of rendered files, and the
deployment's backup.
"""

__all__: list[str] = []
