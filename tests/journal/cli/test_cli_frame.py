"""The ghostjournal command's frame: --version, group options after the command, one error style, text on a terminal, completion."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from journal.cli.cli import cli
from journal.frame.clikit import CommandGroup
from journal.frame.render import text_width
from runner.cli.cli import cli as runner_cli
from tests._terminal import in_terminal

GHOSTJOURNAL = [sys.executable, "-m", "journal.cli.cli"]
ENTRY = {"kind": "note", "agent": "motoko", "theme": "rain on tin", "voice": "Rain on the tin roof again.\nA second line \x1b[31mred\x1b[0m.",
         "tags": ["rain"], "mood": "quiet"}


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:  # noqa: A002 - named like CliRunner.invoke's input
    return CliRunner().invoke(cli, list(args), input=input, env=env)


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    root = tmp_path / "j"
    assert invoke("--root", str(root), "init").exit_code == 0
    for n in range(3):
        appended = invoke("--root", str(root), "append", input=json.dumps({**ENTRY, "ts": f"2026-09-0{n + 1}T12:00:00Z", "client_key": f"k{n}"}))
        assert appended.exit_code == 0, appended.output
    return root


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_comes_from_the_package_metadata(flag: str) -> None:
    """`ghostjournal --version` (or `-V`, as most commands take it) prints the installed distribution's version."""
    result = subprocess.run([*GHOSTJOURNAL, flag], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, f"ghostjournal {version('ghostjournal')}\n")


def _groups(group: click.Group, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [path, *(found for name, command in sorted(group.commands.items()) if isinstance(command, click.Group)
                    for found in _groups(command, (*path, name)))]


@pytest.mark.parametrize("path", [*_groups(cli, ()), *(("--runner", *path) for path in _groups(runner_cli, ()))], ids=" ".join)
def test_every_command_list_shows_whole_summaries_at_80_columns(path: tuple[str, ...]) -> None:
    """Each line of a command list in `--help` is a whole phrase on an 80-column terminal, never one cut short with '...'."""
    group, args = (runner_cli, path[1:]) if path[:1] == ("--runner",) else (cli, path)
    result = CliRunner().invoke(group, [*args, "--help"], terminal_width=80)
    listed = result.output.split("Commands:\n", 1)[1].splitlines()
    assert result.exit_code == 0 and listed, result.output
    for line in listed:
        assert not line.rstrip().endswith("...") and len(line) <= 80 and line.rstrip().endswith("."), line


@pytest.mark.parametrize("args", [
    ["search", "rain", "-k", "2"], ["list", "--limit", "2"], ["digest", "--agent", "motoko"], ["prompt-context", "rain"],
], ids=["search", "list", "digest", "prompt-context"])
def test_root_after_the_command_gives_the_same_output_as_before_it(filled: Path, args: list[str]) -> None:
    """`ghostjournal CMD ... --root R` prints exactly what `ghostjournal --root R CMD ...` prints."""
    before = invoke("--root", str(filled), *args)
    after = invoke(*args, "--root", str(filled))
    assert before.exit_code == after.exit_code == 0, before.output + after.output
    assert after.stdout == before.stdout


def test_nn_after_the_command_is_the_nn_before_it(filled: Path) -> None:
    """`search rain --nn` (the reported failure: "Did you mean '--kind'?") ranks with the real model like `--nn search rain`."""
    before = invoke("--root", str(filled), "--nn", "search", "drizzle on a metal roof", "--mode", "semantic")
    after = invoke("search", "drizzle on a metal roof", "--mode", "semantic", "--nn", "--root", str(filled))
    assert before.exit_code == after.exit_code == 0, before.output + after.output
    assert json.loads(after.stdout) == json.loads(before.stdout) and json.loads(after.stdout)[0]["score"] > 0
    without = invoke("search", "drizzle", "--mode", "semantic", "--root", str(filled))
    assert without.exit_code == 1 and "opened without NN" in without.stderr


def test_the_same_value_in_both_places_is_accepted(filled: Path) -> None:
    """A value given before and after the command alike is not a conflict."""
    result = invoke("--root", str(filled), "--model", "sentence-transformers/all-MiniLM-L6-v2", "list", "--root", str(filled),
                    "--model", "sentence-transformers/all-MiniLM-L6-v2")
    assert result.exit_code == 0 and len(json.loads(result.stdout)) == 3


@pytest.mark.parametrize(("args", "flag"), [
    (["--root", "{a}", "list", "--root", "{b}"], "--root"),
    (["--model", "one-model", "--root", "{a}", "download-model", "--model", "another-model"], "--model"),
], ids=["root", "model"])
def test_different_values_before_and_after_the_command_are_a_usage_error(tmp_path: Path, args: list[str], flag: str) -> None:
    """Two different values are refused with exit 2 and one line naming the option and both values; nothing is read or written."""
    argv = [arg.format(a=tmp_path / "a", b=tmp_path / "b") for arg in args]
    result = invoke(*argv)
    assert result.exit_code == 2
    before, after = argv[argv.index(flag) + 1], argv[-1]
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"ghostjournal: error: {flag} is given before the command as {before!r} and after it as {after!r}; give it once")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_environment_is_not_a_conflict(filled: Path, tmp_path: Path) -> None:
    """GHOSTJOURNAL_ROOT gives way to a --root after the command, as it does to one before it."""
    result = invoke("list", "--root", str(filled), env={"GHOSTJOURNAL_ROOT": str(tmp_path / "elsewhere")})
    assert result.exit_code == 0 and len(json.loads(result.stdout)) == 3


