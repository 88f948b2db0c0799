"""Kubernetes manifests for a configuration: a CronJob per (agent, routine), the volumes, account and configuration they use.

``render_manifests`` writes, one object per file:

* ``configmap-ghostrunner-config.json``: the configuration's text and the
  persona files it names beside it, mounted read-only at ``/etc/ghostrunner``,
  so every pod reads the files render read;
* ``serviceaccount-ghostrunner.json``: an account with no API token mounted
  (nothing in a run talks to the Kubernetes API);
* ``persistentvolumeclaim-…json``: one ``ReadWriteOnce`` claim per shard of
  ``[fleet]`` (one for all agents without it), mounted at ``--journal-mount``;
  ReadWriteOnce keeps a shard's journals on one node at a time, as the
  journal's writer lock and durable publish need a local filesystem;
* ``networkpolicy-ghostrunner-runs.json``: no connection into the pods (they
  serve nothing), and none out of them either when every agent is simulated,
  as the systemd units' ``IPAddressDeny=any``;
* ``cronjob-…json``: one per (agent, routine), running
  ``ghostrunner run --config=… --agent=AGENT -- ROUTINE``.

The manifests are JSON, which ``kubectl apply -f`` takes as it takes YAML:
the runner depends on no YAML library, and ``json.dumps`` writes every name
as a quoted, escaped string that no reader takes for structure.

**Which slot a pod runs.** A pod is not told the time it was scheduled for:
the CronJob controller records it on the Job
(``batch.kubernetes.io/cronjob-scheduled-timestamp``), but the downward API
shows a pod only its own labels and annotations, which come from the fixed
template, and the pod has no API token to read its Job. So the pod runs
``ghostrunner run`` without ``--at``: its slot is the latest fire at or
before the moment the process starts. That is the Job's own fire S because

* the controller creates the Job at or after S, and not at all later than
  ``startingDeadlineSeconds`` (``misfire_grace``) after it;
* ``activeDeadlineSeconds`` ends the Job, every retry of its pod and the time
  pods wait to be scheduled included, that long after the Job started;
* render checks ``misfire_grace + activeDeadlineSeconds`` is shorter than
  the schedule's shortest gap between fires (in real time, across
  daylight-saving changes) and warns otherwise (``--strict`` refuses): so
  every process of the Job starts before the next fire and picks S.

This holds while the nodes' clocks agree with the control plane's (NTP): a
node whose clock is behind could start a pod before S by its own clock,
which then runs the slot before S (a duplicate if that one has its entry).

**Retries.** ``attempts`` is how many backend calls one run makes, already
retried within the run; a failed pod is a failed run, so ``backoffLimit``
is the slot's later runs, ``slot_retries``, as many as systemd's restart
plan fits in half the routine's shortest gap (:mod:`runner.deploy.restarts`).
Kubernetes waits 10 s, doubling, before each, instead of
``slot_retry_delay``. An exit another start cannot fix (2, 73, 77, 78) fails
the Job at once (``podFailurePolicy``), and a pod evicted by a node drain is
not counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Final

from journal.frame import is_loopback_url
from runner.cron.oncalendar import ScheduleNotExpressibleError, expand_schedule, skipped_local_times
from runner.deploy.k8s._names import CRONJOB_NAME_MAX, DNS_LABEL, dns_name, unique_names
from runner.deploy.k8s._paths import CONFIG_MAP_MAX, CONFIG_PATH, UNSENDABLE, config_files, path_warnings
from runner.deploy.restarts import NO_RESTART_STATUSES, restart_plan
from runner.deploy.unitsyntax import STATE_DIRECTORY, normal_path
from runner.deploy.written import RenderedKind, write_unit_files
from runner.errors import UnitRenderError, quoted
from runner.settings.config import RunnerConfig

__all__ = [
    "CONFIG_PATH",
    "KUBERNETES_VERSION",
    "MANAGED_BY",
    "Manifests",
    "kubernetes_schedule",
    "render_manifests",
    "run_argv",
    "write_manifests",
]

#: The Kubernetes release whose API the manifests are written for, and validated against in the tests (CronJob
#: timeZone and podFailurePolicy are stable from 1.31 on).
KUBERNETES_VERSION: Final = "1.32.0"
#: The label that marks an object (and so its file) as render's own: it replaces only such files, and
#: ``kubectl apply --prune -l app.kubernetes.io/managed-by=ghostrunner`` can remove the objects render no longer writes.
MANAGED_BY: Final = "ghostrunner"
_MANAGED_LABEL: Final = "app.kubernetes.io/managed-by"
#: On a run's pod: the claim of its shard's journals.
_JOURNALS_LABEL: Final = "ghostrunner/journals"
#: The unprivileged user pods run as (the image need not know it: the journals' volume is given its group).
RUN_AS_USER: Final = 10001
_ACCOUNT: Final = "ghostrunner"
_CONFIG_MAP: Final = "ghostrunner-config"
#: Secrets for hosted backends (api_key_env), if any: the Secret's keys become variables, as /etc/ghostrunner/env does under systemd.
_ENV_FROM: Final = "ghostrunner-env"
_CONTAINER: Final = "run"
_STOP_MARGIN: Final = timedelta(seconds=30)  # as under systemd: run_timeout, then time to unwind
#: The CronJob controller looks about every 10 s; a shorter starting deadline can miss a fire altogether.
_CONTROLLER_PERIOD: Final = timedelta(seconds=10)
_QUANTITY: Final = re.compile(r"[1-9][0-9]*(?:Ki|Mi|Gi|Ti|Pi)")
_RESERVED_MOUNTS: Final = ("/", "/etc", "/tmp", "/usr", "/bin", "/lib", "/proc", "/sys", "/dev")  # noqa: S108 - names, not files used


def _is_own(head: bytes) -> bool:
    try:
        data = json.loads(head.decode("utf-8"))
    except (ValueError, RecursionError):  # not JSON (or a truncated or deeply nested one): not render's
        return False
    metadata = data.get("metadata") if isinstance(data, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return isinstance(labels, dict) and labels.get(_MANAGED_LABEL) == MANAGED_BY


#: Escaped as JSON, a character of that data takes at most 6 bytes (\uXXXX) and a few kB hold the rest of the object:
#: no file render writes is longer, and a longer one is not its own.
_MANIFEST_FILES: Final = RenderedKind("manifest", "ghostrunner k8s render", 6 * CONFIG_MAP_MAX + (64 << 10), _is_own)


@dataclass(frozen=True, slots=True)
class Manifests:
    """Rendered manifests and what the operator should know about them.

    Attributes:
        files: file name to its JSON text, in a stable order.
        cronjobs: the CronJobs' names, one per (agent, routine).
        warnings: deployment problems found while rendering (one line each).
    """

    files: dict[str, str]
    cronjobs: tuple[str, ...]
    warnings: tuple[str, ...]


def run_argv(routine: str, agent: str) -> list[str]:
    """The argv of the pod that runs *routine* for *agent*, as ``ghostrunner`` receives it.

    ``--agent=`` and ``--`` keep a name that starts with ``-`` a value, never an option.
    """
    return ["ghostrunner", "run", f"--config={CONFIG_PATH}", f"--agent={agent}", "--", routine]


def _key(table: str, name: str) -> str:
    """The configuration key of *name*; a name that is not a plain word (only through the Python API) is quoted, so the key stays one line."""
    return f"{table}.{name if re.fullmatch(r'[A-Za-z0-9_.@-]+', name) else repr(name)}"


def _container_word(word: str, field: str) -> str:
    """*word* as a container's command carries it: Kubernetes expands ``$(NAME)`` there, and ``$$`` is one ``$``."""
    found = UNSENDABLE.search(word)
    if found:
        raise UnitRenderError(field, f"{quoted(word)} holds U+{ord(found.group()):04X}, which no container argument can carry; remove it")
    return word.replace("$", "$$")


