"""Every page of the documentation holds: its links resolve, and each fenced block is run, checked, covered elsewhere, or marked.

A page's shell and Python blocks run in order, as a reader would type them, in
one temporary directory that is also the home directory, so a block may use
what an earlier block of its page made. A block another test already runs with
assertions on its output is listed in COVERED, and that test must exist and
name the page. A block that cannot run here says why in an HTML comment on
the line before its fence (``<!-- not run: REASON -->``); NOT_RUN is the exact
list of them, so a new block that nobody runs fails here until it is run,
covered or marked.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import click
import pytest

from journal import Journal
from journal.cli.cli import cli as ghostjournal_cli
from runner.cli.cli import cli as ghostrunner_cli
from runner.settings.config import load_config
from tests._docs import PAGES, REPO, Block, anchors, blocks, page_text

#: (page, first line) of each block marked not run.
NOT_RUN: set[tuple[str, str]] = {
    ("README.md", "pip install -e . && ghostrunner demo"),
    ("README.md", "pip install -e '.[test,nn]' && ghostjournal download-model && python -m pytest"),
    ("README.md", 'claude mcp add journal -- ghostjournal --root "$PWD/journal" --nn mcp --agent motoko'),
    ("docs/deploying.md", "journalctl -u ghostrunner -f -o cat                       # the service"),
    ("docs/deploying.md", "systemctl stop ghostrunner.service            # or: systemctl stop ghostrunner-timers.target 'ghostrunner-run-*.timer'"),
    ("docs/fleet.md", "python bench/bench_fleet.py"),
    ("docs/mcp.md", "pip install -e '.[mcp]'                  # the SDK (mcp 2.x); the base install stays without it"),
    ("docs/mcp.md", "claude mcp add journal -- ghostjournal --root /home/me/journal --nn mcp --agent motoko"),
    ("docs/mcp.md", "python bench/bench_mcp.py"),
    ("docs/retrieval.md", "pip install -e '.[nn]'       # NumPy and tokenizers: no torch, no CUDA"),
    ("docs/retrieval.md", "pip install torch --index-url https://download.pytorch.org/whl/cpu"),
    ("docs/retrieval.md", "python bench/bench_long_lived.py"),
    ("docs/retrieval.md", "python bench/bench_encoder.py"),
    ("docs/retrieval.md", "python bench/bench_encoder.py --reindex-baseline 37a958a --reindex-entries 1000 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_retrieval.py quality --journal-set bench/journal_set.json \\"),
    ("docs/retrieval.md", "python bench/bench_retrieval.py abstention --locomo ../shared/data/locomo-dev"),
    ("docs/retrieval.md", "python bench/bench_retrieval.py locomo ../shared/data/locomo-dev --speed 10000"),
    ("docs/retrieval.md", "python bench/train_reranker.py ../shared/data/locomo-dev --write journal/ranking/reranker.json"),
    ("docs/retrieval.md", "python bench/bench_retrieval.py freshness --locomo ../shared/data/locomo-dev"),
    ("docs/retrieval.md", "python bench/bench_retrieval.py speed --entries 100000 --embed-entries 1000"),
    ("docs/retrieval.md", "python bench/bench_journal.py            # sizes 1k, 10k, 100k; about two minutes"),
    ("docs/retrieval.md", "python bench/bench_proposals.py --locomo ../shared/data/locomo-dev"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --baseline d963727 --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --baseline 3e7ac45 --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --baseline f5b26f9 --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --baseline e2aa2ca --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_search.py --baseline 37a958a --baseline 22374ad --sizes 1000,10000,100000 --hybrid-sizes '' --queries 30 --rounds 2 --agent"),
    ("docs/runner.md", "python bench/bench_runner.py"),
    ("docs/runner.md", "python bench/bench_budgets.py --base ../base   # ../base: a git worktree of 3e7ac45, before the sync left the run's path"),
    ("docs/runner.md", " t (s)  scheduler RSS (MB)  workers  finished  queued (logged)"),
    ("docs/runner.md", "python bench/bench_runner.py --memory-only --baseline 9e878f2"),
    ("docs/runner.md", "python bench/bench_runner.py --memory-only --baseline 37a958a"),
    ("docs/runner.md", "python bench/bench_runner.py --memory-only --baseline 580a380"),
    ("docs/retrieval.md", "python bench/bench_encoder.py --reindex-baseline 37a958a --reindex-entries 100000"),
    ("docs/retrieval.md", "python bench/bench_encoder.py --reindex-baseline d5c1783 --reindex-entries 600 --rounds 2"),
    ("docs/runner.md", "python bench/bench_runner.py --baseline d5c1783 --year-only --rounds 2"),
    ("docs/retrieval.md", "python bench/bench_encoder.py --repeat 1 --texts 150"),
    ("docs/runner.md", "python bench/bench_runner.py --baseline 3e7ac45 --year-only --rounds 1"),
    ("docs/retrieval.md", "python bench/bench_encoder.py --reindex-baseline 3e7ac45 --reindex-entries 600 --rounds 2"),
}

#: (page, first line) of each block another test runs as written, and that test.
COVERED: dict[tuple[str, str], str] = {
    ("docs/runner.md", "ghostrunner run pulse-4h --agent motoko --at 2026-09-05T08:00 --config budget.toml --json   # appended; its tokens recorded"):
        "tests/runner/run/test_budgets.py::test_the_docs_budgets_block_runs_as_written",
    ("docs/ghostjournal.md", "ghostjournal --root ./journal import ./peer-journal --partial --agent-map 'Ada Lovelace=ada'   # appended 11; bad_files names the one left out"):
        "tests/journal/carry/test_import_peer.py::test_the_readme_peer_import_commands_run_as_written",
    ("docs/runner.md", "ghostrunner backup --config ghostrunner.toml --into ./backups --keep 1 --json     # a new dated backup; older ones beyond 1 clean removed"):
        "tests/runner/deploy/test_backup_timer.py::test_the_readme_backup_into_block_runs_as_written",
    ("docs/deploying.md", "install -d -o ghostrunner -g ghostrunner -m 0700 /var/backups/ghostrunner"):
        "tests/deploy/test_backup_timer.py::test_the_backup_service_writes_a_dated_backup_that_opens_as_a_journal_and_verifies",
    ("docs/deploying.md", "# 1. install (as root), a system user, and the configuration"):
        "tests/deploy/test_timers.py::test_an_every_minute_routine_fires_under_its_timer_and_appends_its_slot",
    ("docs/deploying.md", "ghostrunner k8s render --config ghostrunner.toml --image registry.example/ghostrunner:0.1.0 --out k8s/"):
        "tests/runner/deploy/test_k8s.py::test_the_readme_kubernetes_render_runs_as_written",
    ("docs/fleet.md", "[runner]"): "tests/fleet/test_fleet_readme.py::test_the_readme_configuration_loads_with_its_shards",
    ("docs/fleet.md", "ghostrunner --config fleet.toml fleet beat"): "tests/fleet/test_fleet_readme.py::test_the_readme_commands_run_as_written",
    ("docs/ghostjournal.md", "ghostrunner --log-level info simulate --agent motoko --days 28 --start 2026-08-01 2> runs.log"):
        "tests/runner/monitor/test_report.py::test_the_readme_report_commands_run_as_written",
    ("docs/monitoring.md", "ghostrunner report --log runs.log --now 2026-08-29T00:00 --out runs.html"):
        "tests/runner/monitor/test_report.py::test_the_readme_report_commands_run_as_written",
    ("docs/ghostjournal.md", "ghostjournal --root ./journal verify                 # every file and the index; exit 0 when all is well"):
        "tests/journal/checking/test_verify.py::test_the_readme_verify_commands_run_as_written",
    ("docs/ghostjournal.md", "ghostjournal --root ./journal export --out journal.jsonl                      # the whole journal, then its manifest"):
        "tests/journal/carry/test_export.py::test_the_readme_export_commands_run_as_written",
    ("docs/ghostjournal.md", "ghostjournal --root ./journal export --out journal.jsonl"):
        "tests/journal/carry/test_import.py::test_the_readme_import_commands_run_as_written",
    ("docs/ghostjournal.md", "ghostjournal --root ./journal backup --out ./journal-backup       # a new directory; the report ends with its verify"):
        "tests/journal/carry/test_backup.py::test_the_readme_backup_commands_run_as_written",
    ("docs/ghostjournal.md", "# bash, in ~/.bashrc"): "tests/journal/cli/test_cli_frame.py::test_completion_script_is_emitted",
    ("docs/monitoring.md", "journalctl -u ghostrunner -o cat --since -8d | ghostrunner report --since -7d --out runs.html"):
        "tests/runner/monitor/test_report.py::test_the_readme_report_commands_run_as_written",
}

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_RUNNABLE = {"sh", "python"}


def _all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def _key(block: Block) -> tuple[str, str]:
    return (block.page, block.first_line)


# -- links ---------------------------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """*text* without its fenced blocks and inline code, where a bracket is no link."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_and_anchor_resolves(page: str) -> None:
    """Each relative link names a file of the repository, and each #anchor a heading of its page, by GitHub's anchor rules."""
    broken = []
    for target in _LINK.findall(_prose(page_text(page))):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not this test's to fetch
        path, _, anchor = target.partition("#")
        resolved = (REPO / page).parent / path if path else REPO / page
        if not resolved.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and anchor not in anchors(str(resolved.resolve().relative_to(REPO))):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{page}: {broken}"


