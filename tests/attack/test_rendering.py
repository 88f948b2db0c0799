"""Rendering that cannot be turned into root: hostile values in every field `systemd render` writes into a unit.

Each rendered unit is read back three ways: by the real `systemd-analyze verify` (systemd 252); by
systemd's own parser, called in its shared library (``_systemd.py``: config_parse for lines,
extract_first_word for words); and by :func:`parse_unit` / :func:`split_words` below, written from
systemd's documented syntax (systemd.syntax(7), systemd.service(5) "Command lines", systemd.unit(5)
"Specifiers"), which must agree with the library. A hostile value must either be refused with one
clear line naming its field, or come back from the unit exactly as given (normalised, for paths),
with no setting added, removed or reordered.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.deploy.systemd.units import Rendering, render_units, systemd_escape, write_units
from runner.errors import UnitRenderError, quoted
from runner.settings.config import RunnerConfig, load_config
from tests._support import SIMPLE_AGENT, ghostrunner, write_config

from . import _systemd

ANALYZE = shutil.which("systemd-analyze")
if ANALYZE is None:  # a requirement, as in tests/runner/deploy/test_systemd.py: fail loudly instead of skipping
    raise RuntimeError("systemd-analyze is required by these tests (Debian/Ubuntu: apt-get install systemd)")

WHITESPACE = " \t\n\r"
#: What a specifier (%I, %n, ...) or an environment variable resolves to here: nothing a test input holds.
RESOLVED = "\uffff"
FORBIDDEN = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029"}
ONE_AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\n'


# --- systemd's syntax, as documented ------------------------------------------------------------

def parse_unit(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) for each setting, read as systemd reads a unit file.

    Lines end at LF, CR or NUL. Lines starting with '#' or ';' are comments, also inside a
    continuation. A line ending in an unescaped backslash continues on the next one (the backslash
    becomes a space). Then: blank lines are ignored, '[Name]' opens a section, anything else is
    KEY=VALUE with both sides stripped (systemd ignores one outside a section).
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\n").split("\n")
    settings_read: list[tuple[str, str, str]] = []
    section = ""
    continuation: str | None = None
    for physical in lines:
        if physical.lstrip(WHITESPACE)[:1] in ("#", ";"):
            continue
        line = physical if continuation is None else continuation + physical
        escaped = False
        for char in line:
            escaped = not escaped if char == "\\" else False
        if escaped:
            continuation = line[:-1] + " "
            continue
        continuation = None
        stripped = line.strip(WHITESPACE)
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            assert stripped.endswith("]"), f"a broken section header: {stripped!r}"
            section = stripped[1:-1]
            continue
        assert "=" in stripped, f"a line that is neither a setting nor a comment: {stripped!r}"
        key, value = stripped.split("=", 1)
        if section:
            settings_read.append((section, key.strip(WHITESPACE), value.strip(WHITESPACE)))
    return settings_read


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'", "s": " "}


def split_words(value: str, *, c_escapes: bool) -> list[str]:
    """Words of a value as systemd's extract_first_word splits them with unquoting.

    Whitespace separates words; '...' and "..." quote (and may join parts of one word); a backslash
    escapes the next character, or with *c_escapes* (command lines) starts a C escape. Unbalanced
    quotes and unknown escapes are errors, as systemd reports them.
    """
    words: list[str] = []
    position = 0
    while True:
        while position < len(value) and value[position] in WHITESPACE:
            position += 1
        if position == len(value):
            return words
        word: list[str] = []
        quote = ""
        while position < len(value):
            char = value[position]
            if not quote and char in WHITESPACE:
                break
            position += 1
            if char == "\\":
                assert position < len(value), f"a trailing backslash in {value!r}"
                char = value[position]
                position += 1
                if c_escapes:
                    assert char in _ESCAPES, f"an escape systemd does not know: \\{char} in {value!r}"
                    char = _ESCAPES[char]
                word.append(char)
            elif quote and char == quote:
                quote = ""
            elif not quote and char in "\"'":
                quote = char
            else:
                word.append(char)
        assert not quote, f"unbalanced quoting in {value!r}"
        words.append("".join(word))


def specifiers(word: str) -> str:
    """*word* with systemd's %-specifiers resolved: '%%' is '%', any other '%X' becomes RESOLVED."""
    out, position = [], 0
    while position < len(word):
        if word[position] == "%":
            assert position + 1 < len(word), f"a lone '%' at the end of {word!r}"
            out.append("%" if word[position + 1] == "%" else RESOLVED)
            position += 2
        else:
            out.append(word[position])
            position += 1
    return "".join(out)


