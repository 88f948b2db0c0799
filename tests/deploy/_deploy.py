"""The steps of docs/deploying.md, run in a booted system (:class:`tests.deploy._live.LiveSystem`).

Its step 1 creates a virtual environment and ``pip install``s the project into it. The
tests cannot download, so :func:`install` does what that ``pip install`` leaves behind, from this
machine: it creates the environment with the system's ``/usr/bin/python3`` (an interpreter under
``/root`` or ``/home``, such as pyenv's, would be hidden from the units by ``ProtectHome=yes``),
copies in the installed distributions the project depends on, the project's packages from the
checkout under test, and its console scripts. Every other step runs as the page writes it.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from tests.deploy._live import LiveSystem

REPO = Path(__file__).resolve().parents[2]
VENV = "/opt/ghostrunner"
#: Where the tests stage the files the README's steps install (the checkout's paths may be hidden inside).
STAGE = "/srv/ghostrunner-tests"
CONFIG = "/etc/ghostrunner/ghostrunner.toml"
STATE = "/var/lib/ghostrunner"
GHOSTRUNNER = "/usr/local/bin/ghostrunner"


def _dependencies(name: str, seen: set[str] | None = None, requires: list[str] | None = None) -> set[str]:
    """The distributions *name* needs at run time (no extras), transitively; its own requirements *requires* when given."""
    seen = set() if seen is None else seen
    for text in requires if requires is not None else importlib.metadata.requires(name) or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = requirement.name.lower()
        if key not in seen:
            seen.add(key)
            _dependencies(requirement.name, seen)
    return seen


def _copy_distribution(name: str, site: Path) -> None:
    distribution = importlib.metadata.distribution(name)
    for file in distribution.files or []:
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue  # console scripts outside site-packages, byte code
        source = Path(str(distribution.locate_file(file)))
        target = site / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def install(system: LiveSystem) -> None:
    """README step 1: the program in /opt/ghostrunner, linked into /usr/local/bin, a system user, /etc/ghostrunner."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    # The README starts from a host without ghostrunner; the overlay may show this machine's copies
    # (removing them here only hides them in the booted system).
    system.run("rm", "-rf", VENV, GHOSTRUNNER, "/etc/ghostrunner", STATE)
    system.run("/usr/bin/python3", "-m", "venv", "--without-pip", VENV)
    purelib = system.run(f"{VENV}/bin/python3", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    site = system.path(purelib)
    # The checkout's own requirements, not the installed metadata's: an editable install keeps the
    # metadata of when it was made, so a dependency the checkout added would be missing.
    for name in sorted(_dependencies(project["project"]["name"], requires=project["project"]["dependencies"])):
        _copy_distribution(name, site)
    for package in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        shutil.copytree(REPO / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    for script, target in project["project"]["scripts"].items():
        module, function = target.split(":")
        path = system.path(f"{VENV}/bin/{script}")
        path.write_text(f"#!{VENV}/bin/python3\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n")
        path.chmod(0o755)
    system.path(STAGE).mkdir(parents=True)
    shutil.copyfile(REPO / "examples" / "agents" / "motoko.toml", system.path(f"{STAGE}/motoko.toml"))
    system.sh(f"""
        ln -s {VENV}/bin/ghostrunner {GHOSTRUNNER}
        useradd --system --home-dir {STATE} --shell /usr/sbin/nologin ghostrunner
        install -d -m 0755 /etc/ghostrunner /etc/ghostrunner/agents
        install -m 0644 {STAGE}/motoko.toml /etc/ghostrunner/agents/
    """)


def configure(system: LiveSystem, config: str, *, randomized_delay: str | None = None) -> str:
    """README steps 1 (the configuration) and 2: install *config*, render the units, reload; return render's output."""
    system.path(f"{STAGE}/ghostrunner.toml").write_text(config, encoding="utf-8")
    system.run("install", "-m", "0644", f"{STAGE}/ghostrunner.toml", CONFIG)
    extra = [] if randomized_delay is None else ["--randomized-delay", randomized_delay]
    rendered = system.run("ghostrunner", "systemd", "render", "--config", CONFIG, "--exec", GHOSTRUNNER, "--out", "/etc/systemd/system", *extra)
    system.systemctl("daemon-reload")
    return rendered.stdout


def entries(system: LiveSystem, agent: str) -> list[dict[str, Any]]:
    """An agent's journal entries, read as the README says: as the service user, with ghostjournal."""
    if not system.path(f"{STATE}/{agent}/manifest.json").exists():
        return []
    out = system.run("runuser", "-u", "ghostrunner", "--", f"{VENV}/bin/ghostjournal", "--root", f"{STATE}/{agent}", "list",
                     "--agent", agent, "--limit", "1000").stdout
    listed = json.loads(out)
    assert isinstance(listed, list), listed
    return listed


def status_of_the_journal(system: LiveSystem, output: str, now: str | None = None) -> dict[str, Any]:
    """The README's check: `journalctl -u ghostrunner -u 'ghostrunner-run-*' -o OUTPUT | ghostrunner status --json`.

    *now*: judged as of that ISO 8601 time (``--now``); readings compared with each other take one, since a pair's due
    slot moves with the clock (every minute for a schedule of every minute).
    """
    as_of = f" --now {now}" if now else ""
    piped = system.sh(f"journalctl -u ghostrunner -u 'ghostrunner-run-*' -o {output} | {GHOSTRUNNER} status --config {CONFIG} --json{as_of}",
                      check=False)
    report = json.loads(piped.stdout)
    assert isinstance(report, dict), piped
    return report