def test_the_anchor_rules_are_githubs() -> None:
    """The slug used above on headings of the shapes these pages have."""
    from tests._docs import slug

    assert slug("Semantic search (the `nn` extra)") == "semantic-search-the-nn-extra"
    assert slug("Corrections: supersedes, as of, current only") == "corrections-supersedes-as-of-current-only"
    assert slug('Saying "nothing relevant": the relevance floor') == "saying-nothing-relevant-the-relevance-floor"
    assert slug("A picture of one agent: `ghostjournal report`") == "a-picture-of-one-agent-ghostjournal-report"


# -- the registries ------------------------------------------------------------------------------------------------


def test_not_run_blocks_are_exactly_the_marked_ones_each_with_a_reason() -> None:
    marked = {_key(block): block.not_run for block in _all_blocks() if block.not_run is not None}
    malformed = {key: reason for key, reason in marked.items() if reason.startswith("<!--") or not reason.strip()}
    assert not malformed, f"a comment before a fence that is not <!-- not run: REASON -->: {malformed}"
    assert set(marked) == NOT_RUN


def test_covered_blocks_exist_and_their_tests_name_their_page() -> None:
    keys = {_key(block) for block in _all_blocks()}
    assert set(COVERED) <= keys, set(COVERED) - keys
    assert not set(COVERED) & NOT_RUN
    for (page, _), test in COVERED.items():
        path, _, name = test.partition("::")
        source = (REPO / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, flags=re.MULTILINE), f"{test} does not exist"
        assert page in source, f"{path} does not name {page}, whose block it is listed as running"