def environment(word: str) -> str:
    """*word* after the service manager's $-expansion in a command line: '$$' is '$', $NAME and ${NAME} become RESOLVED."""
    out, position = [], 0
    while position < len(word):
        if word.startswith("$$", position):
            out.append("$")
            position += 2
        elif word.startswith("${", position) and "}" in word[position:]:
            out.append(RESOLVED)
            position = word.index("}", position) + 1
        elif word[position] == "$" and position + 1 < len(word) and (word[position + 1].isalnum() or word[position + 1] == "_"):
            position += 1
            while position < len(word) and (word[position].isalnum() or word[position] == "_"):
                position += 1
            out.append(RESOLVED)
        else:
            out.append(word[position])
            position += 1
    return "".join(out)


def command_line(value: str) -> list[str]:
    """argv systemd executes for an ExecStart= value: the program path (specifiers only), then each argument (and $)."""
    words = [specifiers(word) for word in both_split(value, c_escapes=True)]
    assert words and words[0].startswith("/") and not set(words[0]) & set("\"'\\"), f"an ExecStart= program systemd refuses: {value!r}"
    return [words[0], *(environment(word) for word in words[1:])]


def path_list(value: str) -> list[str]:
    """Paths of a ReadWritePaths= value; systemd ignores a relative or unnormalised one, so each must be neither."""
    paths = [specifiers(word) for word in both_split(value, c_escapes=False)]
    for path in paths:
        assert path.startswith("/") and "//" not in path and ".." not in path.split("/") and "." not in path.split("/"), path
        assert path == "/" or not path.endswith("/"), path
    return paths


def systemd_unescape(text: str) -> str:
    r"""What %I makes of an instance name systemd_escape wrote: '-' is '/', \xNN a byte."""
    data, position = bytearray(), 0
    while position < len(text):
        if text.startswith("\\x", position):
            data.append(int(text[position + 2:position + 4], 16))
            position += 4
        else:
            data.extend(b"/" if text[position] == "-" else text[position].encode())
            position += 1
    return data.decode("utf-8")


# --- helpers ------------------------------------------------------------------------------------

def exec_path() -> str:
    found = shutil.which("ghostrunner")
    assert found is not None, "the ghostrunner console script must be installed"
    return str(Path(found).resolve())


def verify(units: Path, names: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ANALYZE, "verify", "--man=no", "--generators=no", "--recursive-errors=yes", *(str(units / name) for name in names)],
                          check=False, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:", "SYSTEMD_COLORS": "0"})


def verified(rendering: Rendering) -> None:
    """Write *rendering* and require systemd-analyze verify to accept every unit and instance without a word."""
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        write_units(rendering, out)
        # verify reads "PATH:ALIAS" in its arguments, so an instance with ':' is left to the target's Wants= to load.
        instances = [timer.removesuffix(".timer") + suffix for timer in rendering.timers for suffix in (".timer", ".service") if ":" not in timer]
        result = verify(out, ["ghostrunner.service", "ghostrunner-timers.target", *instances])
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), result.stderr


def both_split(value: str, *, c_escapes: bool) -> list[str]:
    """The words of *value*, as systemd's extract_first_word makes them; the documented rules must agree."""
    found = _systemd.words(value, c_escapes=c_escapes)
    assert split_words(value, c_escapes=c_escapes) == found, value
    return found


def read_unit(text: str) -> list[tuple[str, str, str]]:
    """The settings of *text*, as systemd's config_parse reads them; the documented rules must agree."""
    found = _systemd.settings(text)
    assert parse_unit(text) == found
    return found


def shape(text: str) -> list[tuple[str, str]]:
    return [(section, key) for section, key, _ in read_unit(text)]


def only(text: str, key: str) -> str:
    [value] = [value for _, found, value in read_unit(text) if found == key]
    return value


