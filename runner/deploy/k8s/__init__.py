"""Kubernetes manifests: a CronJob per agent and routine, their ConfigMap and volume, sandboxed like the units."""

__all__: list[str] = []