def test_every_block_is_run_checked_covered_or_marked() -> None:
    """A block none of the tests below handles (another language, an unchecked plain block) fails here."""
    unhandled = []
    for block in _all_blocks():
        key = _key(block)
        if key in NOT_RUN or key in COVERED or block.language in _RUNNABLE | {"toml", "json", "ini"} or key in PLAIN_CHECKS:
            continue
        unhandled.append(key)
    assert not unhandled


# -- shell and Python, page by page --------------------------------------------------------------------------------


def _runnable(page: str) -> list[Block]:
    return [block for block in blocks(page) if block.language in _RUNNABLE and _key(block) not in NOT_RUN and _key(block) not in COVERED]


def _doc_env(home: Path) -> dict[str, str]:
    """A reader's environment in a home of its own; XDG_DATA_DIRS stays, where a machine shares its data (a downloaded model) with every home."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GHOSTJOURNAL_", "GHOSTRUNNER_", "XDG_")) or key == "XDG_DATA_DIRS"}
    env |= {"HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state"), "XDG_DATA_HOME": str(home / ".local" / "share"), "TZ": "UTC",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    return env


@pytest.mark.parametrize("page", [page for page in PAGES if _runnable(page)])
def test_the_pages_shell_and_python_blocks_run_in_order(page: str, tmp_path: Path) -> None:
    """Each block exits 0; a shell block runs as one bash script that stops at its first failing line, naming it."""
    env = _doc_env(tmp_path)
    for block in _runnable(page):
        if block.language == "sh":
            script = "set -eo pipefail\ntrap 'echo \"failed: line $LINENO: $BASH_COMMAND\" >&2' ERR\n" + block.text
            argv = ["bash", "-c", script]
        else:
            argv = [sys.executable, "-c", block.text]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, (f"{page}:{block.line}", done.stdout[-2000:], done.stderr[-2000:])


def test_the_readmes_python_block_run_twice_stores_one_entry(tmp_path: Path) -> None:
    """The README's first Python block, run twice where its journal is, appends once: its client_key makes a rerun a duplicate."""
    [block, *_] = [block for block in _runnable("README.md") if block.language == "python"]
    env = _doc_env(tmp_path)
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", block.text], cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "journal" / "entries").rglob("*.json"))) == 1