@pytest.fixture(scope="module")
def base_config(tmp_path_factory: pytest.TempPathFactory) -> RunnerConfig:
    directory = tmp_path_factory.mktemp("config")
    return load_config(write_config(directory, ONE_AGENT, runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n'))


def base_render(config: RunnerConfig, **changes: object) -> Rendering:
    arguments: dict[str, object] = {"exec_argv": [exec_path()], "config_path": "/etc/ghostrunner/ghostrunner.toml"} | changes
    return render_units(config, **arguments)  # type: ignore[arg-type]


def with_root(config: RunnerConfig, root: str) -> RunnerConfig:
    return replace(config, agents={name: replace(agent, journal_root=Path(root)) for name, agent in config.agents.items()})


def normal(path: str) -> str:
    result = os.path.normpath(path)
    return "/" + result.lstrip("/") if result.startswith("//") else result


def assert_refused(error: UnitRenderError, field: str, value: str) -> None:
    assert error.field == field
    assert "\n" not in str(error) and quoted(value) in str(error), str(error)


# --- hostile strings ----------------------------------------------------------------------------

#: Pieces that mean something to systemd or to a shell, legal in a unit value once quoted...
LEGAL_PIECES = ["\\", '"', "'", " ", ";", "%", "%I", "%%", "$", "$$", "${HOME}", "$HOME", "#", "[Service]", "=", "ExecStartPre=+/bin/sh -c id",
                "..", ".", "/", "//", "/home", "/tmp", "日本", "\u00a0", "\u200b", "\ufeff", "-", "+", "@", ":", "\\x2d", "\\n"]
#: ... and the characters that end a line in some reader, which render must refuse.
CONTROL_PIECES = ["\n", "\r", "\0", "\t", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\x9f", "\u2028", "\u2029", "\ud800",
                  "\nExecStartPre=+/bin/sh -c id\n"]
_legal_characters = st.characters(exclude_categories=["Cc", "Cs", "Zl", "Zp"], exclude_characters=RESOLVED)
legal_text = st.lists(st.one_of(st.sampled_from(LEGAL_PIECES), st.text(_legal_characters, max_size=6)), max_size=8).map("".join)
any_text = st.lists(st.one_of(st.sampled_from(LEGAL_PIECES + CONTROL_PIECES), st.text(st.characters(exclude_characters=RESOLVED), max_size=6)),
                    max_size=8).map("".join)
hostile_text = st.one_of(legal_text, any_text)  # about half the examples are values render must accept and read back exactly
hostile_path = st.one_of(hostile_text.map(lambda text: "/srv/" + text), hostile_text.map(lambda text: "/" + text), hostile_text)
EXAMPLES = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def clean(value: str) -> bool:
    return not (set(value) & FORBIDDEN or any(0xD800 <= ord(char) <= 0xDFFF for char in value))


def unusable_path(value: str) -> bool:
    """What render must refuse as a path: a control character, a relative path, or one longer than systemd takes."""
    return not clean(value) or not value.startswith("/") or any(len(part.encode()) > 255 for part in value.split("/"))


# --- the properties -----------------------------------------------------------------------------

@EXAMPLES
@given(root=hostile_path)
def test_hostile_journal_root_is_refused_or_read_back_exactly(base_config: RunnerConfig, root: str) -> None:
    """A journal root comes back from ReadWritePaths= as its normalised self, or is refused naming agents.motoko.journal_root."""
    config = with_root(base_config, root)
    given_root = str(config.agents["motoko"].journal_root)
    try:
        rendering = base_render(config)
    except UnitRenderError as error:
        assert_refused(error, "agents.motoko.journal_root", given_root)
        assert error.source == config.source and unusable_path(given_root)
        return
    assert not unusable_path(given_root)
    baseline = base_render(with_root(base_config, "/srv/journal"))
    for name, text in rendering.files.items():
        assert shape(text) == shape(baseline.files[name]), name
    wanted = normal(given_root)
    for name in ("ghostrunner.service", "ghostrunner-run-evening@.service"):
        text = rendering.files[name]
        if wanted == "/var/lib/ghostrunner" or wanted.startswith("/var/lib/ghostrunner/"):
            assert "ReadWritePaths" not in text
        else:
            assert path_list(only(text, "ReadWritePaths")) == [wanted]
    verified(rendering)


@EXAMPLES
@given(lock=hostile_path)
def test_hostile_lock_file_is_refused_or_its_directory_read_back(base_config: RunnerConfig, lock: str) -> None:
    """The lock file's directory comes back from ReadWritePaths= (beside the journal's), or the lock file is refused."""
    config = replace(with_root(base_config, "/var/lib/ghostrunner/motoko"), lock_file=Path(lock))
    try:
        rendering = base_render(config)
    except UnitRenderError as error:
        assert_refused(error, "runner.lock_file", str(config.lock_file))
        assert unusable_path(str(config.lock_file))
        return
    assert not unusable_path(str(config.lock_file))
    parent = str(Path(normal(str(config.lock_file))).parent)
    text = rendering.files["ghostrunner.service"]
    if parent == "/var/lib/ghostrunner" or parent.startswith("/var/lib/ghostrunner/"):
        assert "ReadWritePaths" not in text
    else:
        assert path_list(only(text, "ReadWritePaths")) == [parent]
    assert shape(text) == shape(base_render(replace(config, lock_file=Path("/srv/locks/serve.lock"))).files["ghostrunner.service"])
    verified(rendering)


@EXAMPLES
@given(installed=hostile_path)
def test_hostile_installed_config_is_refused_or_passed_exactly(base_config: RunnerConfig, installed: str) -> None:
    """--installed-config reaches `serve --config` and `run --config` as its normalised self, or is refused naming the option."""
    try:
        rendering = base_render(base_config, config_path=installed)
    except UnitRenderError as error:
        assert_refused(error, "--installed-config", installed)
        assert error.source is None and unusable_path(installed)
        return
    assert not unusable_path(installed)
    baseline = base_render(base_config)
    for name, text in rendering.files.items():
        assert shape(text) == shape(baseline.files[name]), name
    assert command_line(only(rendering.files["ghostrunner.service"], "ExecStart")) == [exec_path(), "serve", "--config", normal(installed)]
    assert command_line(only(rendering.files["ghostrunner-run-evening@.service"], "ExecStart")) == [
        exec_path(), "run", "evening", "--agent", RESOLVED, "--config", normal(installed)]
    verified(rendering)


@EXAMPLES
@given(name=hostile_text.filter(lambda text: 0 < len(text.encode("utf-8", "surrogatepass")) <= 200 and "/" not in text and "\0" not in text
                                and text not in (".", "..")),  # a file name the test can create
       arguments=st.lists(hostile_text, max_size=3))
def test_hostile_exec_is_refused_or_runs_exactly_that_program_and_arguments(tmp_path_factory: pytest.TempPathFactory, base_config: RunnerConfig,
                                                                          name: str, arguments: list[str]) -> None:
    """--exec's program and arguments come back from ExecStart= unchanged (verify finds the program at that exact path), or are refused."""
    directory = tmp_path_factory.mktemp("exec")
    program = f"{directory}/{name}"
    argv = [program, *arguments]
    try:
        rendering = base_render(base_config, exec_argv=argv)
    except UnitRenderError as error:
        assert error.field == "--exec" and error.source is None and "\n" not in str(error)
        assert not all(map(clean, argv)) or set(name) & set("\"'\\$")
        return
    assert all(map(clean, argv))
    path = Path(normal(program))
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(0o755)
    service = rendering.files["ghostrunner.service"]
    assert shape(service) == shape(base_render(base_config).files["ghostrunner.service"])
    assert command_line(only(service, "ExecStart")) == [str(path), *arguments, "serve", "--config", "/etc/ghostrunner/ghostrunner.toml"]
    verified(rendering)  # also fails if systemd looks for the program anywhere but at *path*


@EXAMPLES
@given(user=hostile_text)
def test_hostile_user_is_refused_or_becomes_user_and_group(base_config: RunnerConfig, user: str) -> None:
    """--user comes back as User= and Group= unchanged, or is refused: systemd ignores a User= it cannot parse and runs the unit as root."""
    try:
        rendering = base_render(base_config, user=user)
    except UnitRenderError as error:
        assert_refused(error, "--user", user)
        return
    for name in ("ghostrunner.service", "ghostrunner-run-evening@.service"):
        text = rendering.files[name]
        assert (only(text, "User"), only(text, "Group")) == (user, user)
        assert shape(text) == shape(base_render(base_config).files[name])
    verified(rendering)


@EXAMPLES
@given(agent=hostile_text.filter(bool))
def test_hostile_agent_name_is_refused_or_read_back_in_descriptions_and_instances(base_config: RunnerConfig, agent: str) -> None:
    """An agent name (through the Python API, where the config's name rule does not apply) comes back from Description= and %I, or is refused."""
    config = replace(base_config, agents={agent: replace(base_config.agents["motoko"], name=agent)})
    try:
        rendering = base_render(config)
    except UnitRenderError as error:
        assert error.field in (f"agents.{agent}", f"agents.{agent!r}") and "\n" not in str(error)
        return
    assert clean(agent)
    target = rendering.files["ghostrunner-timers.target"]
    assert specifiers(only(target, "Description")) == f"ghostrunner timers (agents: {agent})"
    [timer] = only(target, "Wants").split()  # Wants= keeps backslashes (the \\xNN of escaped names) as they are
    assert timer == f"ghostrunner-run-evening@{systemd_escape(agent)}.timer" == rendering.timers[0]
    assert systemd_unescape(timer.removeprefix("ghostrunner-run-evening@").removesuffix(".timer")) == agent
    assert specifiers(only(rendering.files["ghostrunner.service"], "Description")) == f"ghostrunner scheduler (agents: {agent})"
    verified(rendering)


@pytest.mark.parametrize("agent", ["\ufffe", "a\ufdd0", "b\U0010ffff"], ids=["fffe", "fdd0", "plane16-ffff"])
def test_an_agent_name_with_a_noncharacter_is_refused(base_config: RunnerConfig, agent: str) -> None:
    """systemd refuses a noncharacter as "not UTF-8 clean" and drops the whole Description= it is in; render refuses it first."""
    config = replace(base_config, agents={agent: replace(base_config.agents["motoko"], name=agent)})
    with pytest.raises(UnitRenderError, match=r"U\+[0-9A-F]{4}"):
        base_render(config)


def test_an_agent_name_whose_service_instance_is_too_long_is_refused(base_config: RunnerConfig) -> None:
    """The timer's name may fit systemd's 255 bytes while the service it starts (two bytes longer) does not."""
    prefix = len("ghostrunner-run-evening@")
    agent = "a" * (255 - prefix - len(".timer"))  # the timer's name is exactly 255 bytes, the service's 257
    config = replace(base_config, agents={agent: replace(base_config.agents["motoko"], name=agent, routines=("evening",))})
    with pytest.raises(UnitRenderError, match="at most 255 bytes"):
        base_render(config)
    shorter = agent[:-2]  # now the service's name is 255 bytes: accepted, and systemd loads it
    verified(base_render(replace(base_config, agents={shorter: replace(base_config.agents["motoko"], name=shorter, routines=("evening",))})))


# --- the CLI: one line, the right exit code, nothing written -------------------------------------

#: TOML for a value whose line break (a TOML escape) would start a root ExecStartPre= in an unchecked unit.
INJECTION_TOML = "\\nExecStartPre=+/usr/bin/touch /pwned\\n"
INJECTION = "\nExecStartPre=+/usr/bin/touch /pwned\n"


@pytest.mark.parametrize(("runner", "options", "field", "code"), [
    (f'journal_root = "/srv/journal{INJECTION_TOML}"', [], "agents.motoko.journal_root", 78),
    (f'lock_file = "/srv/serve.lock{INJECTION_TOML}"', [], "runner.lock_file", 78),
    ('journal_root = "journal\\u2028x"', [], "agents.motoko.journal_root", 78),
    ("", ["--installed-config", f"/etc/g.toml{INJECTION}"], "--installed-config", 2),
    ("", ["--installed-config", "/etc/g.toml\u2028[Service]"], "--installed-config", 2),
    ("", ["--installed-config", "ghostrunner.toml"], "--installed-config", 2),
    ("", ["--user", f"ghostrunner{INJECTION}"], "--user", 2),
    ("", ["--user", "ghost runner"], "--user", 2),
    ("", ["--exec", f"/usr/local/bin/ghostrunner {shlex.quote(INJECTION)}"], "--exec", 2),
    ("", ["--exec", "/usr/local/bin/ghostrunner 'unbalanced"], "--exec", 2),
], ids=["journal_root", "lock_file", "journal_root-u2028", "installed-config", "installed-config-u2028", "installed-config-relative",
        "user", "user-space", "exec-argument", "exec-unbalanced"])
def test_render_refuses_what_would_inject_with_one_line(tmp_path: Path, runner: str, options: list[str], field: str, code: int) -> None:
    """Each field refuses a line break (and its other unusable values) with exit 78 or 2, one line naming it, and no --out written."""
    agent_key = runner.startswith("journal_root")  # write_config's [runner] has one: give the agent its own
    path = write_config(tmp_path, ONE_AGENT + (runner + "\n" if agent_key else ""), runner="" if agent_key else runner + "\n")
    default_exec = [] if "--exec" in options else ["--exec", exec_path()]  # an option given twice is refused for that alone
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), *default_exec, *options)
    assert result.returncode == code, result.stderr
    prefix = f"ghostrunner: error: {path}: {field}: " if code == 78 else f"ghostrunner: error: {field}: "
    assert result.stderr.startswith(prefix), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not (tmp_path / "units").exists()


