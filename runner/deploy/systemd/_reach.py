"""What a unit's program needs in order to start, followed on this host, and what of it the sandbox hides.

``ExecStart=`` names a program, but the kernel reaches much more before the
runner's first line runs: every symbolic link on the program's way, then for
a script its ``#!`` interpreter (a script itself, a few levels deep), found
through the units' ``PATH`` when the line is ``#!/usr/bin/env python3``, and
that interpreter's own links. A virtual environment's ``python`` reads the
``home`` of its ``pyvenv.cfg`` for the base installation's standard library,
and its ``.pth`` files add directories to ``sys.path`` (an editable install's
source tree). A console script of a venv made from a Python under ``/root``
(pyenv's, say) therefore fails at every start with 203/EXEC, however plain
its own path.

:func:`startup_chain` follows all of that on the rendering host, where the
files exist (units rendered for another host find nothing to follow, and
nothing is warned about); :func:`startup_warnings` says which steps the
sandbox hides, by which setting, and what makes the start work.
"""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

__all__ = ["HIDDEN", "UNIT_PATH", "Step", "startup_chain", "startup_warnings"]

#: What the sandbox hides from the service, and which setting hides it.
HIDDEN: Final = (
    ("/home", "ProtectHome=yes"),
    ("/root", "ProtectHome=yes"),
    ("/run/user", "ProtectHome=yes"),
    # S108 is wrong here twice: directories the sandbox hides, not files written there
    ("/tmp", "PrivateTmp=yes"),  # noqa: S108
    ("/var/tmp", "PrivateTmp=yes"),  # noqa: S108
)
#: The PATH systemd gives system services (its manager's default; the units set none of their own).
UNIT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Symbolic links followed for one path before giving up, as the kernel does (ELOOP).
_MAX_LINKS: Final = 40
#: Interpreters followed (a script whose interpreter is a script ...); the kernel itself stops after a few.
_MAX_INTERPRETERS: Final = 5
#: How a venv's base installation is reached, in a step.
_VENV_HOME: Final = "its venv's base installation (pyvenv.cfg home)"
#: The kernel reads at most this much of a ``#!`` line.
_SHEBANG_MAX: Final = 256
#: env's options that take an argument (GNU coreutils): short ones, and long ones when the argument is the next word.
_ENV_SHORT_WITH_ARGUMENT: Final = frozenset("uCa")
_ENV_LONG_WITH_ARGUMENT: Final = frozenset({"--unset", "--chdir", "--argv0"})


@dataclass(frozen=True, slots=True)
class Step:
    """One path the start of a program reaches.

    Attributes:
        path: the absolute path, lexically normalised, as it is reached.
        how: how the chain got there, for a message (``"#! interpreter"``, ``"symbolic link"``, ...).
    """

    path: str
    how: str


def _hidden_root(path: str, hidden: Sequence[tuple[str, str]] = HIDDEN) -> tuple[str, str] | None:
    """The (directory, setting) of *hidden* that *path* lies under, or None."""
    for directory, setting in hidden:
        if PurePosixPath(path).is_relative_to(directory):
            return directory, setting
    return None


def _normal(path: str) -> str:
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def _links(path: str) -> tuple[list[Step], str]:
    """Where each symbolic link on the way to *path* sends it (one step each), and where it ends (its real path)."""
    steps = []
    done = "/"  # the part looked up so far, free of links
    rest = [part for part in path.split("/") if part]
    followed = 0
    while rest:
        part = rest.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        candidate = os.path.join(done, part)
        try:
            target = os.readlink(candidate)
        except OSError:  # not a link (or missing: the kernel fails there, and so does the start)
            done = candidate
            continue
        followed += 1
        if followed > _MAX_LINKS:
            break
        if target.startswith("/"):
            done = "/"
        rest = [part for part in target.split("/") if part] + rest
        steps.append(Step(_normal(os.path.join(done, *rest)), "symbolic link"))
    return steps, os.path.realpath(path)