@pytest.mark.parametrize(("args", "code", "line"), [
    (["list", "--bogus"], 2, "ghostjournal: error: No such option '--bogus'. See 'ghostjournal list --help'."),
    (["serch", "x"], 2, "ghostjournal: error: No such command 'serch'. Did you mean 'search'? See 'ghostjournal --help'."),
    (["search"], 2, "ghostjournal: error: Missing argument 'QUERY'. See 'ghostjournal search --help'."),
    (["search", "x", "-k", "0"], 2, "ghostjournal: error: Invalid value for '-k': 0 is not in the range 1<=x<=10000."),
    (["list"], 3, "ghostjournal: error: no journal at"),
], ids=["unknown-option", "unknown-command", "missing-argument", "bad-value", "journal-error"])
def test_every_error_is_one_line_in_one_style(tmp_path: Path, args: list[str], code: int, line: str) -> None:
    """Click's usage errors and the journal's errors alike: one line `ghostjournal: error: ...`, the usage ones exit 2."""
    result = invoke("--root", str(tmp_path / "j"), *args)
    assert result.exit_code == code
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(line), result.stderr
    assert "Usage:" not in result.stderr and "Traceback" not in result.stderr


# --- text on a terminal, JSON when piped ---------------------------------------------------------------------------------


def test_search_on_a_terminal_is_a_table_that_fits_and_escapes_control_characters(filled: Path) -> None:
    """On a 100-column terminal search prints a table no wider than that, an entry's ESC shown as \\u001b, never sent raw."""
    result = in_terminal([*GHOSTJOURNAL, "search", "rain roof", "--root", str(filled)], columns=100)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert lines[0].split() == ["SCORE", "ID", "TIME", "AGENT", "THEME", "SNIPPET"]
    assert lines[-1].startswith("3 hits; times in ") and len(lines) == 5
    assert all(text_width(line) <= 100 for line in lines) and any(text_width(line) == 100 for line in lines), lines
    assert all(line.endswith("…") for line in lines[1:-1]), lines  # the snippets gave way
    assert "\x1b" not in result.stdout