@pytest.mark.parametrize("option", ["--out", "--exec", "--installed-config"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_render_option_is_a_usage_error_not_the_working_directory_or_a_default(tmp_path: Path, option: str, value: str) -> None:
    """Like `--root ""`: Path("") is ".", so `systemd render --out ""` wrote the units into the working directory,
    and an empty --exec or --installed-config silently rendered the defaults."""
    path = write_config(tmp_path / "conf", SIMPLE_AGENT)
    work = tmp_path / "work"
    work.mkdir()
    args = ["--out", str(tmp_path / "units")] if option != "--out" else []
    result = ghostrunner("systemd", "render", "--config", str(path), *args, option, value, cwd=work)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"ghostrunner: error: Invalid value for {option}: expected a non-empty value, got {value!r}"]
    assert list(work.iterdir()) == []
    assert not (tmp_path / "units").exists()


# --- paths: normalised before they are compared, and warned about where the sandbox hides them ---

def render_cli(tmp_path: Path, agent_root: str, *options: str, runner: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    path = write_config(tmp_path / "etc", ONE_AGENT + f'journal_root = "{agent_root}"\n',
                        runner=runner or 'lock_file = "/var/lib/ghostrunner/serve.lock"\n')
    out = tmp_path / "units"
    defaults = [option for pair in (("--exec", exec_path()), ("--installed-config", "/etc/ghostrunner/ghostrunner.toml"))
                if pair[0] not in options for option in pair]  # an option given twice is refused for that alone
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), *defaults, *options)
    return result, out


