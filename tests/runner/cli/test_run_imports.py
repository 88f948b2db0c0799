"""What a `ghostrunner run` process imports: what a run needs, never the fleet, the renderers, the scheduler, the simulator or the monitor.

A run starts once per slot (a timer's, a CronJob's, each of serve's runs), so every module its
start loads is paid on every slot. The process here is a real one running the command's own entry
point (``runner.cli.cli:main``, what the console script calls) to append a real entry; at its exit
it writes the names in ``sys.modules``, every module it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import SIMPLE_AGENT, write_config

#: Modules (and their submodules) a run has no use for, with the command that does use each.
NOT_FOR_A_RUN = {
    "celery": "fleet",
    "kombu": "fleet",
    "redis": "fleet",
    "redbeat": "fleet",
    "runner.fleet": "fleet",
    "runner.deploy.k8s": "k8s render",
    "runner.deploy.systemd": "systemd render",
    "runner.deploy.backup": "backup",
    "runner.schedule": "serve",
    "runner.run.simulate": "simulate and demo",
    "runner.monitor.history": "history",
    "runner.monitor.status": "status",
    "runner.monitor.report": "report",
    "multiprocessing": "simulate's workers",
}


#: Runs ghostrunner with the arguments after the first, then writes every module imported into the file the first names.
PROGRAM = """
import atexit, json, sys
modules_file, sys.argv = sys.argv[1], ["ghostrunner", *sys.argv[2:]]
atexit.register(lambda: open(modules_file, "w").write(json.dumps(sorted(sys.modules))))
from runner.cli.cli import main
main()
"""


@pytest.mark.parametrize("dry_run", [False, True], ids=["appended", "dry-run"])
def test_a_run_process_imports_only_what_a_run_needs(tmp_path: Path, dry_run: bool) -> None:
    path = write_config(tmp_path, SIMPLE_AGENT)
    flags = ("--dry-run",) if dry_run else ()
    modules = tmp_path / "modules.json"
    argv = ["run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", *flags, "--config", str(path)]
    result = subprocess.run([sys.executable, "-c", PROGRAM, str(modules), *argv], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["outcome"] == ("skipped" if dry_run else "appended")  # a dry run appends nothing: skipped
    imported = set(json.loads(modules.read_text()))
    assert {"runner.run.engine", "journal.api"} <= imported, "the run did not run: the test proves nothing"
    pulled = sorted(f"{module} (for {NOT_FOR_A_RUN[root]})" for module in imported for root in NOT_FOR_A_RUN
                    if module == root or module.startswith(root + "."))
    assert pulled == []