def test_list_on_a_terminal_shows_each_entry_on_one_line(filled: Path) -> None:
    """list on a terminal: a header, one row per entry newest first (its voice's line break escaped), and a count."""
    piped = json.loads(invoke("--root", str(filled), "list").stdout)
    result = in_terminal([*GHOSTJOURNAL, "--root", str(filled), "list"], columns=200)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert lines[0].split() == ["ID", "TIME", "KIND", "AGENT", "THEME", "VOICE"]
    assert [line.startswith(entry["id"][:8] + " ") for line, entry in zip(lines[1:-1], piped, strict=True)] == [True, True, True]
    assert lines[-1].startswith("3 entries; times in ")
    assert "A second line \\u001b[31mred\\u001b[0m." in lines[1] and "\x1b" not in result.stdout


def test_get_on_a_terminal_shows_fields_and_the_voice_lines(filled: Path) -> None:
    """get on a terminal: labelled fields, then the voice with its own line breaks, control characters escaped."""
    entry = json.loads(invoke("--root", str(filled), "list", "--limit", "1").stdout)[0]
    result = in_terminal([*GHOSTJOURNAL, "--root", str(filled), "get", entry["id"]])
    assert result.returncode == 0, result.stderr
    assert f"id:         {entry['id']}" in result.stdout and "mood:       quiet" in result.stdout
    assert "\n  Rain on the tin roof again.\n  A second line \\u001b[31mred\\u001b[0m.\n" in result.stdout


def test_json_on_a_terminal_is_the_piped_output_byte_for_byte(filled: Path) -> None:
    """`--json` on a terminal prints the very bytes a pipe gets; `--text` in a pipe prints what a terminal gets."""
    piped = subprocess.run([*GHOSTJOURNAL, "--root", str(filled), "search", "rain"], capture_output=True, text=True, check=True)
    on_terminal = in_terminal([*GHOSTJOURNAL, "--root", str(filled), "search", "rain", "--json"])
    assert on_terminal.stdout == piped.stdout and piped.stdout.startswith("[\n  {\n")
    text = subprocess.run([*GHOSTJOURNAL, "--root", str(filled), "search", "rain", "--text"], capture_output=True, text=True, check=True,
                          env={**os.environ, "COLUMNS": "100"})
    assert text.stdout == in_terminal([*GHOSTJOURNAL, "--root", str(filled), "search", "rain"], columns=100).stdout


def test_digest_of_an_empty_window_on_a_terminal_shows_no_none(filled: Path) -> None:
    """A window without entries says so; no view prints "None"."""
    result = in_terminal([*GHOSTJOURNAL, "--root", str(filled), "digest", "--since", "2030-01-01"])
    assert result.returncode == 0, result.stderr
    assert "entries: 0" in result.stdout and "None" not in result.stdout


# --- shell completion --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_emitted(shell: str) -> None:
    """`_GHOSTJOURNAL_COMPLETE=<shell>_source ghostjournal` prints the script docs/ghostjournal.md tells a shell to load."""
    result = subprocess.run(GHOSTJOURNAL, capture_output=True, text=True, check=False, env={**os.environ, "_GHOSTJOURNAL_COMPLETE": f"{shell}_source"})
    assert result.returncode == 0 and "_GHOSTJOURNAL_COMPLETE" in result.stdout, result.stderr
    if shell == "bash":
        assert "complete -o nosort -F _ghostjournal_completion ghostjournal" in result.stdout


def test_completion_completes_commands_and_options_after_them() -> None:
    """The bash protocol completes a command name, and the group's options after a command."""
    env = {**os.environ, "_GHOSTJOURNAL_COMPLETE": "bash_complete", "COMP_WORDS": "ghostjournal sea", "COMP_CWORD": "1"}
    commands = subprocess.run(GHOSTJOURNAL, capture_output=True, text=True, check=True, env=env)
    assert commands.stdout.splitlines() == ["plain,search"]
    env |= {"COMP_WORDS": "ghostjournal search rain --n", "COMP_CWORD": "3"}
    options = subprocess.run(GHOSTJOURNAL, capture_output=True, text=True, check=True, env=env)
    assert "plain,--nn" in options.stdout.splitlines()