def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("ghostrunner: warning: ")]


@pytest.mark.parametrize(("root", "written", "hidden"), [
    ("/srv/../home/x/journal", "/home/x/journal", "/home"),
    ("/var/lib/ghostrunner/../../../home/x", "/home/x", "/home"),  # lexically under the state directory, really not
    ("//home/x/journal/", "/home/x/journal", "/home"),
    ("/srv/./j//motoko/", "/srv/j/motoko", None),
    ("/homework/journal", "/homework/journal", None),  # a prefix of the string, not of the path
    ("/tmp/journal", "/tmp/journal", "/tmp"),
    ("/srv/../var/tmp/j", "/var/tmp/j", "/var/tmp"),
    ("/root/j", "/root/j", "/root"),
], ids=["dotdot-home", "state-dir-escape", "double-slash-home", "dot-and-slashes", "homework", "tmp", "var-tmp", "root"])
def test_paths_are_normalised_before_they_are_written_or_classified(tmp_path: Path, root: str, written: str, hidden: str | None) -> None:
    """A journal root gets ReadWritePaths= as its normalised self (systemd ignores '..'), and one warning line when the sandbox hides it."""
    result, out = render_cli(tmp_path, root)
    assert result.returncode == 0, result.stderr
    service = (out / "ghostrunner.service").read_text()
    assert path_list(only(service, "ReadWritePaths")) == [written]
    journal_warnings = [line for line in warnings_of(result) if "the journal of agent 'motoko'" in line]
    if hidden is None:
        assert journal_warnings == []
    else:
        [line] = journal_warnings
        setting = "PrivateTmp=yes" if hidden.endswith("tmp") else "ProtectHome=yes"
        assert f"is under {hidden}, which {setting}" in line and repr(str(Path(root))) in line  # as the configuration loaded it
    result = verify(out, ["ghostrunner.service", "ghostrunner-run-evening@motoko.service"])
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_tmp_lock_file_and_configuration_warn_and_the_units_are_still_written(tmp_path: Path) -> None:
    """PrivateTmp=yes hides /tmp: a lock file or configuration there warns, one line each, and render still writes every unit."""
    result, out = render_cli(tmp_path, "/var/lib/ghostrunner/motoko", "--installed-config", "/var/tmp/ghostrunner.toml",
                             runner='lock_file = "/tmp/serve.lock"\n')
    assert result.returncode == 0
    found = warnings_of(result)
    assert any(line.startswith("ghostrunner: warning: the lock file '/tmp/serve.lock' is under /tmp, which PrivateTmp=yes") for line in found)
    assert any(line.startswith("ghostrunner: warning: the configuration '/var/tmp/ghostrunner.toml' is under /var/tmp") for line in found)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["ghostrunner.service", "ghostrunner-run-evening@.service", "ghostrunner-run-evening@.timer", "ghostrunner-timers.target"])
    assert path_list(only((out / "ghostrunner.service").read_text(), "ReadWritePaths")) == ["/tmp"]