def _runs(values: Sequence[int]) -> str:
    parts: list[str] = []
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        parts.append(f"{values[start]}-{values[end]}" if end - start >= 2 else ",".join(map(str, values[start : end + 1])))
        start = end + 1
    return ",".join(parts)


def kubernetes_schedule(routine: str, schedule: str) -> str:
    """*schedule* as a CronJob's ``schedule`` that fires when the runner's trigger does.

    Each field is written as ``*`` or the numbers it matches (day of week 0-6, Sunday 0), so no reading of
    steps or of crontab's 7 can differ. A CronJob fires when the day of month *or* the day of week matches
    if both are restricted; the runner needs both, so such a schedule is refused.

    Raises:
        ScheduleNotExpressibleError: the schedule has no CronJob equivalent.
    """
    target = "a Kubernetes CronJob schedule"
    fields = expand_schedule(routine, schedule, target)
    full = {"minutes": 60, "hours": 24, "days": 31, "months": 12, "weekdays": 7}
    written = {name: "*" if len(getattr(fields, name)) == size else _runs(getattr(fields, name)) for name, size in full.items()}
    if written["days"] != "*" and written["weekdays"] != "*":
        raise ScheduleNotExpressibleError(
            routine, schedule, "a CronJob fires when the day of month or the day of week matches, the runner only when both do", target
        )
    return " ".join(written[name] for name in full)