def _read_regular(path: str, limit: int | None = None) -> bytes | None:
    """Up to *limit* bytes of *path* (all of it without one) if it is a regular file, else None.

    Opened without blocking and checked before reading: a FIFO where a script or a venv's file should
    be would otherwise wait for a writer, and render with it, for ever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # unreadable, missing: nothing more to follow
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return file.read(limit) if limit is not None else file.read()
        except OSError:
            return None


def _shebang(path: str) -> list[str] | None:
    """The words of *path*'s ``#!`` line (the interpreter, then its one argument if any), or None if it has none.

    As the kernel reads it: the interpreter ends at the first space or tab, and the rest of the line is one argument.
    """
    head = _read_regular(path, _SHEBANG_MAX)
    if head is None or not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip()
    interpreter, _, argument = re.sub("[ \t]", " ", line, count=1).partition(" ")
    argument = argument.strip()
    return [interpreter, argument] if argument else [interpreter] if interpreter else None


def _env_command(words: Sequence[str]) -> str | None:
    """The command ``env WORDS...`` runs: its options (and the arguments of ``-u``, ``-C``, ``-a``) and VAR=value assignments skipped.

    ``-S`` splits a one-word argument, so every word is split first.
    """
    split = [piece for word in words for piece in word.split()]
    taking_argument = False
    for position, word in enumerate(split):
        if taking_argument:
            taking_argument = False
            continue
        if word == "--":
            return split[position + 1] if position + 1 < len(split) else None
        if word.startswith("--"):
            taking_argument = word in _ENV_LONG_WITH_ARGUMENT  # --unset NAME; --unset=NAME carries its own
            continue
        if word.startswith("-"):  # "-" alone is -i
            # A cluster of short options (-iu NAME): the first that takes an argument takes the rest of the word, or the next word.
            for offset, option in enumerate(word[1:], start=2):
                if option in _ENV_SHORT_WITH_ARGUMENT:
                    taking_argument = offset == len(word)
                    break
            continue
        if "=" in word:
            continue
        return word
    return None


def _on_path(command: str, search: str) -> str | None:
    for directory in search.split(":"):
        candidate = os.path.join(directory, command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _venv(executable: str) -> tuple[str, str | None] | None:
    """(the venv's directory, its pyvenv.cfg ``home``) for a Python started as *executable*, or None outside a venv.

    Python reads the first pyvenv.cfg beside *executable* or one directory up, with or without a home.
    """
    directory = os.path.dirname(executable)
    for root in (directory, os.path.dirname(directory)):
        try:
            content = _read_regular(os.path.join(root, "pyvenv.cfg"))
            if content is None:
                continue
            lines = content.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        for line in lines:
            key, equals, value = line.partition("=")
            if equals and key.strip() == "home" and value.strip().startswith("/"):
                return root, _normal(value.strip())
        return root, None
    return None


def _pth_paths(venv: str) -> list[Step]:
    """The directories the venv's .pth files add to ``sys.path`` (an editable install's source tree), where they exist."""
    steps = []
    for site in sorted(glob.glob(os.path.join(glob.escape(venv), "lib", "python3*", "site-packages"))):
        for pth in sorted(glob.glob(os.path.join(glob.escape(site), "*.pth"))):
            try:
                content = _read_regular(pth)
                if content is None:
                    continue
                lines = content.decode("utf-8").splitlines()
            except UnicodeDecodeError:
                continue
            # As site.py reads them: a line starting with "import" is code, '#' a comment, anything else a path relative to site.
            for line in dict.fromkeys(line.strip() for line in lines):
                path = _normal(os.path.join(site, line)) if line and not line.startswith(("#", "import ", "import\t")) else None
                if path is not None and os.path.isdir(path):
                    steps.append(Step(path, f"a directory its {os.path.basename(pth)} puts on sys.path"))
    return steps


def startup_chain(argv: Sequence[str], *, unit_path: str = UNIT_PATH) -> list[Step]:
    """Every path starting ``argv`` reaches on this host, the program first (``argv[0]``, or where *unit_path* finds a bare name).

    Followed: the symbolic links on each path's way, a script's ``#!`` interpreter, a ``/usr/bin/env``
    command (the program's or the ``#!`` line's) looked up on *unit_path*, and a venv interpreter's
    base installation (pyvenv.cfg ``home``) and the directories its .pth files add. A step whose file does not exist here ends the chain;
    a bare name found nowhere on *unit_path* makes it empty.
    """
    program = argv[0] if argv[0].startswith("/") else None if "/" in argv[0] else _on_path(argv[0], unit_path)
    if program is None:
        return []
    chain = [Step(_normal(program), "program")]
    executable, words = chain[0].path, list(argv[1:])
    for _ in range(_MAX_INTERPRETERS):
        links, real = _links(executable)
        chain += links
        if os.path.basename(real) == "env":
            command = _env_command(words)
            found = None if command is None or "/" in command else _on_path(command, unit_path)
            if found is None:
                break
            chain.append(Step(found, f"'env {command}' on the units' PATH"))
            executable, words = found, []
            continue
        shebang = _shebang(real)
        if shebang is None:  # a binary: if it is a venv's Python, it loads the base installation's standard library, then the .pth paths
            venv = _venv(executable)
            if venv is not None and venv[1] is not None:
                chain.append(Step(venv[1], _VENV_HOME))
                chain += _links(venv[1])[0]
            if venv is not None:
                chain += _pth_paths(venv[0])
            break
        if not shebang[0].startswith("/"):
            break
        chain.append(Step(_normal(shebang[0]), "#! interpreter"))
        executable, words = chain[-1].path, shebang[1:]
    return chain


def _installation(path: str) -> str:
    """The directory to expose for *path*: the installation holding it (the parent of its ``bin``), else its own directory."""
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    return os.path.dirname(directory) if os.path.basename(directory) == "bin" else directory


def _route(chain: Sequence[Step], upto: int) -> str:
    return " -> ".join([repr(chain[0].path), *(f"{step.how} {step.path!r}" for step in chain[1 : upto + 1])])


def startup_warnings(
    what: str, argv: Sequence[str], *, known: Sequence[str] = (), hidden: Sequence[tuple[str, str]] = HIDDEN, unit_path: str = UNIT_PATH
) -> list[str]:
    """One line for each installation the sandbox hides on the way to starting *argv*, with the setting and the fix.

    *what* names the program in the message (``the --exec program``); steps at a path of *known* (the program's
    own, already warned about) are left out. *hidden* and *unit_path* differ from the units' only in tests of the chain itself.
    """
    chain = startup_chain(argv, unit_path=unit_path)
    warnings: dict[str, str] = {}
    for index, step in enumerate(chain):
        root = _hidden_root(step.path, hidden)
        if root is None or step.path in known:
            continue
        directory, setting = root
        expose = _installation(step.path)
        if expose in warnings:
            continue
        # A venv's own python outside the sandbox's hiding starts, then finds no standard library where its home is.
        fails = (
            "every start fails (Python finds no standard library)"
            if step.how == _VENV_HOME
            else "every start fails (what it imports from there is missing)"
            if step.how.endswith("sys.path")
            else "every start fails (203/EXEC)"
        )
        reached = f"{what} {chain[0].path!r} needs {step.path!r} to start ({_route(chain, index)}), which is under {directory}"
        if setting == "ProtectHome=yes":
            warnings[expose] = (
                f"{reached}, which {setting} hides from the service: {fails}; install the project "
                "with a system Python (/usr/bin/python3 -m venv /opt/ghostrunner), or give the units a drop-in with "
                f"ProtectHome=tmpfs and BindReadOnlyPaths={expose} (under ProtectHome=yes no ReadOnlyPaths= or "
                "BindReadOnlyPaths= entry is visible)"
            )
        else:
            warnings[expose] = (
                f"{reached}, which {setting} replaces with the service's own empty directory: {fails}; "
                "install it elsewhere (e.g. a venv of a system Python in /opt/ghostrunner)"
            )
    return list(warnings.values())