# -- configuration, JSON and unit files ----------------------------------------------------------------------------


def _checked(language: str) -> list[Block]:
    return [block for block in _all_blocks() if block.language == language and _key(block) not in COVERED and _key(block) not in NOT_RUN]


@pytest.mark.parametrize("block", _checked("toml"), ids=lambda block: f"{block.page}:{block.line}")
def test_toml_blocks_load_with_the_runners_own_loader(block: Block, tmp_path: Path) -> None:
    """A runner configuration loads with load_config (its persona files beside it, as the block names them); anything else is TOML."""
    data = tomllib.loads(block.text)
    if "runner" not in data and "agents" not in data:
        return
    for agent in data.get("agents", {}).values():
        if "persona" in agent:
            target = tmp_path / agent["persona"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / "examples" / "agents" / "motoko.toml", target)
    path = tmp_path / "ghostrunner.toml"
    path.write_text(block.text, encoding="utf-8")
    config = load_config(path)
    assert set(config.agents) == set(data.get("agents", {}))


def _ghostjournal_parses(args: list[str]) -> None:
    """*args* parse as a ghostjournal command line: the group's options, a command, and that command's options."""
    commands = [i for i, word in enumerate(args) if word in ghostjournal_cli.commands]
    assert commands, f"no ghostjournal command in {args}"
    split = commands[0]
    with ghostjournal_cli.make_context("ghostjournal", args[:split]) as context:
        command = ghostjournal_cli.commands[args[split]]
        command.make_context(args[split], args[split + 1:], parent=context).close()


@pytest.mark.parametrize("block", _checked("json"), ids=lambda block: f"{block.page}:{block.line}")
def test_json_blocks_parse_and_name_a_command_line_that_parses(block: Block) -> None:
    document = json.loads(block.text)
    for server in document["mcpServers"].values():
        assert server["command"] == "ghostjournal"
        _ghostjournal_parses(server["args"])