def _meta(name: str, namespace: str, component: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "ghostrunner", "app.kubernetes.io/component": component, _MANAGED_LABEL: MANAGED_BY}
    return {"name": name, "namespace": namespace, "labels": labels, **({"annotations": dict(annotations)} if annotations else {})}


def _text(manifest: Mapping[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _checked_options(image: str, namespace: str, journal_mount: str, storage: str) -> str:
    """The normalised --journal-mount, once every option is one Kubernetes takes as meant."""
    if not image.strip() or any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in image):
        raise UnitRenderError(
            "--image", f"expected a container image reference such as 'registry.example/ghostrunner:0.1.0', got {quoted(image)}"
        )
    if not DNS_LABEL.fullmatch(namespace):
        raise UnitRenderError(
            "--namespace",
            f"expected a namespace name (1-63 lowercase letters, digits or '-', starting and ending with a "
            f"letter or digit), got {quoted(namespace)}",
        )
    if not _QUANTITY.fullmatch(storage):
        raise UnitRenderError("--storage", f"expected a size such as 1Gi or 500Mi, got {quoted(storage)}")
    # A plain path: nothing in it that a container runtime, a shell or $(NAME) expansion could read otherwise (it is also a variable's value).
    if not re.fullmatch(r"/[A-Za-z0-9._/-]*", journal_mount):
        raise UnitRenderError(
            "--journal-mount",
            f"expected an absolute path in the container, of letters, digits, '.', '_', '-' and '/', got {quoted(journal_mount)}",
        )
    mount = normal_path(journal_mount)
    if mount in _RESERVED_MOUNTS or PurePosixPath(mount).is_relative_to(CONFIG_PATH.parent):
        raise UnitRenderError(
            "--journal-mount",
            f"{quoted(journal_mount)} would hide the container's own files or its configuration; "
            f"mount the journals on a directory of their own such as {STATE_DIRECTORY}",
        )
    return mount


def _network_policy(config: RunnerConfig, namespace: str) -> dict[str, str]:
    """The runs' NetworkPolicy: nothing in; nothing out either when no backend needs the network (simulated agents only)."""
    offline = all(agent.backend.type == "simulated" for agent in config.agents.values())
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ghostrunner", "app.kubernetes.io/component": "run"}},
        "policyTypes": ["Ingress", "Egress"] if offline else ["Ingress"],
        "ingress": [],
    }
    if offline:
        spec["egress"] = []
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta("ghostrunner-runs", namespace, "runs"),
        "spec": spec,
    }
    return {"networkpolicy-ghostrunner-runs.json": _text(manifest)}


def _claims(config: RunnerConfig, namespace: str, storage: str) -> tuple[dict[str, str], dict[str, str]]:
    """(file name to text of each PersistentVolumeClaim, agent to its claim's name)."""
    shards = dict(config.fleet.shards) if config.fleet is not None else {"": tuple(sorted(config.agents))}
    files: dict[str, str] = {}
    claim_of: dict[str, str] = {}
    for shard, agents in sorted(shards.items()):
        name = dns_name("ghostrunner-journals", shard) if shard else "ghostrunner-journals"
        metadata = _meta(name, namespace, "journals", {"ghostrunner/shard": shard} if shard else None)
        manifest = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
        }
        files[f"persistentvolumeclaim-{name}.json"] = _text(manifest)
        claim_of |= dict.fromkeys(agents, name)
    return files, claim_of


