"""The configuration's schema: each table's keys, and the check of every field in them.

:class:`FieldReader` validates one parsed TOML document field by field, and
reports the first problem as a :class:`ConfigError` naming the file, the
dotted key and what was expected.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from journal import KINDS, MAX_K, REDACT_MODES, make_redactor
from journal.frame import check_url_address, is_loopback_host, url_authority
from routines import BUILTIN_ROUTINES, ROUTINE_FIELDS, SLOT_GRANULARITIES, Routine
from runner.cron.slots import cron_trigger
from runner.errors import ConfigError, quoted
from runner.settings._model import MEMORIES, AgentConfig, BackendSettings
from runner.settings.persona import load_persona

__all__ = ["DURATION_EXPECTED", "MAX_DURATION", "FieldReader", "parse_duration"]

BACKEND_TYPES: Final = ("simulated", "openai", "command")
_AGENT_KEYS: Final = (
    "persona",
    "backend",
    "routines",
    "journal_root",
    "memory",
    "mix_simulated",
    "redact",
    "redact_patterns",
    "accept_proposals",
)
#: What an agent's runs do with the supersede proposals its new entry makes: accept those above the stricter threshold, or leave them.
ACCEPT_PROPOSALS: Final = ("never", "auto")
_BACKEND_KEYS: Final = {
    "simulated": ("type",),
    "openai": ("type", "base_url", "model", "api_key_env", "timeout", "json_mode", "temperature", "attempts", "retry_delay"),
    "command": ("type", "command", "model", "timeout", "attempts", "retry_delay"),
}
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_ROUTINE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_DURATION: Final = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
#: The longest duration accepted anywhere (a routine's window, a timeout): 100 years, far
#: beyond any use, and small enough that a time minus it stays a valid datetime.
MAX_DURATION: Final = timedelta(days=36525)
#: The most backend calls one run may make (attempts), and the longest first retry wait.
MAX_ATTEMPTS: Final = 20
MAX_RETRY_DELAY: Final = timedelta(hours=1)
#: What a bad duration is told it should be, in its error (of a configuration key or a command line option).
DURATION_EXPECTED: Final = "a duration such as '90s', '10m', '6h', '7d', '1h30m' or a number of seconds, at most 100 years"


def parse_duration(value: object) -> timedelta:
    """A duration from TOML: seconds as a number, or text like ``1h30m``; at most MAX_DURATION.

    Raises:
        ValueError: anything else, a negative or non-finite number, or more than MAX_DURATION.
    """
    if isinstance(value, bool):
        raise ValueError(DURATION_EXPECTED)  # noqa: TRY004 - the caller turns every bad value into one ConfigError
    if isinstance(value, int | float):
        # Checked before timedelta(), which raises OverflowError for 1e30 or inf.
        if not math.isfinite(value) or not 0 <= value <= MAX_DURATION.total_seconds():
            raise ValueError(DURATION_EXPECTED)
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _DURATION.fullmatch(value.strip())
        if match and any(match.groups()):
            weeks, days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
            total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
            if total <= MAX_DURATION.total_seconds():
                return timedelta(seconds=total)
    raise ValueError(DURATION_EXPECTED)


def _check_base_url(url: str, key: str, fail: Any) -> None:
    """Refuse a base_url the openai backend cannot use safely: credentials in it, a query, a bad host or port.

    A user:password part would be quoted in errors and logs; the API key
    belongs in the variable ``api_key_env`` names. The value is never shown
    back whole, since it may hold a secret.
    """
    if "@" in url_authority(url):
        raise fail(
            key,
            "a URL without user:password@ (put the key in the environment variable api_key_env names)",
            "an address with credentials in it (not shown)",
        )
    if "?" in url or "#" in url:
        raise fail(key, "a base URL without ?query or #fragment (the backend appends /chat/completions)", "an address with one (not shown)")
    try:
        check_url_address(url)
    except ValueError as exc:
        raise fail(key, str(exc), url) from None


class FieldReader:
    """Validates one parsed TOML document, naming keys relative to *source*."""

    def __init__(self, source: str, files_base: Path, state_base: Path) -> None:
        self.source = source
        self.files_base = files_base
        self.state_base = state_base

    def fail(self, key: str, expected: str, got: object = None) -> ConfigError:
        shown = (
            None
            if got is None
            else (got if isinstance(got, str) and (got.startswith("an ") or got in ("nothing", "none")) else quoted(got))
        )
        return ConfigError(self.source, key, expected, shown)

    def table(self, value: object, key: str, allowed: tuple[str, ...] | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, "a table", type(value).__name__)
        if allowed is not None:
            for name in value:
                if name not in allowed:
                    raise self.fail(f"{key}.{name}" if key else name, "one of the keys " + ", ".join(allowed), "an unknown key")
        return value

    def string(self, value: object, key: str) -> str:
        # NUL is valid TOML (\u0000) but no path, URL, zone or environment name can hold it:
        # os and subprocess calls would raise ValueError mid-run instead of a ConfigError here.
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise self.fail(key, "a non-empty string without NUL characters", value)
        return value

    def duration(self, value: object, key: str) -> timedelta:
        try:
            return parse_duration(value)
        except ValueError:
            raise self.fail(key, DURATION_EXPECTED, value) from None

    def positive_int(self, value: object, key: str, minimum: int = 1, maximum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum is not None and value > maximum):
            expected = f"an integer of at least {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"
            raise self.fail(key, expected, value)
        return value

    def path(self, value: object, key: str, *, state: bool) -> Path:
        text = self.string(value, key)
        path = Path(os.path.expanduser(text))
        return path if path.is_absolute() else (self.state_base if state else self.files_base) / path

    def timezone(self, value: object) -> ZoneInfo:
        name = self.string(value, "runner.timezone")
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name, or a directory
            raise self.fail("runner.timezone", "an IANA time zone name such as 'Europe/Berlin' or 'UTC'", name) from None

    def memory(self, value: object, key: str) -> str:
        if not isinstance(value, str) or value not in MEMORIES:
            raise self.fail(key, "one of " + ", ".join(repr(memory) for memory in MEMORIES), value)
        return value

    def routine(self, name: str, value: object, tz: ZoneInfo) -> Routine:
        key = f"routines.{name}"
        if not _ROUTINE_NAME.fullmatch(name):
            raise self.fail(key, "a routine name of lowercase letters, digits, '-' or '_'", name)
        data = self.table(value, key, (*ROUTINE_FIELDS, "gate"))  # the gate is the runner's (runner.settings._gate)
        base = BUILTIN_ROUTINES.get(name)
        if base is None:
            for required in ("kind", "schedule", "slot", "question", "prompt"):
                if required not in data:
                    raise self.fail(f"{key}.{required}", f"a value (required for the new routine {name!r})", "nothing")
        changes: dict[str, Any] = {}
        if "kind" in data:
            if data["kind"] not in KINDS:
                raise self.fail(f"{key}.kind", "one of " + ", ".join(KINDS), data["kind"])
            changes["kind"] = data["kind"]
        if "schedule" in data:
            schedule = self.string(data["schedule"], f"{key}.schedule")
            try:
                cron_trigger(schedule, tz)
            except ValueError as exc:
                raise self.fail(
                    f"{key}.schedule", f"a five-field cron expression that fires, such as '0 21 * * *' ({exc})", schedule
                ) from None
            changes["schedule"] = schedule
        if "slot" in data:
            if data["slot"] not in SLOT_GRANULARITIES:
                raise self.fail(f"{key}.slot", "one of " + ", ".join(SLOT_GRANULARITIES), data["slot"])
            changes["slot"] = data["slot"]
        for text_key in ("question", "prompt"):
            if text_key in data:
                changes[text_key] = self.string(data[text_key], f"{key}.{text_key}")
        if "window" in data:
            changes["window"] = self.duration(data["window"], f"{key}.window")
        if "context_k" in data:
            changes["context_k"] = self.positive_int(data["context_k"], f"{key}.context_k", maximum=MAX_K)
        if "context_chars" in data:
            changes["context_chars"] = self.positive_int(data["context_chars"], f"{key}.context_chars", minimum=1000)
        if base is not None:
            return base.with_overrides(**changes)
        changes.setdefault("window", timedelta(days=7))
        return Routine(name=name, **changes)

    def backend(self, value: object, key: str) -> BackendSettings:
        is_short = isinstance(value, str)
        data = self.table({"type": value} if is_short else value, key, None)
        kind = data.get("type", "simulated")
        if kind not in BACKEND_TYPES:
            raise self.fail(key if is_short else f"{key}.type", "one of " + ", ".join(BACKEND_TYPES), kind)
        self.table(data, key, _BACKEND_KEYS[kind])
        settings: dict[str, Any] = {"type": kind}
        if "base_url" in data:
            url = self.string(data["base_url"], f"{key}.base_url")
            if not url.startswith(("http://", "https://")):
                raise self.fail(f"{key}.base_url", "an http:// or https:// URL", url)
            _check_base_url(url, f"{key}.base_url", self.fail)
            settings["base_url"] = url.rstrip("/")
        for text_key in ("model", "api_key_env"):
            if text_key in data:
                settings[text_key] = self.string(data[text_key], f"{key}.{text_key}")
        if "timeout" in data:
            timeout = self.duration(data["timeout"], f"{key}.timeout").total_seconds()
            if timeout <= 0:
                raise self.fail(f"{key}.timeout", "a positive duration", data["timeout"])
            settings["timeout"] = timeout
        if "json_mode" in data:
            if not isinstance(data["json_mode"], bool):
                raise self.fail(f"{key}.json_mode", "true or false", data["json_mode"])
            settings["json_mode"] = data["json_mode"]
        if "attempts" in data:
            settings["attempts"] = self.positive_int(data["attempts"], f"{key}.attempts", maximum=MAX_ATTEMPTS)
        if "retry_delay" in data:
            delay = self.duration(data["retry_delay"], f"{key}.retry_delay")
            if delay > MAX_RETRY_DELAY:
                raise self.fail(f"{key}.retry_delay", "a duration of at most 1h", data["retry_delay"])
            settings["retry_delay"] = delay.total_seconds()
        if "temperature" in data:
            temperature = data["temperature"]
            if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
                raise self.fail(f"{key}.temperature", "a number between 0 and 2", temperature)
            settings["temperature"] = float(temperature)
        if kind == "command":
            command = data.get("command")
            if (
                not isinstance(command, list)
                or not command
                or not all(isinstance(part, str) and part and "\x00" not in part for part in command)
            ):
                raise self.fail(
                    f"{key}.command", "a non-empty list of strings without NUL characters (the program and its arguments)", command
                )
            program = command[0]
            if "/" in program and not os.path.isabs(program):
                program = str(self.files_base / program)
            settings["command"] = (program, *command[1:])
        built = BackendSettings(**settings)
        host = urlsplit(built.base_url).hostname or ""
        if built.type == "openai" and built.api_key_env and built.base_url.startswith("http://") and not is_loopback_host(host):
            # A warning, not a refusal: a trusted network (a VPN, a private link) is the operator's call;
            # it is logged on every load, so it is not missed.
            logging.getLogger("runner.config").warning(
                "%s: %s.base_url: the API key in $%s is sent in cleartext to %s over http://; use https:// for an endpoint "
                "that is not on this host",
                self.source,
                key,
                built.api_key_env,
                quoted(host),
            )
        return built

    def agent(self, name: str, value: object, routines: Mapping[str, Routine], root_template: str, memory: str = "lexical") -> AgentConfig:
        key = f"agents.{name}"
        if not _NAME.fullmatch(name):
            raise self.fail(key, "an agent name of 1-64 letters, digits, '_', '.', '@' or '-'", name)
        data = self.table(value, key, _AGENT_KEYS)
        backend = self.backend(data.get("backend", "simulated"), f"{key}.backend")
        persona = None
        if "persona" in data:
            persona_path = self.path(data["persona"], f"{key}.persona", state=False)
            try:
                is_file = persona_path.is_file()
            except OSError:  # a name too long for the filesystem (ENAMETOOLONG), no permission on a directory: no file to read
                is_file = False
            if not is_file:
                raise self.fail(f"{key}.persona", f"a persona TOML file (looked for {str(persona_path)!r})", data["persona"])
            persona = load_persona(persona_path)
        elif backend.type == "simulated":
            raise self.fail(f"{key}.persona", "a persona file (the simulated backend writes from it)", "nothing")
        names = data.get("routines", list(BUILTIN_ROUTINES))
        if not isinstance(names, list) or not names:
            raise self.fail(f"{key}.routines", "a non-empty list of routine names", names)
        for position, routine in enumerate(names):
            if routine not in routines:
                raise self.fail(
                    f"{key}.routines[{position}]",
                    "a routine defined under [routines] or built in (" + ", ".join(sorted(routines)) + ")",
                    routine,
                )
        if len(set(names)) != len(names):
            raise self.fail(f"{key}.routines", "each routine once", names)
        template = self.string(data["journal_root"], f"{key}.journal_root") if "journal_root" in data else root_template
        root = self.path(template.replace("{agent}", name), f"{key}.journal_root", state=True)
        if "memory" in data:
            memory = self.memory(data["memory"], f"{key}.memory")
        mix_simulated = data.get("mix_simulated", False)
        if not isinstance(mix_simulated, bool):
            raise self.fail(f"{key}.mix_simulated", "true or false", mix_simulated)
        redact = data.get("redact", "default")
        if redact not in REDACT_MODES:
            raise self.fail(f"{key}.redact", "one of " + ", ".join(repr(mode) for mode in REDACT_MODES), redact)
        patterns = data.get("redact_patterns", {})
        if not isinstance(patterns, dict):
            raise self.fail(f"{key}.redact_patterns", "a table of kinds, each a regular expression", patterns)
        for kind, expression in patterns.items():
            try:
                make_redactor("off", {kind: expression})
            except ValueError as exc:
                raise self.fail(f"{key}.redact_patterns.{kind}", str(exc).split(", got ")[0], expression) from None
        accept = data.get("accept_proposals", "never")
        if accept not in ACCEPT_PROPOSALS:
            raise self.fail(f"{key}.accept_proposals", "one of " + ", ".join(repr(mode) for mode in ACCEPT_PROPOSALS), accept)
        return AgentConfig(
            name=name,
            persona=persona,
            backend=backend,
            routines=tuple(names),
            journal_root=root,
            memory=memory,
            mix_simulated=mix_simulated,
            redact=redact,
            redact_patterns=tuple(sorted(patterns.items())),
            accept_proposals=accept,
        )
