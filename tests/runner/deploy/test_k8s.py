"""`ghostrunner k8s render`: manifests the Kubernetes API's own schemas accept, CronJobs that run each pair's slot, and names nothing can inject into.

Every file is validated with kubernetes-validate, strictly (no field the API does not know), against
runner.deploy.k8s.manifests.KUBERNETES_VERSION. Container arguments are read back as Kubernetes reads them (its
``$(NAME)`` expansion, ported below from its documented rules) and then by the real ``run`` command's
parser, so a hostile agent or routine name either is refused with one line or reaches ``ghostrunner run``
exactly as given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner import KUBERNETES_VERSION, Manifests, render_manifests, render_units
from runner.cli.cli import cli
from runner.cli.cli import run as run_command
from runner.cli.support import Settings
from runner.cron.oncalendar import ScheduleNotExpressibleError
from runner.cron.slots import cron_trigger, fire_times
from runner.deploy.k8s._names import CRONJOB_NAME_MAX, DNS_LABEL, dns_name
from runner.deploy.k8s.manifests import CONFIG_PATH, kubernetes_schedule, run_argv
from runner.deploy.restarts import NO_RESTART_STATUSES
from runner.errors import UnitRenderError
from runner.settings.config import RunnerConfig, load_config
from tests._docs import block_after
from tests._support import PERSONA, REPO, ghostrunner

IMAGE = "registry.example/ghostrunner:0.1.0"
#: Schedules of every shape the runner's cron takes: steps, ranges, lists, names, crontab's 7 for Sunday, a day or a weekday.
SCHEDULES = {
    "every-4h": "0 */4 * * *",
    "evening": "30 21 * * *",
    "weekly": "0 22 * * 7",
    "weekdays": "0 7 * * 1-5",
    "office": "*/15 9-17 * * mon-fri",
    "odd": "5/20 1,3,5-8 1-10/3 jan,mar-may *",
    "weekend": "0 12 * * sat,sun",
    "monthly": "0 8 1 * *",
}


def _config_file(directory: Path, *, runner: str = 'journal_root = "/var/lib/ghostrunner/{agent}"\nmisfire_grace = "5m"\n', routines: dict[str, str] | None = None,
                 agents: tuple[str, ...] = ("motoko", "Batou.2@east"), extra: str = "") -> Path:
    """A configuration in Europe/Berlin: each agent runs every routine of *routines* (default: SCHEDULES), the persona beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    chosen = SCHEDULES if routines is None else routines
    body = f'[runner]\ntimezone = "Europe/Berlin"\n{runner}\n'
    body += "".join(f'[routines.{name}]\nkind = "note"\nschedule = "{schedule}"\nslot = "minute"\nquestion = "q?"\nprompt = "p"\n\n'
                    for name, schedule in chosen.items())
    body += "".join(f'[agents."{agent}"]\npersona = "motoko.toml"\nroutines = [{", ".join(repr(name) for name in chosen)}]\n\n' for agent in agents)
    path = directory / "ghostrunner.toml"
    path.write_text(body + extra, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def base_config(tmp_path_factory: pytest.TempPathFactory) -> RunnerConfig:
    return load_config(_config_file(tmp_path_factory.mktemp("k8s")))


def _render(config: RunnerConfig, **options: Any) -> Manifests:
    return render_manifests(config, image=IMAGE, today=date(2026, 9, 1), **options)


def _objects(manifests: Manifests) -> dict[str, dict[str, Any]]:
    return {name: json.loads(text) for name, text in manifests.files.items()}


def _cronjobs(manifests: Manifests) -> dict[tuple[str, str], dict[str, Any]]:
    """(agent, routine) -> its CronJob."""
    found = {}
    for data in _objects(manifests).values():
        if data["kind"] == "CronJob":
            annotations = data["metadata"]["annotations"]
            found[annotations["ghostrunner/agent"], annotations["ghostrunner/routine"]] = data
    return found


def _container(cronjob: dict[str, Any]) -> dict[str, Any]:
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


# --- Kubernetes' reading of a container's command (k8s.io/kubernetes third_party/forked/golang/expansion) -----------------

RESOLVED = "\uffff"  # what any $(NAME) that Kubernetes expands becomes here: nothing a test input holds


def expand(word: str) -> str:
    """*word* as the kubelet hands it to the program: ``$$`` is ``$``, ``$(NAME)`` is the variable's value, and any other ``$``
    stays as written (an unclosed ``$(`` too). Every NAME resolves, to RESOLVED, so no unescaped reference can pass unseen."""
    out, position = [], 0
    while position < len(word):
        char = word[position]
        if char != "$" or position + 1 == len(word):
            out.append(char)
            position += 1
            continue
        following = word[position + 1]
        if following == "$":
            out.append("$")
            position += 2
        elif following == "(" and ")" in word[position + 2:]:
            out.append(RESOLVED)
            position = word.index(")", position + 2) + 1
        else:
            out.append("$" + following)
            position += 2
    return "".join(out)


def parsed_run(argv: list[str]) -> dict[str, Any]:
    """What the real `ghostrunner run` reads from *argv* (the program's own name first), without running it."""
    assert argv[:2] == ["ghostrunner", "run"]
    parent = click.Context(cli, obj=Settings(None, None))
    return dict(run_command.make_context("run", argv[2:], parent=parent).params)


# --- the manifests, against the API's schemas ------------------------------------------------------------------------------

def test_every_rendered_file_validates_strictly_against_the_named_kubernetes_version(tmp_path: Path, base_config: RunnerConfig) -> None:
    """Each file holds one object the API's schema for KUBERNETES_VERSION accepts with no unknown field; the kinds are as documented."""
    out = tmp_path / "k8s"
    result = ghostrunner("k8s", "render", "--config", str(base_config.config_file), "--image", IMAGE, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    kinds = []
    for path in sorted(out.iterdir()):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert kubernetes_validate.validate(data, KUBERNETES_VERSION, strict=True) == KUBERNETES_VERSION.rsplit(".", 1)[0]
        kinds.append(data["kind"])
        assert path.name == f"{data['kind'].lower()}-{data['metadata']['name']}.json"
    assert sorted(set(kinds)) == ["ConfigMap", "CronJob", "NetworkPolicy", "PersistentVolumeClaim", "ServiceAccount"]
    assert kinds.count("CronJob") == len(SCHEDULES) * 2 and kinds.count("PersistentVolumeClaim") == 1


def test_the_validation_would_catch_a_broken_manifest(base_config: RunnerConfig) -> None:
    """The check is meaningful: a misspelt field, a wrong type, a misspelt field deep in the pod are each refused.

    (The schemas carry no enumerations: that concurrencyPolicy is "Forbid" is checked by value below.)
    """
    cronjob = next(iter(_cronjobs(_render(base_config)).values()))
    for path, key, value in ((["spec"], "startingDeadlineSecond", 600), (["spec"], "startingDeadlineSeconds", "600"),
                             (["spec", "jobTemplate", "spec", "template", "spec"], "automountServiceAccountTokens", False)):
        data = json.loads(json.dumps(cronjob))
        place = data
        for step in path:
            place = place[step]
        place[key] = value
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(data, KUBERNETES_VERSION, strict=True)


def test_each_cronjob_runs_its_pairs_slot_in_the_configured_zone(base_config: RunnerConfig) -> None:
    """timeZone, schedule, Forbid, startingDeadlineSeconds == misfire_grace, and an argv `run` reads as exactly this pair."""
    cronjobs = _cronjobs(_render(base_config))
    assert set(cronjobs) == {(agent, routine) for agent in base_config.agents for routine in SCHEDULES}
    for (agent, routine), cronjob in cronjobs.items():
        spec = cronjob["spec"]
        assert spec["timeZone"] == base_config.timezone.key == "Europe/Berlin"
        assert spec["concurrencyPolicy"] == "Forbid"
        assert spec["startingDeadlineSeconds"] == base_config.misfire_grace.total_seconds() == 300
        assert spec["schedule"] == kubernetes_schedule(routine, SCHEDULES[routine])
        command = [expand(word) for word in _container(cronjob)["command"]]
        assert command == run_argv(routine, agent) == ["ghostrunner", "run", f"--config={CONFIG_PATH}", f"--agent={agent}", "--", routine]
        assert "args" not in _container(cronjob)
        params = parsed_run(command)
        assert (params["routine"], params["agent"], params["config_path"], params["at_text"]) == (routine, agent, Path(CONFIG_PATH), None)
    plain = {routine for routine, schedule in SCHEDULES.items() if kubernetes_schedule(routine, schedule) == schedule}
    assert plain == {"evening", "weekdays", "monthly"}  # a plain schedule is written as the configuration has it


@pytest.mark.parametrize("base", [datetime(2026, 3, 20, tzinfo=UTC), datetime(2026, 10, 20, tzinfo=UTC)], ids=["spring", "autumn"])
def test_cronjob_schedules_fire_when_the_runner_does(base: datetime) -> None:
    """Read with the runner's own trigger, each written schedule fires exactly as the configured one, for a year across DST; it holds
    only numbers, lists, ranges and '*', weekdays 0-6, and never restricts both day fields (which a CronJob would OR)."""
    zone = load_config(None).timezone
    for routine, schedule in SCHEDULES.items():
        written = kubernetes_schedule(routine, schedule)
        assert re.fullmatch(r"[0-9*,\- ]+", written), written
        _, _, day, _, weekday = written.split()
        assert day == "*" or weekday == "*"
        assert all(int(number) <= 6 for number in re.findall(r"\d+", weekday))
        end = base + timedelta(days=366)
        ours = list(islice(fire_times(cron_trigger(schedule, zone), base, end), 5000))
        theirs = list(islice(fire_times(cron_trigger(written, zone), base, end), 5000))
        assert ours == theirs and ours, (routine, schedule, written)


def test_a_schedule_that_needs_both_day_fields_is_refused_with_one_line(tmp_path: Path) -> None:
    """The first Sunday of a month (days 1-7 AND Sunday) would fire on every day 1-7 and every Sunday as a CronJob: exit 78, nothing written."""
    path = _config_file(tmp_path, routines={"first-sunday": "0 9 1-7 * sun"})
    result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(tmp_path / "out"))
    assert result.returncode == 78
    assert result.stderr.startswith("ghostrunner: error: routine 'first-sunday': schedule '0 9 1-7 * sun' cannot be written as a Kubernetes "
                                    "CronJob schedule (a CronJob fires when the day of month or the day of week matches, the runner only when both do)")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
    with pytest.raises(ScheduleNotExpressibleError, match=r"cannot be written as a Kubernetes CronJob schedule \(day of week '8' is not 0-7"):
        kubernetes_schedule("r", "0 9 * * 8")


def test_the_job_retries_as_the_timer_restarts_and_ends_before_the_next_fire(base_config: RunnerConfig) -> None:
    """backoffLimit is the slot's later runs that the systemd units allow (StartLimitBurst - 1), the exits another start cannot fix
    fail the Job at once, and activeDeadlineSeconds covers every run of run_timeout + 30 s."""
    units = render_units(base_config, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/g.toml", today=date(2026, 9, 1))
    for (_, routine), cronjob in _cronjobs(_render(base_config)).items():
        job = cronjob["spec"]["jobTemplate"]["spec"]
        service = units.files[f"ghostrunner-run-{routine}@.service"]
        burst = re.search(r"^StartLimitBurst=(\d+)$", service, re.MULTILINE)
        reruns = int(burst.group(1)) - 1 if burst else 0
        assert job["backoffLimit"] == reruns, routine
        assert job["activeDeadlineSeconds"] == (reruns + 1) * (base_config.run_timeout.total_seconds() + 30)
        [fail, ignore] = job["podFailurePolicy"]["rules"]
        assert fail == {"action": "FailJob", "onExitCodes": {"containerName": "run", "operator": "In", "values": list(NO_RESTART_STATUSES)}}
        assert ignore["action"] == "Ignore" and ignore["onPodConditions"][0]["type"] == "DisruptionTarget"
        assert job["template"]["spec"]["restartPolicy"] == "Never"
        assert (cronjob["spec"]["successfulJobsHistoryLimit"], cronjob["spec"]["failedJobsHistoryLimit"]) == (1, 3)
    assert {routine: _cronjobs(_render(base_config))["motoko", routine]["spec"]["jobTemplate"]["spec"]["backoffLimit"]
            for routine in ("evening", "office")} == {"evening": 3, "office": 0}


def test_a_schedule_whose_late_run_could_reach_the_next_fire_warns_and_strict_refuses(tmp_path: Path) -> None:
    """Every 10 minutes with misfire_grace 10m: a pod starting late could run the next slot as its own; --strict writes nothing."""
    path = _config_file(tmp_path, routines={"often": "*/10 * * * *", "evening": "30 21 * * *"})
    warnings = _render(load_config(path)).warnings
    gaps = [warning for warning in warnings if "skips for daylight saving" not in warning]  # 02:00-02:50 on the spring-forward day
    assert gaps == [("routine 'often' (*/10 * * * *) fires every 600 s or more often, within misfire_grace + run_timeout + 30 s (630 s): "
                     "a late pod could start after the next fire and run that slot instead of its own; shorten misfire_grace or run_timeout")]
    result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(tmp_path / "out"), "--strict")
    assert result.returncode == 78 and not (tmp_path / "out").exists()
    assert result.stderr.splitlines()[-1].startswith("ghostrunner: error: --strict: render found 2 problems (the warnings above) and wrote no manifest")
    quick = _config_file(tmp_path / "quick", runner='journal_root = "/var/lib/ghostrunner/{agent}"\nmisfire_grace = "1m"\nrun_timeout = "1m"\n',
                         routines={"often": "*/10 * * * *"})
    assert [warning for warning in _render(load_config(quick)).warnings if "skips for daylight saving" not in warning] == []


def test_a_time_the_zone_skips_warns(tmp_path: Path) -> None:
    """02:30 does not exist on Berlin's spring-forward day: the CronJob does not fire then, while serve runs it after the gap."""
    path = _config_file(tmp_path, routines={"night": "30 2 * * *", "evening": "30 21 * * *"})
    assert _render(load_config(path)).warnings == (
        ("routine 'night' (30 2 * * *) is due at 2027-03-28 02:30, a time Europe/Berlin skips for daylight saving: its CronJobs will not fire "
         "that day (serve runs it after the gap); pick a time outside the gap"),)


def test_the_pod_is_sandboxed_as_the_systemd_units_are(base_config: RunnerConfig) -> None:
    """Non-root with a fixed user, read-only root, no privilege escalation or capability, RuntimeDefault seccomp, no API token, limits."""
    objects = _objects(_render(base_config))
    [account] = [data for data in objects.values() if data["kind"] == "ServiceAccount"]
    assert account["automountServiceAccountToken"] is False
    for cronjob in _cronjobs(_render(base_config)).values():
        pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account["metadata"]["name"] and pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        context = _container(cronjob)["securityContext"]
        assert context == {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                           "capabilities": {"drop": ["ALL"]}}
        limits = _container(cronjob)["resources"]["limits"]
        assert set(limits) == {"cpu", "memory"}
        mounts = {mount["name"]: mount for mount in _container(cronjob)["volumeMounts"]}
        assert mounts["config"] == {"name": "config", "mountPath": "/etc/ghostrunner", "readOnly": True}
        assert mounts["journals"]["mountPath"] == "/var/lib/ghostrunner" and "readOnly" not in mounts["journals"]


@pytest.mark.parametrize(("backend", "offline", "warning"), [
    ("", True, None),
    ('backend = { type = "openai", base_url = "https://api.example.com/v1" }\n', False, None),
    ('backend = { type = "openai", base_url = "http://127.0.0.1:11434/v1" }\n', False, "the openai backend of agent 'motoko', 'http://127.0.0.1:11434/v1', is on localhost"),
], ids=["simulated", "remote", "localhost"])
def test_the_network_policy_follows_the_backends(tmp_path: Path, backend: str, offline: bool, warning: str | None) -> None:
    """Nothing reaches into a run's pod; with simulated agents only nothing leaves it (IPAddressDeny=any); localhost in a pod warns."""
    path = _config_file(tmp_path, routines={"evening": "30 21 * * *"}, agents=("motoko",), extra=backend)  # in motoko's table, the last
    manifests = _render(load_config(path))
    [policy] = [data for data in _objects(manifests).values() if data["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"] == []
    assert policy["spec"]["policyTypes"] == (["Ingress", "Egress"] if offline else ["Ingress"])
    assert policy["spec"].get("egress") == ([] if offline else None)
    selector = policy["spec"]["podSelector"]["matchLabels"]
    for cronjob in _cronjobs(manifests).values():
        assert selector.items() <= cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"].items()
    assert [item[:len(warning or "")] for item in manifests.warnings] == ([] if warning is None else [warning])


def test_the_configmap_holds_the_configuration_and_its_persona_where_the_pod_looks(base_config: RunnerConfig) -> None:
    """The ConfigMap's items lay out the configuration's own text and the persona file beside it under /etc/ghostrunner."""
    objects = _objects(_render(base_config))
    [config_map] = [data for data in objects.values() if data["kind"] == "ConfigMap"]
    assert base_config.config_file is not None
    assert config_map["data"]["ghostrunner.toml"] == base_config.config_file.read_text(encoding="utf-8")
    cronjob = next(iter(_cronjobs(_render(base_config)).values()))
    [volume] = [volume for volume in cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"] if volume["name"] == "config"]
    laid_out = {item["path"]: config_map["data"][item["key"]] for item in volume["configMap"]["items"]}
    assert laid_out == {"ghostrunner.toml": config_map["data"]["ghostrunner.toml"], "motoko.toml": PERSONA.read_text(encoding="utf-8")}


def test_a_persona_named_from_the_home_directory_warns_and_is_not_read_from_beside_the_configuration(tmp_path: Path) -> None:
    """persona = "~/…" is the reader's home, not the configuration's directory: it is not put in the ConfigMap, and render warns."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(PERSONA, home / "me.toml")
    path = _config_file(tmp_path / "conf", routines={"evening": "30 21 * * *"}, agents=("motoko",))
    path.write_text(path.read_text(encoding="utf-8").replace('persona = "motoko.toml"', 'persona = "~/me.toml"'), encoding="utf-8")
    result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(tmp_path / "out"), env={"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("ghostrunner: warning: agents.motoko.persona '~/me.toml' is relative") and result.stderr.count("\n") == 1
    config_map = json.loads((tmp_path / "out" / "configmap-ghostrunner-config.json").read_text(encoding="utf-8"))
    assert list(config_map["data"]) == ["ghostrunner.toml"]


def test_each_cronjob_mounts_the_claim_of_its_agents_shard(tmp_path: Path) -> None:
    """With [fleet], one ReadWriteOnce claim per shard, and each pair's pod mounts its agent's; without it, one claim for all."""
    fleet = '[fleet]\nbroker = "redis://127.0.0.1:6379/0"\n[fleet.shards]\neast = ["Batou.2@east"]\nwest = ["motoko", "togusa"]\n'
    config = load_config(_config_file(tmp_path, routines={"evening": "30 21 * * *"}, agents=("motoko", "Batou.2@east", "togusa"), extra=fleet))
    assert config.fleet is not None
    objects = _objects(_render(config))
    claims = {data["metadata"]["annotations"]["ghostrunner/shard"]: data for data in objects.values() if data["kind"] == "PersistentVolumeClaim"}
    assert set(claims) == {"east", "west"}
    assert all(claim["spec"]["accessModes"] == ["ReadWriteOnce"] for claim in claims.values())
    for (agent, _), cronjob in _cronjobs(_render(config)).items():
        volumes = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
        [journals] = [volume for volume in volumes if volume["name"] == "journals"]
        claim = claims[config.fleet.shard_of(agent)]["metadata"]["name"]
        assert journals["persistentVolumeClaim"]["claimName"] == claim, agent
        template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
        [preferred] = template["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        beside = preferred["podAffinityTerm"]  # the shard's pods on one node, where its ReadWriteOnce volume is attached
        assert beside["topologyKey"] == "kubernetes.io/hostname"
        assert beside["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        assert beside["labelSelector"]["matchLabels"] == {"ghostrunner/journals": claim}
    single = _objects(_render(replace(config, fleet=None)))
    assert [data["metadata"]["name"] for data in single.values() if data["kind"] == "PersistentVolumeClaim"] == ["ghostrunner-journals"]


# --- paths the pods could not write ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("runner", "expected"), [
    ('journal_root = "/srv/journals/{agent}"\n', ["the journal of agent 'Batou.2@east', '/srv/journals/Batou.2@east', is outside --journal-mount",
                                                   "the journal of agent 'motoko', '/srv/journals/motoko', is outside --journal-mount",
                                                   "the state directory '/srv/journals/.all.ghostrunner.state'"]),
    ('journal_root = "/var/lib/ghostrunner/../srv/{agent}"\nlock_file = "/var/lib/ghostrunner/serve.lock"\n',
     ["the journal of agent 'Batou.2@east', '/var/lib/srv/Batou.2@east', is outside", "the journal of agent 'motoko', '/var/lib/srv/motoko', is outside"]),
    ('journal_root = "journals/{agent}"\n', ["runner.journal_root 'journals/{agent}' is relative: a pod resolves it beside /etc/ghostrunner"]),
    ('journal_root = "~/journals/{agent}"\n', ["runner.journal_root '~/journals/{agent}' is relative: a pod resolves it beside /etc/ghostrunner"]),
    ('journal_root = "/var/lib/ghostrunner/{agent}"\nlock_file = "/run/serve.lock"\n', ["the state directory '/run/serve.state'"]),
    ("", []),  # the pods' default: $STATE_DIRECTORY/AGENT, the mount
], ids=["outside", "dotdot", "relative", "home", "lock-outside", "default"])
def test_a_journal_or_state_directory_outside_the_mount_warns_and_strict_refuses(tmp_path: Path, runner: str, expected: list[str]) -> None:
    """What a pod would write outside --journal-mount (its root filesystem is read-only) is a warning, judged after normalisation."""
    path = _config_file(tmp_path, runner=runner, routines={"evening": "30 21 * * *"})
    warnings = _render(load_config(path)).warnings
    assert len(warnings) == len(expected) and all(warning.startswith(start) for warning, start in zip(warnings, expected, strict=True)), warnings
    if expected:
        result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(tmp_path / "out"), "--strict")
        assert result.returncode == 78 and not (tmp_path / "out").exists()
    if runner.startswith('journal_root = "/srv/'):
        assert _render(load_config(path), journal_mount="/srv/journals").warnings == ()


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--image", "", "--image: expected a non-empty value"),
    ("--image", "reg/gr:1\nx", "--image: expected a container image reference"),
    ("--namespace", "Ghost_Runner", "--namespace: expected a namespace name"),
    ("--journal-mount", "journals", "--journal-mount: expected an absolute path in the container"),
    ("--journal-mount", "/var/lib/a:b", "--journal-mount: expected an absolute path in the container, of letters"),
    ("--journal-mount", "/var/lib/$(HOME)", "--journal-mount: expected an absolute path in the container, of letters"),
    ("--journal-mount", "/etc/ghostrunner/j", "--journal-mount: '/etc/ghostrunner/j' would hide the container's own files"),
    ("--storage", "lots", "--storage: expected a size such as 1Gi or 500Mi, got 'lots'"),
    ("--out", "", "--out: expected a non-empty value"),
], ids=["empty-image", "newline-image", "namespace", "relative-mount", "colon-mount", "variable-mount", "mount-over-config", "storage",
        "empty-out"])
def test_a_bad_option_is_one_line_and_writes_nothing(tmp_path: Path, base_config: RunnerConfig, option: str, value: str, message: str) -> None:
    options = {"--image": IMAGE, "--out": str(tmp_path / "out")} | {option: value}
    result = ghostrunner("k8s", "render", "--config", str(base_config.config_file), *(word for pair in options.items() for word in pair))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and result.stderr.startswith("ghostrunner: error: ")
    assert not (tmp_path / "out").exists()


# --- writing ---------------------------------------------------------------------------------------------------------------

def test_a_bad_out_is_a_clear_error_and_nothing_is_written_through_it(tmp_path: Path, base_config: RunnerConfig) -> None:
    """A symbolic link or a file as --out, a link or a foreign file inside it: one line, exit 2, the target unchanged."""
    def render(out: Path) -> Any:
        return ghostrunner("k8s", "render", "--config", str(base_config.config_file), "--image", IMAGE, "--out", str(out))

    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "file").write_text("keep", encoding="utf-8")
    for out, says in ((tmp_path / "link", "is a symbolic link (to"), (tmp_path / "file", "is not a directory")):
        result = render(out)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert list(target.iterdir()) == [] and (tmp_path / "file").read_text(encoding="utf-8") == "keep"
    out = tmp_path / "out"
    assert render(out).returncode == 0
    names = sorted(path.name for path in out.iterdir())
    victim = out / names[0]
    victim.unlink()
    victim.symlink_to(tmp_path / "file")
    result = render(out)
    assert result.returncode == 2 and "is a symbolic link (to" in result.stderr and (tmp_path / "file").read_text(encoding="utf-8") == "keep"
    victim.unlink()
    for foreign in ('{"kind": "ConfigMap", "metadata": {"labels": {"app.kubernetes.io/managed-by": "someone-else"}}}\n', '{"metadata": []}',
                    '{"metadata": {"labels": "app.kubernetes.io/managed-by"}}', "[" * 100_000, "kind: ConfigMap\n", "\xff"):
        victim.write_text(foreign, encoding="utf-8")
        result = render(out)
        assert result.returncode == 2 and "exists and was not written by ghostrunner k8s render" in result.stderr, (foreign[:40], result.stderr)
        assert result.stderr.count("\n") == 1 and victim.read_text(encoding="utf-8") == foreign


def test_rendering_is_deterministic_and_replaces_its_own_files(tmp_path: Path, base_config: RunnerConfig) -> None:
    """The same configuration gives the same bytes, in another directory or over the files of the last render."""
    first, second = tmp_path / "first", tmp_path / "second"
    for out in (first, second, second):
        result = ghostrunner("k8s", "render", "--config", str(base_config.config_file), "--image", IMAGE, "--out", str(out))
        assert result.returncode == 0, result.stderr
    files = {path.name: path.read_bytes() for path in first.iterdir()}
    assert files == {path.name: path.read_bytes() for path in second.iterdir()}
    assert all(not name.startswith(".") for name in files)


def test_a_configuration_near_the_configmap_limit_renders_again_over_its_own_files(tmp_path: Path) -> None:
    """A configuration of 200,000 CJK characters (600 kB, within a ConfigMap's 1 MiB) is 1.2 MB of escaped JSON: render still knows the
    file for its own the next time and replaces it."""
    path = _config_file(tmp_path, routines={"evening": "30 21 * * *"})
    path.write_text("# " + "日" * 200_000 + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    for _ in range(2):
        result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(out))
        assert result.returncode == 0, result.stderr
    assert (out / "configmap-ghostrunner-config.json").stat().st_size > 1 << 20


def test_a_configuration_and_personas_beyond_a_configmap_are_refused_with_one_line(tmp_path: Path) -> None:
    """Kubernetes stores at most 1 MiB in a ConfigMap: more is exit 78 naming the size, before anything is written."""
    path = _config_file(tmp_path, routines={"evening": "30 21 * * *"})
    persona = tmp_path / "motoko.toml"
    persona.write_text("# " + "x" * 600_000 + "\n" + persona.read_text(encoding="utf-8"), encoding="utf-8")
    path.write_text("# " + "y" * 500_000 + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    result = ghostrunner("k8s", "render", "--config", str(path), "--image", IMAGE, "--out", str(tmp_path / "out"))
    assert result.returncode == 78, result.stderr
    assert result.stderr.count("\n") == 1 and "more than the 1048576 a ConfigMap holds" in result.stderr
    assert not (tmp_path / "out").exists()


# --- names -----------------------------------------------------------------------------------------------------------------

AGENT_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(first=AGENT_NAMES, second=AGENT_NAMES, routine=st.from_regex(r"[a-z0-9][a-z0-9_-]{0,63}", fullmatch=True))
def test_two_different_agents_never_share_a_cronjob_name(first: str, second: str, routine: str) -> None:
    """Any two configurable agent names give two CronJob names, each a DNS-1123 label of at most 52 characters."""
    names = {dns_name("", routine, agent, limit=CRONJOB_NAME_MAX) for agent in (first, second)}
    assert len(names) == len({first, second})
    assert all(DNS_LABEL.fullmatch(name) and len(name) <= CRONJOB_NAME_MAX for name in names)


@pytest.mark.parametrize(("first", "second"), [("Motoko", "motoko"), ("a.b", "a-b"), ("a@b", "a_b"), ("x" * 64, "x" * 63 + "y")])
def test_names_that_read_alike_still_differ(first: str, second: str) -> None:
    assert dns_name("", "evening", first, limit=CRONJOB_NAME_MAX) != dns_name("", "evening", second, limit=CRONJOB_NAME_MAX)


#: Pieces that mean something to Kubernetes, to JSON or YAML readers, or to a shell.
PIECES = ["$(HOME)", "$(PATH)", "$$", "$", "$(", ")", "$(x", '"', "'", "\\", "\\n", "\n", "\r", "\t", " ", "}", "{", "]", "[", ",", ":", ": ",
          "#", "---", "-", "--", "--help", "--agent=x", "--config=/tmp/x", "=", "`id`", "$(id)", "; id", "&&", "|", "\u2028", "\x85", "\x7f",
          "日本", "\ufeff", "\u200b", "\U0001f600", "\x00", "\ud800", "/", "..", "@", "."]
hostile_names = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=5)), min_size=1, max_size=8).map("".join).filter(bool)


def _shape(value: Any) -> Any:
    """The structure of a JSON value: its keys and list lengths, every string the same."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value).__name__


def _with_names(config: RunnerConfig, agent: str, routine: str) -> RunnerConfig:
    source = config.routines["evening"]
    return replace(config, routines={routine: replace(source, name=routine)},
                   agents={agent: replace(config.agents["motoko"], name=agent, routines=(routine,))})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent=hostile_names, routine=hostile_names)
def test_hostile_agent_and_routine_names_are_refused_or_reach_run_exactly(base_config: RunnerConfig, agent: str, routine: str) -> None:
    """Through the Python API (where the configuration's name rules do not apply) a name is refused with one line naming it, or the
    pod's command, read as Kubernetes and then `run` read it, is that pair; names and structure are those of a plain render."""
    config = _with_names(base_config, agent, routine)
    try:
        manifests = _render(config)
    except UnitRenderError as error:
        assert "\n" not in str(error) and error.field in (f"agents.{agent}", f"agents.{agent!r}", f"routines.{routine}", f"routines.{routine!r}")
        assert any(char == "\x00" or 0xD800 <= ord(char) <= 0xDFFF for char in agent + routine)
        return
    assert not any(char == "\x00" or 0xD800 <= ord(char) <= 0xDFFF for char in agent + routine)
    plain = _render(_with_names(base_config, "motoko", "evening"))
    assert sorted(manifests.files) != [] and len(manifests.files) == len(plain.files)
    for name, text in manifests.files.items():
        assert re.fullmatch(r"[a-z]+-[a-z0-9-]+\.json", name) and text.isascii()
    [cronjob] = _cronjobs(manifests).values()
    [reference] = _cronjobs(plain).values()
    assert _shape(cronjob) == _shape(reference)
    name = cronjob["metadata"]["name"]
    assert DNS_LABEL.fullmatch(name) and len(name) <= CRONJOB_NAME_MAX
    assert cronjob["metadata"]["annotations"] == {"ghostrunner/agent": agent, "ghostrunner/routine": routine}
    command = [expand(word) for word in _container(cronjob)["command"]]
    assert command == run_argv(routine, agent)
    params = parsed_run(command)
    assert (params["routine"], params["agent"], params["config_path"]) == (routine, agent, Path(CONFIG_PATH))
    assert kubernetes_validate.validate(cronjob, KUBERNETES_VERSION, strict=True)


# --- the documentation ---------------------------------------------------------------------------------------------------

def _readme_block(heading: str) -> list[str]:
    return [line for line in block_after(heading, page="docs/deploying.md") if not line.lstrip().startswith("#")]


def test_the_readme_kubernetes_render_runs_as_written(tmp_path: Path) -> None:
    """The render command of docs/deploying.md, on the example deployment configuration, writes manifests that validate; kubectl is not run here."""
    deploy = tmp_path / "etc"
    deploy.mkdir()
    shutil.copy(REPO / "systemd" / "ghostrunner.toml", deploy / "ghostrunner.toml")
    (deploy / "agents").mkdir()
    shutil.copy(PERSONA, deploy / "agents" / "motoko.toml")
    lines = _readme_block("Kubernetes")
    [render] = [line for line in lines if line.startswith("ghostrunner k8s render")]
    env = {key: value for key, value in os.environ.items() if key != "GHOSTRUNNER_CONFIG"}
    done = ghostrunner(*shlex.split(render.removeprefix("ghostrunner ")), cwd=deploy, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    written = sorted((deploy / "k8s").iterdir())
    assert written and all(kubernetes_validate.validate(json.loads(path.read_text()), KUBERNETES_VERSION, strict=True) for path in written)
    assert any(line.startswith("kubectl apply -f k8s/") for line in lines)
    # What render tells the operator to run is what the page runs: the namespace first (apply makes none), then the manifests.
    told = [line.split(":", 1)[1].split("#")[0].strip() for line in done.stdout.splitlines() if line.startswith(("namespace:", "apply:"))]
    assert told == ["kubectl create namespace ghostrunner", "kubectl apply -f k8s"], done.stdout
    assert [line for line in lines if line.startswith("kubectl")] == ["kubectl create namespace ghostrunner", "kubectl apply -f k8s/"]
