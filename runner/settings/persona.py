"""Personas: who an agent is, read from a small TOML file.

A persona names the agent's interests (each a theme with tags, focus points,
images and the themes it drifts towards), places, moods and vocabulary. The
simulated backend writes from it; the openai and command backends pass its
description along.

Example (``examples/agents/motoko.toml``)::

    name = "motoko"
    description = "A field commander who thinks about ghosts and shells."
    places = ["the harbour", "the rooftop"]
    moods = ["focused", "restless"]
    openers = ["Noted:"]
    closers = ["Back to work."]

    [[interests]]
    theme = "ghost and shell"
    tags = ["identity", "body"]
    focus = ["what stays me when parts change"]
    images = ["a hand that is and is not mine"]
    drifts_to = ["memory and records"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal import EntryValidationError, check_label
from runner.errors import ConfigError, quoted
from runner.settings._toml import loads_bounded, read_bounded

__all__ = ["Interest", "Persona", "load_persona", "parse_persona"]


@dataclass(frozen=True, slots=True)
class Interest:
    """One theme the persona keeps coming back to."""

    theme: str
    tags: tuple[str, ...]
    focus: tuple[str, ...]
    images: tuple[str, ...]
    drifts_to: tuple[str, ...]
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Persona:
    """An agent's character, as the backends see it."""

    name: str
    description: str
    interests: tuple[Interest, ...]
    places: tuple[str, ...]
    moods: tuple[str, ...]
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    source: str

    def interest(self, theme: str) -> Interest | None:
        """The interest with *theme*, if the persona has it."""
        return next((item for item in self.interests if item.theme == theme), None)

    def to_dict(self) -> dict[str, Any]:
        """The persona as plain data, for prompts."""
        return {
            "name": self.name,
            "description": self.description,
            "interests": [item.theme for item in self.interests],
            "places": list(self.places),
            "moods": list(self.moods),
        }


_TOP = {"name": str, "description": str, "places": list, "moods": list, "openers": list, "closers": list, "interests": list}
_INTEREST = {"theme": str, "tags": list, "focus": list, "images": list, "drifts_to": list, "weight": float}
_REQUIRED_LISTS = ("places", "moods", "interests")
_MAX_WEIGHT = 1e6


def _strings(value: object, source: str, key: str, *, required: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ConfigError(source, key, "a list of non-empty strings", type(value).__name__)
    if required and not value:
        raise ConfigError(source, key, "at least one item", "an empty list")
    return tuple(value)


def _labels(value: object, source: str, key: str, label: str) -> tuple[str, ...]:
    """A required list of labels that entries carry as they are (tags, focus points, moods).

    The entry schema's own rule for a label is applied here, at load time: a persona whose
    tag is too long or holds a control character would otherwise load and then fail every
    simulated run it writes. Tags must also be unique, as an entry's tags are.
    """
    items = _strings(value, source, key, required=True)
    for position, item in enumerate(items):
        _label(item, source, f"{key}[{position}]", label)
    if label == "tag" and len(set(items)) != len(items):
        twice = next(item for position, item in enumerate(items) if item in items[:position])
        raise ConfigError(source, key, "unique tags", f"{quoted(twice)} twice")
    return items


def _label(value: str, source: str, key: str, label: str) -> str:
    try:
        return check_label(value, key, label)
    except EntryValidationError as exc:
        raise ConfigError(source, key, exc.expected, exc.got) from None


def parse_persona(data: dict[str, Any], source: str) -> Persona:
    """Validate persona *data* (parsed TOML) read from *source*.

    Raises:
        ConfigError: an unknown or missing key, or a value of the wrong type.
    """
    for key in data:
        if key not in _TOP:
            raise ConfigError(source, key, "one of the persona keys " + ", ".join(sorted(_TOP)), "an unknown key")
    for key in ("name", "description", *_REQUIRED_LISTS):
        if key not in data:
            raise ConfigError(source, key, "a value (the key is required)", "nothing")
    for key in ("name", "description"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise ConfigError(source, key, "a non-empty string", repr(data[key]))
    interests = []
    if not isinstance(data["interests"], list) or not data["interests"]:
        raise ConfigError(source, "interests", "a non-empty array of [[interests]] tables", type(data["interests"]).__name__)
    for position, item in enumerate(data["interests"]):
        where = f"interests[{position}]"
        if not isinstance(item, dict):
            raise ConfigError(source, where, "a table", type(item).__name__)
        for key in item:
            if key not in _INTEREST:
                raise ConfigError(source, f"{where}.{key}", "one of " + ", ".join(sorted(_INTEREST)), "an unknown key")
        if not isinstance(item.get("theme"), str) or not item["theme"].strip():
            raise ConfigError(source, f"{where}.theme", "a non-empty string", repr(item.get("theme")))
        _label(item["theme"], source, f"{where}.theme", "theme")
        weight = item.get("weight", 1.0)
        # Bounded: random.choices refuses weights whose total is not finite (inf, or many 1e308s).
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not (0 < weight <= _MAX_WEIGHT and math.isfinite(weight)):
            raise ConfigError(source, f"{where}.weight", f"a positive number of at most {_MAX_WEIGHT:g}", repr(weight))
        interests.append(
            Interest(
                theme=item["theme"],
                tags=_labels(item.get("tags", []), source, f"{where}.tags", "tag"),
                focus=_labels(item.get("focus", []), source, f"{where}.focus", "focus"),
                images=_strings(item.get("images", []), source, f"{where}.images", required=True),
                drifts_to=_strings(item.get("drifts_to", []), source, f"{where}.drifts_to", required=False),
                weight=float(weight),
            )
        )
    themes = {item.theme for item in interests}
    for position, item in enumerate(interests):
        for target in item.drifts_to:
            if target not in themes:
                raise ConfigError(source, f"interests[{position}].drifts_to", "themes defined in [[interests]]", repr(target))
    return Persona(
        name=data["name"],
        description=data["description"],
        interests=tuple(interests),
        places=_strings(data["places"], source, "places", required=True),
        moods=_labels(data["moods"], source, "moods", "mood"),
        openers=_strings(data.get("openers", []), source, "openers", required=False),
        closers=_strings(data.get("closers", []), source, "closers", required=False),
        source=source,
    )


def load_persona(path: Path) -> Persona:
    """Read and validate the persona file at *path*.

    Raises:
        ConfigError: the file is unreadable, not TOML, or not a valid persona.
    """
    return parse_persona(loads_bounded(read_bounded(path, "persona file"), path), str(path))