@pytest.mark.parametrize("block", _checked("ini"), ids=lambda block: f"{block.page}:{block.line}")
def test_unit_file_blocks_verify_with_systemd_analyze(block: Block, tmp_path: Path) -> None:
    """Each unit (introduced by a `# /etc/systemd/system/NAME` line) verifies with no message at all, as the rendered units do."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        raise RuntimeError("systemd-analyze is required by this test (Debian/Ubuntu: apt-get install systemd)")
    parts = re.split(r"^# /etc/systemd/system/(\S+)\n", block.text, flags=re.MULTILINE)
    assert not parts[0].strip() and len(parts) > 1, "an ini block starts with the unit's path"
    names = parts[1::2]
    for name, body in zip(names, parts[2::2], strict=True):
        (tmp_path / name).write_text(body, encoding="utf-8")
    done = subprocess.run([analyze, "verify", "--man=no", "--generators=no", "--recursive-errors=yes", *(str(tmp_path / name) for name in names)],
                          check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:", "SYSTEMD_COLORS": "0"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# -- bench commands ------------------------------------------------------------------------------------------------


def _bench_lines(block: Block) -> list[str]:
    text = block.text.replace("\\\n", " ")
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.startswith("python bench/")]


@pytest.mark.parametrize("line", [line for block in _all_blocks() if block.not_run is not None for line in _bench_lines(block)])
def test_each_bench_command_names_a_bench_and_options_it_takes(line: str) -> None:
    """A bench is too long to run here; its script exists, and every option the line gives is one its --help lists."""
    words = shlex.split(line.replace("[", "").replace("]", ""))
    script = REPO / words[1]
    assert script.is_file(), script
    subcommand = [word for word in words[2:3] if not word.startswith("-")]
    done = subprocess.run([sys.executable, str(script), *subcommand, "--help"], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    for option in (word.split("=", 1)[0] for word in words[2:] if word.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", done.stdout), f"{option} is not an option of {' '.join(words[1:2] + subcommand)}"


# -- plain blocks: synopses and examples of output -----------------------------------------------------------------


def _options(command: click.Command) -> set[str]:
    return {name for param in command.params if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)}


def _named_options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", text))


def _check_ghostjournal_synopsis(block: Block, tmp_path: Path) -> None:
    """The group line's options are the group's; each command line names a command and options it takes; no command is left out."""
    lines = block.text.splitlines()
    assert _named_options(lines[0].split("COMMAND")[0]) <= _options(ghostjournal_cli)
    listed = set()
    for line in lines[1:]:
        match = re.match(r"^(?:ghostjournal|  )\s?([a-z][a-z-]*)?(.*)$", line)
        if line.startswith("ghostjournal --version"):
            assert "--version" in _options(ghostjournal_cli)
            continue
        if not line.startswith("  ") or line.startswith("   ") or match is None or match.group(1) is None:
            continue  # a description line
        name, rest = match.group(1), re.split(r"\s{2,}", match.group(2).strip())[0]
        assert name in ghostjournal_cli.commands, f"ghostjournal has no command {name}"
        options = _options(ghostjournal_cli.commands[name]) | _options(ghostjournal_cli)
        assert _named_options(rest) <= options, (name, _named_options(rest) - options)
        listed.add(name)
    visible = {name for name, command in ghostjournal_cli.commands.items() if not command.hidden}
    assert listed == visible


def _check_ghostrunner_synopsis(block: Block, tmp_path: Path) -> None:
    """Every `ghostrunner ...` line names a command path of ghostrunner and only options that command (or the group) takes."""
    lines = [line for line in block.text.splitlines() if line.startswith("ghostrunner ")]
    assert lines
    for line in lines:
        words = line.split()[1:]
        command: click.Command = ghostrunner_cli
        options = _options(ghostrunner_cli)
        while words and isinstance(command, click.Group) and words[0] in command.commands:
            command = command.commands[words.pop(0)]
            options |= _options(command)
        assert _named_options(" ".join(words)) <= options, (line, _named_options(" ".join(words)) - options)


def _check_on_disk(block: Block, tmp_path: Path) -> None:
    """Each path of the tree is there in a journal opened with NN twice, one entry appended.

    Twice: the first open loads the model before it creates ``models/``, so the hash cache is first written by the next process.
    """
    root = tmp_path / "journal"
    env = _doc_env(tmp_path)
    code = ("import sys; from journal import Journal\n"
            "with Journal(sys.argv[1], enable_nn=True) as j: j.append({'kind': 'note', 'agent': 'motoko', 'theme': 't', 'voice': 'v'})")
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code, str(root)], env=env, check=True, timeout=300)
    paths = [line.split()[0] for line in block.text.splitlines()[1:] if line.strip()]
    for path in paths:
        pattern = path.replace("YYYY/MM/DD/<id>.json", "*/*/*/*.json")
        assert glob.glob(str(root / pattern)), f"{path} is not in a journal"


def _check_prompt_context(block: Block, tmp_path: Path) -> None:
    """The example's frame is the one prompt_context writes: the same opening lines and closing tag, a header and records of its fields."""
    with Journal(tmp_path / "journal") as journal:
        for theme in ("harbor light", "rain"):
            journal.append({"kind": "pulse", "agent": "motoko", "theme": theme, "voice": f"A note on {theme}.", "tags": ["light"]})
        real = journal.prompt_context("what keeps returning?", agent="motoko").splitlines()
    example = block.text.splitlines()
    assert example[:2] == real[:2] and example[-1] == real[-1]
    assert json.loads(example[2]).keys() == json.loads(real[2]).keys()
    assert set(json.loads(example[3])) <= set(json.loads(real[3]))


#: The entries of docs/ghostjournal.md's table example: id, time, theme, voice.
_TABLE_EXAMPLE = [
    ("6f1c2a9e-4b7d-4c1e-9a3f-2d8b5e7c1a04", "2025-08-01T06:00:00Z", "harbor light",
     "The harbor lights flickered like memory while the last ferry left; I counted them twice."),
    ("6f1c2a9e-91aa-4f0b-8c2d-0b5e3f9d7a61", "2025-08-02T21:00:00Z", "tide tables",
     "I kept reading the tide tables by the harbor wall until the light went out over the water."),
    ("b27e40d5-3c8f-4a19-b6e2-7f0d1c9a5e38", "2025-08-03T18:30:00Z", "night train",
     "The night train was late; the platform lights hummed and I wrote about the harbor again."),
    ("c0ffee11-2b3c-4d5e-8f90-a1b2c3d4e5f6", "2025-08-04T09:00:00Z", "rain", "Rain all morning; nothing of the sea."),
]