def test_a_command_backends_script_in_tmp_warns_and_a_word_naming_no_file_does_not(tmp_path: Path) -> None:
    """A backend program given "/tmp/.../backend.py": the program is visible, the script it is to run is not (PrivateTmp=yes)."""
    script = tmp_path / "backend.py"
    script.write_text("print('{}')\n")
    backend = f'backend = {{ type = "command", command = ["/bin/true", "{script}", "/v1/not-a-file"] }}\n'
    path = write_config(tmp_path / "etc", ONE_AGENT + 'journal_root = "/var/lib/ghostrunner/motoko"\n' + backend,
                        runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n')
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), "--exec", "/bin/true",
                         "--installed-config", "/etc/ghostrunner/ghostrunner.toml")
    assert result.returncode == 0, result.stderr
    assert warnings_of(result) == [(f"ghostrunner: warning: the command backend of agent 'motoko': its argument '{script}' is under /tmp, which "
                                    "PrivateTmp=yes replaces with the service's own empty directory, removed when it stops (what it writes "
                                    "there is lost); keep it elsewhere (e.g. /var/lib/ghostrunner)")]


def test_a_write_path_that_opens_a_system_directory_warns(tmp_path: Path) -> None:
    """A lock file at /serve.lock makes ReadWritePaths=/ (the whole file system writable for the service): render warns."""
    result, out = render_cli(tmp_path, "/var/lib/ghostrunner/motoko", runner='lock_file = "/serve.lock"\n')
    assert result.returncode == 0
    assert path_list(only((out / "ghostrunner.service").read_text(), "ReadWritePaths")) == ["/"]
    assert any(line.startswith("ghostrunner: warning: ReadWritePaths=/ (for a journal root or the lock file's directory) opens / ")
               for line in warnings_of(result))


def test_a_relative_journal_root_beside_another_configuration_than_the_installed_one_warns(tmp_path: Path) -> None:
    """'./journal' resolves beside the file that is read: rendered from a copy, the units would open the wrong directory. Render says so."""
    path = write_config(tmp_path / "staging", ONE_AGENT, runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n')
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units"), "--exec", exec_path(),
                         "--installed-config", "/etc/ghostrunner/ghostrunner.toml")
    assert result.returncode == 0
    assert any(line.startswith(f"ghostrunner: warning: '{tmp_path}/staging/journal' lies beside the configuration render read")
               for line in warnings_of(result))
    same = ghostrunner("systemd", "render", "--config", str(path), "--out", str(tmp_path / "units2"), "--exec", exec_path())
    assert same.returncode == 0 and not any("lies beside" in line for line in warnings_of(same))