def _pod_spec(
    config: RunnerConfig, agent: str, routine: str, *, image: str, mount: str, claim: str, items: list[dict[str, str]]
) -> dict[str, Any]:
    hybrid = config.agents[agent].memory == "hybrid"  # the sentence model in memory
    fields = {f"--agent={agent}": _key("agents", agent), routine: _key("routines", routine)}
    container = {
        "name": _CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": [_container_word(word, fields.get(word, "--config")) for word in run_argv(routine, agent)],
        "env": [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "STATE_DIRECTORY", "value": _container_word(mount, "--journal-mount")},
        ],
        "envFrom": [{"secretRef": {"name": _ENV_FROM, "optional": True}}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "2Gi" if hybrid else "512Mi"}},
        # The systemd sandbox's NoNewPrivileges=, CapabilityBoundingSet= (empty) and ProtectSystem=strict, in a container's words.
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "journals", "mountPath": mount},
            {"name": "config", "mountPath": str(CONFIG_PATH.parent), "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - the pod's own empty /tmp, as PrivateTmp=yes gives
        ],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    # A ReadWriteOnce volume is attached to one node at a time: a pod of the shard elsewhere waits (within its deadline) for the
    # others to end, so the scheduler is asked to put a shard's pods beside each other.
    beside = {"labelSelector": {"matchLabels": {_JOURNALS_LABEL: claim}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": beside}]}},
        "serviceAccountName": _ACCOUNT,
        "automountServiceAccountToken": False,
        # No variables for every Service in the namespace: nothing the run reads, and nothing $(NAME) could pick up.
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "journals", "persistentVolumeClaim": {"claimName": claim}},
            {"name": "config", "configMap": {"name": _CONFIG_MAP, "defaultMode": 0o444, "items": items}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }


def render_manifests(
    config: RunnerConfig,
    *,
    image: str,
    namespace: str = "ghostrunner",
    journal_mount: str = str(STATE_DIRECTORY),
    storage: str = "1Gi",
    today: date | None = None,
) -> Manifests:
    """Render every manifest for *config* (module docstring: what, and why each setting).

    Args:
        config: the validated configuration, read from a file (its text goes into the ConfigMap).
        image: the container image holding this ghostrunner (``--image``).
        namespace: the namespace of every object (``--namespace``).
        journal_mount: where each shard's volume is mounted in its pods (``--journal-mount``).
        storage: each volume's requested size (``--storage``).
        today: the date the gaps between fires are measured from (default: today).

    Raises:
        UnitRenderError: an option Kubernetes would not take as meant, a name no container argument can carry, or no
            configuration file.
        ScheduleNotExpressibleError: a routine's schedule has no CronJob equivalent.
    """
    if config.config_text is None or config.config_file is None:
        raise UnitRenderError("--config", "manifests need a configuration file for the pods to read; pass --config FILE")
    mount = _checked_options(image, namespace, journal_mount, storage)
    today = today or date.today()  # noqa: DTZ011 - the host's date only picks where the gaps between fires are measured
    warnings = path_warnings(config, mount)
    if "@" not in image and ":" not in image.rsplit("/", 1)[-1]:
        warnings.append(f"--image {image!r} has no tag or digest, so each node pulls whatever 'latest' is then; name a version")
    if config.misfire_grace < _CONTROLLER_PERIOD:
        warnings.append(
            f"runner.misfire_grace is {int(config.misfire_grace.total_seconds())} s, the CronJobs' startingDeadlineSeconds: "
            "the controller looks about every 10 s and can miss a fire altogether; allow at least 10s"
        )
    data, items = config_files(config.config_text, config.config_file.parent)
    files = {
        "configmap-ghostrunner-config.json": _text(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(_CONFIG_MAP, namespace, "config"), "data": data}
        )
    }
    files["serviceaccount-ghostrunner.json"] = _text(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(_ACCOUNT, namespace, "runs"),
            "automountServiceAccountToken": False,
        }
    )
    files |= _network_policy(config, namespace)
    warnings += [
        f"the openai backend of agent {name!r}, {agent.backend.base_url!r}, is on localhost, which in a pod is the pod itself; "
        "point base_url at the model server's Service"
        for name, agent in sorted(config.agents.items())
        if agent.backend.type == "openai" and is_loopback_url(agent.backend.base_url)
    ]
    claim_files, claim_of = _claims(config, namespace, storage)
    files |= claim_files
    cronjobs: list[tuple[str, str]] = []
    timezone = config.timezone.key
    run_time = config.run_timeout + _STOP_MARGIN
    for routine_name in sorted({name for agent in config.agents.values() for name in agent.routines}):
        # Kubernetes' cron library steps through the hours in real time, so it never meets a skipped one (as systemd's timers).
        skipped = skipped_local_times(routine_name, config.routines[routine_name].schedule, config.timezone, today)
        if skipped:
            warnings.append(
                f"routine {routine_name!r} ({config.routines[routine_name].schedule}) is due at {skipped[0]:%Y-%m-%d %H:%M}, a time "
                f"{timezone} skips for daylight saving: its CronJobs will not fire that day (serve runs it after the gap); "
                "pick a time outside the gap"
            )
    for agent_name, agent in sorted(config.agents.items()):
        for routine_name in agent.routines:
            schedule = config.routines[routine_name].schedule
            name = dns_name("", routine_name, agent_name, limit=CRONJOB_NAME_MAX)
            plan = restart_plan(config, schedule, run_time, today)
            deadline = (plan.reruns + 1) * run_time
            if config.misfire_grace + deadline >= plan.gap and agent_name == min(
                name for name, other in config.agents.items() if routine_name in other.routines
            ):  # once a routine
                warnings.append(
                    f"routine {routine_name!r} ({schedule}) fires every {int(plan.gap.total_seconds())} s or more often, within "
                    f"misfire_grace + run_timeout + 30 s ({int((config.misfire_grace + deadline).total_seconds())} s): a late pod "
                    "could start after the next fire and run that slot instead of its own; shorten misfire_grace or run_timeout"
                )
            job = {
                # Pod retries are the slot's later runs (slot_retries, as systemd restarts them), not `attempts`, which each run spends itself.
                "backoffLimit": plan.reruns,
                "activeDeadlineSeconds": int(deadline.total_seconds()),
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "onExitCodes": {"containerName": _CONTAINER, "operator": "In", "values": list(NO_RESTART_STATUSES)},
                        },
                        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    ]
                },
                "template": {
                    "metadata": {"labels": _meta(name, namespace, "run")["labels"] | {_JOURNALS_LABEL: claim_of[agent_name]}},
                    "spec": _pod_spec(config, agent_name, routine_name, image=image, mount=mount, claim=claim_of[agent_name], items=items),
                },
            }
            manifest = {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": _meta(name, namespace, "run", {"ghostrunner/agent": agent_name, "ghostrunner/routine": routine_name}),
                "spec": {
                    "schedule": kubernetes_schedule(routine_name, schedule),
                    "timeZone": timezone,
                    "concurrencyPolicy": "Forbid",
                    "startingDeadlineSeconds": int(config.misfire_grace.total_seconds()),
                    "suspend": False,
                    "successfulJobsHistoryLimit": 1,
                    "failedJobsHistoryLimit": 3,
                    "jobTemplate": {"spec": job},
                },
            }
            cronjobs.append((f"routine {routine_name!r} of agent {agent_name!r}", name))
            files[f"cronjob-{name}.json"] = _text(manifest)
    unique_names(cronjobs)
    return Manifests(files=files, cronjobs=tuple(name for _, name in cronjobs), warnings=tuple(warnings))


def write_manifests(manifests: Manifests, out: Path) -> list[Path]:
    """Write the manifests into *out* (created if missing), all or none; return their paths.

    As :func:`runner.deploy.systemd.units.write_units`: nothing through a symbolic link, and only files render wrote before
    (an object labelled ``app.kubernetes.io/managed-by: ghostrunner``) are replaced.

    Raises:
        UnitRenderError: *out* or a file in it is a symbolic link, not a regular file, or a file render did not write.
        RunnerError: the directory or a file cannot be written (the operating system's reason).
    """
    return write_unit_files(manifests.files, out, _MANIFEST_FILES)