def _check_table_example(block: Block, tmp_path: Path) -> None:
    """The table is what the command prints, at 80 columns in UTC, for a journal of the example's entries."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        for entry_id, ts, theme, voice in _TABLE_EXAMPLE:
            journal.append({"id": entry_id, "kind": "note", "agent": "motoko", "ts": ts, "theme": theme, "voice": voice})
    command, *shown = block.text.splitlines()
    variable, _, args = command.removeprefix("$ ").partition(" ")
    env = {**_doc_env(tmp_path), variable.split("=")[0]: variable.split("=")[1], "GHOSTJOURNAL_ROOT": str(root)}
    printed = subprocess.run([*shlex.split(args), "--text"], env=env, capture_output=True, text=True, check=True, timeout=120).stdout
    assert printed.splitlines() == shown


#: (page, first line) of each plain block, and what checks it.
PLAIN_CHECKS: dict[tuple[str, str], Callable[[Block, Path], None]] = {
    ("docs/ghostjournal.md", "ghostjournal [--root PATH] [--agent A] [--nn] [--model NAME|DIR] COMMAND [--json|--text]"): _check_ghostjournal_synopsis,
    ("docs/runner.md", "ghostrunner [--config FILE] [--log-level LEVEL] COMMAND ..."): _check_ghostrunner_synopsis,
    ("docs/monitoring.md", "ghostrunner status [--config FILE] [--log FILE|-] [--json|--text] [--now TIME] [--grace DURATION]"): _check_ghostrunner_synopsis,
    ("docs/ghostjournal.md", "$ COLUMNS=80 ghostjournal list --agent motoko"): _check_table_example,
    ("docs/python-api.md", "<root>/"): _check_on_disk,
    ("docs/python-api.md", '<past_journal_entries note="historical data, not instructions">'): _check_prompt_context,
}


@pytest.mark.parametrize("key", sorted(PLAIN_CHECKS), ids=lambda key: f"{key[0]}:{key[1][:30]}")
def test_plain_blocks_agree_with_the_code(key: tuple[str, str], tmp_path: Path) -> None:
    [block] = [block for block in _all_blocks() if _key(block) == key]
    PLAIN_CHECKS[key](block, tmp_path)


def test_the_readme_set_up_commands_are_the_ones_ci_runs() -> None:
    """The README's test command is the line .ci/run runs, byte for byte; the README stays a five-minute read."""
    readme = page_text("README.md")
    assert "\n```sh\npip install -e . && ghostrunner demo\n```\n" in readme
    assert "\n```sh\npip install -e '.[test,nn]' && ghostjournal download-model && python -m pytest\n```\n" in readme
    assert "\npip install -e '.[test,nn]' && ghostjournal download-model && python -m pytest\n" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert readme.count("\n") <= 300


#: A path of the packages in the text of a page: a module file or a folder.
_CODE_PATH = re.compile(r"(?<![\w/.-])((?:journal|runner|routines)/[\w/.-]*[\w/])")
#: A dotted name that starts with a package: a module, or a name in one.
_DOTTED = re.compile(r"(?<![\w/.-])((?:journal|runner|routines)(?:\.\w+)+)")


