"""What a run's pod reads and where it writes: the ConfigMap's files, and the paths that would miss the journals' volume.

A pod reads the configuration from the ConfigMap mounted at ``/etc/ghostrunner``
(with the persona files it names beside it) and writes only on the volume
mounted at ``--journal-mount``: its root filesystem is read-only.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Final

from runner.deploy.k8s._names import dns_name
from runner.deploy.unitsyntax import normal_path
from runner.errors import UnitRenderError
from runner.settings.config import RunnerConfig
from runner.settings.state_dir import state_dir

__all__ = ["CONFIG_MAP_MAX", "CONFIG_PATH", "UNSENDABLE", "config_files", "path_warnings"]

#: Where pods read the configuration: the ConfigMap's file of it.
CONFIG_PATH: Final = PurePosixPath("/etc/ghostrunner/ghostrunner.toml")
#: What a ConfigMap may hold: Kubernetes refuses more than 1 MiB of data.
CONFIG_MAP_MAX: Final = 1 << 20
#: What cannot reach a pod as written: NUL ends an exec argument, and a lone surrogate is not UTF-8.
UNSENDABLE: Final = re.compile(r"[\x00\ud800-\udfff]")


def path_warnings(config: RunnerConfig, mount: str) -> list[str]:
    """Where the pods would write outside the journals' volume (a read-only root filesystem there), or read files they do not have.

    Paths are judged as a pod resolves them: a relative one beside ``/etc/ghostrunner``, which holds the configuration
    and the persona files beside it alone, and a journal without ``journal_root`` under ``$STATE_DIRECTORY``, which
    the pods set to the mount.
    """
    raw = tomllib.loads(config.config_text or "")
    runner_table, agents_table = raw.get("runner", {}), raw.get("agents", {})
    volume = PurePosixPath(mount)
    warnings = []

    def relative(value: object) -> bool:
        return isinstance(value, str) and not value.startswith("/")

    for key, value in [
        ("runner.journal_root", runner_table.get("journal_root")),
        ("runner.lock_file", runner_table.get("lock_file")),
        *(
            (f"agents.{name}.{item}", table.get(item))
            for name, table in sorted(agents_table.items())
            for item in ("journal_root", "persona")
        ),
    ]:
        if relative(value):
            if key.endswith(".persona") and _beside(value) is not None:
                continue  # in the ConfigMap, beside the configuration (config_files)
            warnings.append(
                f"{key} {value!r} is relative: a pod resolves it beside {CONFIG_PATH}, where only the configuration "
                f"and the persona files beside it are; write it absolute ({'under ' + mount if not key.endswith('persona') else 'where the image holds it'})"
            )
    configured = "journal_root" in runner_table
    for name, agent in sorted(config.agents.items()):
        own = agents_table.get(name, {}).get("journal_root")
        if not configured and own is None:
            continue  # the pod's default: $STATE_DIRECTORY/AGENT, on the volume
        root = normal_path(str(agent.journal_root))
        if not relative(own if own is not None else runner_table["journal_root"]) and not PurePosixPath(root).is_relative_to(volume):
            warnings.append(
                f"the journal of agent {name!r}, {root!r}, is outside --journal-mount {mount!r}, on the pod's read-only root "
                f"filesystem: its runs would fail; set its journal_root under {mount}"
            )
    lock = runner_table.get("lock_file")
    if (configured or lock is not None) and not relative(lock if lock is not None else runner_table.get("journal_root")):
        state = normal_path(str(state_dir(config)))
        if not PurePosixPath(state).is_relative_to(volume):
            warnings.append(
                f"the state directory {state!r} (beside runner.lock_file: pauses and slot locks) is outside --journal-mount "
                f"{mount!r}, on the pod's read-only root filesystem: every run would fail; set runner.lock_file under {mount}"
            )
    return warnings


def _beside(value: str) -> str | None:
    """The path of a relative persona file below the configuration's directory (None: it is not, as '../p.toml' is)."""
    normal = normal_path(value)
    # '~' is the home directory of whoever reads the configuration, not the configuration's directory.
    return None if normal.startswith(("/", "..", "~")) or UNSENDABLE.search(normal) else normal


def config_files(text: str, directory: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The ConfigMap's data: the configuration's *text* and each persona file it names relatively, below its *directory*,
    so a pod finds them where the runner looks (and the volume's items, which lay them out there)."""
    data = {CONFIG_PATH.name: text}
    items = [{"key": CONFIG_PATH.name, "path": CONFIG_PATH.name}]
    agents = tomllib.loads(text).get("agents", {})
    for value in sorted({table["persona"] for table in agents.values() if isinstance(table.get("persona"), str)}):
        path = _beside(value)
        if path is None:
            continue
        key = dns_name("persona", path)
        data[key] = (directory / path).read_text(encoding="utf-8")  # read and checked by load_config already
        items.append({"key": key, "path": path})
    size = sum(len(key.encode("utf-8")) + len(value.encode("utf-8")) for key, value in data.items())
    if size > CONFIG_MAP_MAX:
        raise UnitRenderError(
            "--config",
            f"the configuration and the persona files beside it hold {size} bytes, more than the "
            f"{CONFIG_MAP_MAX} a ConfigMap holds; make them smaller, or put the personas in the image and name them "
            "by absolute paths",
            exit_code=78,
        )
    return data, items
