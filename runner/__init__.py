"""ghostrunner: a cron-oriented scheduler that runs reflective routines for agents and writes what they say to their journals.

    >>> from runner import load_config, run_at
    >>> config = load_config("ghostrunner.toml")
    >>> result = run_at(config, "motoko", "evening")

Layers, bottom-up: a module imports from its own layer and those listed before it, never from one
listed after it (tests/test_layout.py holds every import to this, and finds no import circle)::

    errors:   the exception tree
    processes: processes and signals: what a program left behind, a signal's name, deferred signals
    cron:     schedules as times
    settings: the configuration and the state directory
    backends: the Backend protocol and its implementations
    run:      one run, simulation, the demo
    schedule: ghostrunner serve
    monitor:  logs, status, history, the runs report
    deploy:   systemd units, Kubernetes manifests, backup
    fleet:    a fleet of runners on Celery
    cli:      the ghostrunner command (and python -m runner)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.errors import (
    BackendError,
    BackendReplyError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    FleetUnavailableError,
    NoScheduledTimeError,
    RunnerError,
    SchedulerBusyError,
    StateFileError,
    UnitRenderError,
    UnknownNameError,
)

if TYPE_CHECKING:
    from runner.backends import Backend, ReflectionRequest, build_backend
    from runner.cron.oncalendar import ScheduleNotExpressibleError
    from runner.deploy.k8s.manifests import KUBERNETES_VERSION, Manifests, render_manifests, write_manifests
    from runner.deploy.systemd.units import Rendering, default_exec_argv, refuse_warnings, render_units, write_units
    from runner.monitor.history import build_history
    from runner.monitor.logs import configure_logging
    from runner.monitor.status import StatusReport, build_report, read_log
    from runner.run.contract import OUTCOMES, RunInterrupted
    from runner.run.demo import DemoReport, run_demo
    from runner.run.engine import RunResult, execute_run, run_at, run_slot
    from runner.run.pauses import PauseBook
    from runner.run.simulate import SimulationSummary, simulate, simulate_agent, simulation_window
    from runner.schedule.notify import Notifier
    from runner.schedule.scheduler import Scheduler
    from runner.settings.config import CONFIG_ENVVAR, DURATION_EXPECTED, AgentConfig, RunnerConfig, load_config, parse_duration

# The module of each name above, imported on the name's first use: a `ghostrunner run` process loads the run's
# modules, not the Kubernetes renderer, the scheduler, the simulator or the monitor it never calls.
_HOMES = {
    "runner.backends": ("Backend", "ReflectionRequest", "build_backend"),
    "runner.cron.oncalendar": ("ScheduleNotExpressibleError",),
    "runner.deploy.k8s.manifests": ("KUBERNETES_VERSION", "Manifests", "render_manifests", "write_manifests"),
    "runner.deploy.systemd.units": ("Rendering", "default_exec_argv", "refuse_warnings", "render_units", "write_units"),
    "runner.monitor.history": ("build_history",),
    "runner.monitor.logs": ("configure_logging",),
    "runner.monitor.status": ("StatusReport", "build_report", "read_log"),
    "runner.run.contract": ("OUTCOMES", "RunInterrupted"),
    "runner.run.demo": ("DemoReport", "run_demo"),
    "runner.run.engine": ("RunResult", "execute_run", "run_at", "run_slot"),
    "runner.run.pauses": ("PauseBook",),
    "runner.run.simulate": ("SimulationSummary", "simulate", "simulate_agent", "simulation_window"),
    "runner.schedule.notify": ("Notifier",),
    "runner.schedule.scheduler": ("Scheduler",),
    "runner.settings.config": ("CONFIG_ENVVAR", "DURATION_EXPECTED", "AgentConfig", "RunnerConfig", "load_config", "parse_duration"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME_OF})


__all__ = [
    "CONFIG_ENVVAR",
    "DURATION_EXPECTED",
    "KUBERNETES_VERSION",
    "OUTCOMES",
    "AgentConfig",
    "Backend",
    "BackendError",
    "BackendReplyError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "ConfigError",
    "DemoReport",
    "FleetUnavailableError",
    "Manifests",
    "NoScheduledTimeError",
    "Notifier",
    "PauseBook",
    "ReflectionRequest",
    "Rendering",
    "RunInterrupted",
    "RunResult",
    "RunnerConfig",
    "RunnerError",
    "ScheduleNotExpressibleError",
    "Scheduler",
    "SchedulerBusyError",
    "SimulationSummary",
    "StateFileError",
    "StatusReport",
    "UnitRenderError",
    "UnknownNameError",
    "build_backend",
    "build_history",
    "build_report",
    "configure_logging",
    "default_exec_argv",
    "execute_run",
    "load_config",
    "parse_duration",
    "read_log",
    "refuse_warnings",
    "render_manifests",
    "render_units",
    "run_at",
    "run_demo",
    "run_slot",
    "simulate",
    "simulate_agent",
    "simulation_window",
    "write_manifests",
    "write_units",
]