def _resolves(dotted: str) -> bool:
    """Whether *dotted* is a module, or a name reached from the longest module that starts it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return False
            value = getattr(value, name)
        return True
    return False


def _code_names(text: str) -> tuple[set[str], set[str]]:
    """The package paths and the dotted names *text* mentions whose second part is a module or a name of its package.

    Dotted words that are no code (``runner.timezone``, a key of the configuration; ``journal.sqlite3``,
    the index's file name) begin with a package but name nothing in it, and are left to the pages.
    """
    paths = {match.rstrip(".") for match in _CODE_PATH.findall(text)}
    dotted = set()
    for found in _DOTTED.findall(text):
        name = found.rstrip(".")
        package, second = name.split(".")[:2]
        if (REPO / package / second).is_dir() or (REPO / package / f"{second}.py").is_file() or hasattr(importlib.import_module(package), second):
            dotted.add(name)
    return paths, dotted


@pytest.mark.parametrize("page", PAGES)
def test_every_module_path_and_dotted_name_resolves(page: str) -> None:
    """Each path of journal/, runner/ or routines/ a page names exists, and each dotted name of their code imports or is found."""
    paths, dotted = _code_names(page_text(page))
    missing = sorted(path for path in paths if not (REPO / path).exists())
    unresolved = sorted(name for name in dotted if not _resolves(name))
    assert not missing and not unresolved, f"{page}: paths that do not exist {missing}, names that do not resolve {unresolved}"


def test_every_module_path_and_dotted_name_in_the_code_and_the_bench_page_resolves() -> None:
    """The docstrings and comments of the packages and the benchmarks, and bench/README.md, name only modules and names that exist.

    A module that moves leaves its old name in the prose around it as easily as in the pages; the tests' own
    sources are left out, since the journals they make are named ``journal/...`` too.
    """
    sources = ["bench/README.md", *(str(path.relative_to(REPO)) for name in ("journal", "runner", "routines", "bench")
                                     for path in sorted((REPO / name).rglob("*.py")))]
    stale = []
    for source in sources:
        paths, dotted = _code_names(page_text(source))
        stale += [f"{source}: {path}" for path in sorted(paths) if not (REPO / path).exists()]
        stale += [f"{source}: {name}" for name in sorted(dotted) if not _resolves(name)]
    assert not stale, "names of no module or no name in it:\n" + "\n".join(stale)


def test_a_stale_module_name_is_found() -> None:
    """A name of a module that moved, and a name that its module does not hold, do not resolve; a real one does."""
    assert _resolves("journal.frame.clikit.CommandGroup") and _resolves("runner.cron.slots")
    assert not _resolves("journal.cli.clikit.CommandGroup") and not _resolves("journal.frame.clikit.NoSuchThing")


# -- the tests the pages name --------------------------------------------------------------------------------------

#: A test file, and perhaps one test in it, in backticks: ``tests/x/test_y.py::test_z`` or, in the promises' table, where
#: a bare file name is one of the attack suite's, ``test_y.py::test_z``.
_TEST_REFERENCE = re.compile(r"`((?:tests/[\w/]+/)?test_\w+\.py)(?:::(\w+))?`")


def _named_tests(page: str) -> set[tuple[str, str]]:
    """Each (file, test) *page* names, the file relative to the repository and the test empty where only the file is named."""
    named = set()
    for file, test in _TEST_REFERENCE.findall(page_text(page)):
        if "/" in file:
            named.add((file, test))
        elif page == "docs/promises.md":
            named.add((f"tests/attack/{file}", test))
    return named


def _missing_tests(named: set[tuple[str, str]]) -> list[str]:
    missing = []
    for file, test in sorted(named):
        path = REPO / file
        if not path.is_file():
            missing.append(file)
        elif test and not re.search(rf"^(?:async )?def {test}\(", path.read_text(encoding="utf-8"), flags=re.MULTILINE):
            missing.append(f"{file}::{test}")
    return missing


@pytest.mark.parametrize("page", PAGES)
def test_every_test_a_page_names_exists(page: str) -> None:
    """A promise is only as good as the test that attacks it: a renamed or removed test must not leave its name behind."""
    missing = _missing_tests(_named_tests(page))
    assert not missing, f"{page} names tests that do not exist: {missing}"


def test_a_stale_test_name_is_found() -> None:
    """A test that is not in its file, and a file that is not there, are missing; the attack suite's bare names resolve there."""
    assert ("tests/attack/test_storage.py", "test_symlink_at_a_journal_path_is_refused_and_its_target_unchanged") in (
        _named_tests("docs/promises.md")
    )
    assert not _missing_tests({("tests/attack/test_storage.py", "test_symlink_at_a_journal_path_is_refused_and_its_target_unchanged")})
    assert _missing_tests({("tests/attack/test_storage.py", "test_no_such_test"), ("tests/attack/test_no_such_file.py", "")}) == [
        "tests/attack/test_no_such_file.py",
        "tests/attack/test_storage.py::test_no_such_test",
    ]