def test_clicks_other_errors_are_the_same_one_line() -> None:
    """A ClickException that is no usage error (a file that cannot be opened) is one line too, with its own exit code."""

    class Group(CommandGroup):
        prog = "demo-prog"

    @click.group(cls=Group)
    def group() -> None:
        """A group."""

    @group.command()
    def read() -> None:
        raise click.FileError("/nowhere/file", "No such file or directory")

    result = CliRunner().invoke(group, ["read"])
    assert (result.exit_code, result.stderr) == (1, "demo-prog: error: Could not open file '/nowhere/file': No such file or directory\n")


def test_append_says_what_it_waits_for_at_a_terminal_and_names_no_input(tmp_path: Path) -> None:
    """At a terminal, append says on stderr that it reads a JSON object until Ctrl-D (it waited silently); ended with no input, it
    says "no input" and how to give one (it said "invalid JSON"); piped empty input is the same error, exit 65, nothing stored."""
    root = tmp_path / "j"
    assert invoke("--root", str(root), "init").exit_code == 0
    leader, follower = os.openpty()
    process = subprocess.Popen([*GHOSTJOURNAL, "--root", str(root), "append"], stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    said = b""
    while b"Ctrl-D" not in said:  # the line comes before anything is read; silence for a minute is the old failure
        assert select.select([leader], [], [], 60)[0], f"append said nothing at the terminal: {said!r}"
        said += os.read(leader, 4096)
    os.write(leader, b"\x04")  # the terminal's end of input, as a person types it
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the process closed its side
            break
        if not chunk:
            break
        said += chunk
    os.close(leader)
    assert process.wait(60) == 65
    lines = said.decode().replace("\r\n", "\n").splitlines()
    assert lines[0] == "ghostjournal: reading one entry, a JSON object, from the terminal; end it with Ctrl-D", lines
    assert lines[-1].startswith("ghostjournal: error: entry: expected a JSON object on stdin (or --input FILE)") and "got no input" in lines[-1]
    piped = subprocess.run([*GHOSTJOURNAL, "--root", str(root), "append"], input=" \n", capture_output=True, text=True, check=False)
    assert (piped.returncode, piped.stderr.count("\n")) == (65, 1) and "got no input" in piped.stderr, piped.stderr
    assert list((root / "entries").rglob("*.json")) == []


@pytest.mark.parametrize(("argv", "flag"), [
    (["--runner", "run", "evening", "--agent", "motoko", "--at", "2026-09-05", "--at", "2026-09-06"], "--at"),
    (["--runner", "--config", "a.toml", "--config", "b.toml", "status"], "--config"),
    (["--runner", "status", "--json", "--text"], "--json/--text"),
    (["--root", "j", "--root", "k", "init"], "--root"),
    (["--root", "j", "init", "--json", "--json"], "--json/--text"),
    (["list", "--limit", "2", "--limit=3"], "--limit"),
], ids=["run-at", "runner-config", "json-text", "root", "json-twice", "limit-equals"])
def test_an_option_of_one_value_given_twice_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], flag: str) -> None:
    """Click kept the last of two values without a word (`--at X --at Y` ran Y's slot): now one line naming the option, exit 2,
    nothing made; an option meant to repeat still repeats."""
    group, args = (runner_cli, argv[1:]) if argv[0] == "--runner" else (cli, argv)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(group, args)
    assert os.listdir(tmp_path) == []
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"{flag} is given more than once; give it once" in result.output


def test_an_option_meant_to_repeat_still_repeats(filled: Path, tmp_path: Path) -> None:
    """`--agent-map` takes one pair each time it is given: two pairs are two renames, never a usage error."""
    exported = invoke("--root", str(filled), "export", "--out", str(tmp_path / "all.jsonl"))
    assert exported.exit_code == 0, exported.output
    imported = invoke("--root", str(tmp_path / "copy"), "import", str(tmp_path / "all.jsonl"), "--agent-map", "motoko=m2", "--agent-map", "ada=a2")
    assert imported.exit_code == 0, imported.output