def test_a_link_into_home_warns_with_where_it_leads(tmp_path: Path) -> None:
    """Units name the path as written (systemd follows the link itself), but a link that leads under /home is still warned about."""
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "data").symlink_to("/home/ghostrunner-attack-test")
    result, out = render_cli(tmp_path, f"{tmp_path}/srv/data/motoko")
    assert result.returncode == 0
    [line] = [line for line in warnings_of(result) if "is under /home" in line]
    assert "(that is '/home/ghostrunner-attack-test/motoko')" in line
    assert path_list(only((out / "ghostrunner.service").read_text(), "ReadWritePaths")) == [f"{tmp_path}/srv/data/motoko"]


def test_a_program_whose_interpreter_leads_under_home_warns_and_strict_refuses(tmp_path: Path) -> None:
    """The --exec script's #! python links into /home: render says so, naming the setting and the fix; --strict writes nothing, exit 78."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python3").symlink_to("/home/ghostrunner-attack-test/python3")
    program = tmp_path / "venv" / "bin" / "ghostrunner"
    program.write_text(f"#!{tmp_path}/venv/bin/python3\n")
    program.chmod(0o755)
    path = write_config(tmp_path / "etc", ONE_AGENT + 'journal_root = "/var/lib/ghostrunner/motoko"\n',
                        runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n')
    options = ["systemd", "render", "--config", str(path), "--exec", str(program), "--installed-config", "/etc/ghostrunner/ghostrunner.toml"]
    result = ghostrunner(*options, "--out", str(tmp_path / "units"))
    assert result.returncode == 0, result.stderr
    [line] = [line for line in warnings_of(result) if "/home" in line]
    assert line.startswith(f"ghostrunner: warning: the --exec program '{program}' needs '/home/ghostrunner-attack-test/python3' to start "
                           f"('{program}' -> #! interpreter '{tmp_path}/venv/bin/python3' -> symbolic link "
                           "'/home/ghostrunner-attack-test/python3'), which is under /home, which ProtectHome=yes hides from the service")
    assert "BindReadOnlyPaths=/home/ghostrunner-attack-test " in line
    strict = ghostrunner(*options, "--out", str(tmp_path / "strict-units"), "--strict")
    assert strict.returncode == 78
    assert warnings_of(strict) == warnings_of(result)
    assert strict.stderr.splitlines()[-1] == (f"ghostrunner: error: --strict: render found {len(warnings_of(result))} problems (the warnings "
                                              "above) and wrote no unit; fix them, or render without --strict")
    assert not (tmp_path / "strict-units").exists()


def test_strict_writes_the_units_when_render_has_no_warning(tmp_path: Path) -> None:
    """--strict refuses warnings only: a program, configuration, journal and lock file all visible to the service render as without it."""
    path = write_config(tmp_path / "etc", ONE_AGENT + 'journal_root = "/var/lib/ghostrunner/motoko"\n',
                        runner='lock_file = "/var/lib/ghostrunner/serve.lock"\n')
    result = ghostrunner("systemd", "render", "--config", str(path), "--exec", "/bin/true", "--installed-config",
                         "/etc/ghostrunner/ghostrunner.toml", "--out", str(tmp_path / "units"), "--strict")
    assert (result.returncode, result.stderr) == (0, "")
    assert sorted(path.name for path in (tmp_path / "units").iterdir()) == sorted(
        ["ghostrunner.service", "ghostrunner-run-evening@.service", "ghostrunner-run-evening@.timer", "ghostrunner-timers.target"])


def test_dotdot_after_a_link_warns_that_the_kernel_reads_it_otherwise(tmp_path: Path) -> None:
    """'link/..' is the parent of the link's target for the kernel, not the link's own directory: render says so."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "link").symlink_to(tmp_path / "a" / "b")
    result, _ = render_cli(tmp_path, f"{tmp_path}/srv/link/../motoko")
    assert result.returncode == 0
    assert any(f"has '..' after a symbolic link: on this host it is '{tmp_path}/a/motoko', but units name it '{tmp_path}/srv/motoko'" in line
               for line in warnings_of(result))


# --- the files render writes --------------------------------------------------------------------

def test_render_writes_through_no_symlink_in_out(tmp_path: Path) -> None:
    """A link at a unit's name in --out (say to /etc/shadow) is refused with exit 2; its target and --out stay as they were."""
    out = tmp_path / "units"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("root:secret\n")
    (out / "ghostrunner.service").symlink_to(victim)
    path = write_config(tmp_path / "etc", ONE_AGENT)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", exec_path())
    assert result.returncode == 2
    assert result.stderr.startswith(f"ghostrunner: error: --out: '{out}/ghostrunner.service' is a symbolic link (to '{victim}')")
    assert len(result.stderr.splitlines()) == 1
    assert victim.read_text() == "root:secret\n" and sorted(path.name for path in out.iterdir()) == ["ghostrunner.service"]
    linked_out = tmp_path / "linked-units"
    linked_out.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(linked_out), "--exec", exec_path())
    assert result.returncode == 2 and "is a symbolic link" in result.stderr and list((tmp_path / "elsewhere").iterdir()) == []


def test_render_replaces_its_own_units_but_no_foreign_file(tmp_path: Path) -> None:
    """A second render replaces the first one's units; a file render did not write is refused, unchanged, and nothing else is written."""
    path = write_config(tmp_path / "etc", ONE_AGENT)
    out = tmp_path / "units"
    old_umask = os.umask(0o077)
    try:
        first = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", exec_path())
        again = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", exec_path())
    finally:
        os.umask(old_umask)
    assert (first.returncode, again.returncode) == (0, 0), again.stderr
    assert {stat.S_IMODE(unit.stat().st_mode) for unit in out.iterdir()} == {0o644}  # systemd and the operator read units
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "ghostrunner-timers.target").write_text("[Unit]\nDescription=the operator's own\n")
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(foreign), "--exec", exec_path())
    assert result.returncode == 2
    assert "ghostrunner-timers.target' exists and was not written by ghostrunner systemd render" in result.stderr
    assert (foreign / "ghostrunner-timers.target").read_text() == "[Unit]\nDescription=the operator's own\n"
    assert sorted(path.name for path in foreign.iterdir()) == ["ghostrunner-timers.target"]


def test_render_into_an_out_path_too_long_for_the_filesystem_is_one_line(tmp_path: Path) -> None:
    """CLIs: one clear error line. An --out whose name is longer than NAME_MAX raised OSError while the first error was explained."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"/var/lib/ghostrunner/motoko"'), encoding="utf-8")
    out = tmp_path / ("u" * 300)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"ghostrunner: error: cannot write the units into {str(out)!r}: File name too long"


def test_the_documented_rules_agree_with_systemd_on_tricky_units() -> None:
    """The test's own parser and systemd's disagree on nothing that matters here: continuations, comments, quotes, escapes, CR."""
    text = ("# c \\\nX=1\n[Unit]\nDescription=a \\\n# mid\n b\n; semi\n[Service]\nExecStart=/bin/true \"x y\" 'a\\\"b' c\\\\d\r\n"
            'ReadWritePaths="/srv/a b" /srv/c\\ d\nEmpty=\n  Spaced  =  v  \n')
    assert read_unit(text) == [("Unit", "Description", "a   b"), ("Service", "ExecStart", "/bin/true \"x y\" 'a\\\"b' c\\\\d"),
                               ("Service", "ReadWritePaths", '"/srv/a b" /srv/c\\ d'), ("Service", "Empty", ""), ("Service", "Spaced", "v")]
    assert both_split("/bin/true \"x y\" 'a\\\"b' c\\\\d \"%%\\\\\"", c_escapes=True) == ["/bin/true", "x y", 'a"b', "c\\d", "%%\\"]
    assert both_split('"/srv/a b" /srv/c\\ d', c_escapes=False) == ["/srv/a b", "/srv/c d"]


def test_user_root_warns_and_a_numeric_user_is_refused(base_config: RunnerConfig) -> None:
    """--user root renders (an operator's explicit choice) with a warning; a numeric ID is refused (only names are checked here)."""
    rendering = base_render(base_config, user="root")
    assert any(warning.startswith("--user root: the units would run as root") for warning in rendering.warnings)
    with pytest.raises(UnitRenderError, match=r"^--user: expected a system user name .*got '0'$"):
        base_render(base_config, user="0")


def test_a_randomized_delay_of_zero_renders_as_none(base_config: RunnerConfig) -> None:
    """--randomized-delay 0s asks for no delay; it rendered as 1s, a delay nobody asked for."""
    from datetime import timedelta

    rendering = base_render(base_config, randomized_delay=timedelta(0))
    delays = {only(text, "RandomizedDelaySec") for name, text in rendering.files.items() if name.endswith(".timer")}
    assert delays == {"0s"}
    verified(rendering)


@pytest.mark.parametrize(("field", "changes"), [
    ("--user", {"user": "u" * 5000}),
    ("--user", {"user": "u" * 5000 + "\n"}),
    ("--exec", {"exec_argv": ["relative" * 1000]}),
    ("--exec", {"exec_argv": ["/" + "p" * 5000 + "\n"]}),
])
def test_a_huge_bad_value_is_quoted_cut_not_repeated_whole(base_config: RunnerConfig, field: str, changes: dict[str, object]) -> None:
    """A refused option of kilobytes is named and quoted in its first characters; the message stays one short line."""
    with pytest.raises(UnitRenderError) as caught:
        base_render(base_config, **changes)
    message = str(caught.value)
    assert caught.value.field == field and "\n" not in message
    assert "\u2026" in message and len(message) < 600, message
