"""Redaction at append: secrets in an entry's text replaced by ``[redacted:<kind>]`` before the entry is stored.

What the default pass catches (each a *kind*):

``api-key``
    Provider keys with a telling prefix: ``sk-`` (OpenAI, Anthropic ``sk-ant-``), ``sk_live_`` / ``rk_live_``
    (Stripe), ``AIza`` (Google).
``github-token``
    ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` and ``github_pat_`` tokens.
``slack-token``
    ``xoxb-``, ``xoxp-``, ``xoxa-``, ``xoxr-``, ``xoxs-`` tokens.
``aws-access-key``
    AWS access key ids (``AKIA`` / ``ASIA`` and 16 capitals or digits).
``jwt``
    JSON Web Tokens (three base64url parts, the first two starting ``eyJ``).
``private-key``
    PEM private keys, from their ``-----BEGIN ... PRIVATE KEY-----`` line to their ``END`` line.
``url-password``
    The password of a URL (``scheme://user:PASSWORD@host``); the user and the host stay.
``high-entropy``
    A word of :data:`ENTROPY_MIN_LENGTH` to :data:`ENTROPY_MAX_LENGTH` letters, digits and ``+/_-=``, holding capitals
    and small letters, whose characters carry at least :data:`ENTROPY_MIN_BITS` bits each (Shannon entropy) when it
    holds two digits or more, else at least :data:`ENTROPY_MIN_BITS_WITHOUT_DIGITS`: a random token with no telling
    prefix. (Long CamelCase names reach about 4.2 bits, random base62 tokens of 24 characters or more about 4.4 and up.)

Not caught, on purpose: hex digests and UUIDs (no capitals: commit ids and hashes in prose are an entry's
business), base64 longer than :data:`ENTROPY_MAX_LENGTH` (an inline image), words shorter than
:data:`ENTROPY_MIN_LENGTH`, and passwords written as prose ("the password is hunter2"). Extra patterns (a
kind and a regular expression) catch what a deployment knows of its own secrets.

The pass runs over the text fields (``voice``, ``theme``, ``mood``, ``tags``, the anchors' ``ref`` and
``label``, ``signals.focus``), never over ids, times or ``meta``; the entry then records
``meta.redacted = {"spans": n, "kinds": [...]}``, never the secret.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from journal.files._schema import ANCHOR_REF_MAX, LABEL_MAX

__all__ = [
    "ENTROPY_MAX_LENGTH",
    "ENTROPY_MIN_BITS",
    "ENTROPY_MIN_BITS_WITHOUT_DIGITS",
    "ENTROPY_MIN_LENGTH",
    "REDACT_MODES",
    "Redactor",
    "make_redactor",
]

REDACT_MODES: Final = ("default", "off")
#: The shortest word the entropy rule looks at.
ENTROPY_MIN_LENGTH: Final = 24
#: The longest: longer runs are data (an inline image, a blob), not a key.
ENTROPY_MAX_LENGTH: Final = 160
#: Bits per character (Shannon entropy of the word's characters) at or above which a word is taken for a secret.
ENTROPY_MIN_BITS: Final = 4.0
#: The same, for a word with fewer than two digits (a CamelCase name is such a word).
ENTROPY_MIN_BITS_WITHOUT_DIGITS: Final = 4.5

_DEFAULT: Final = (
    ("private-key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("api-key", r"(?<![A-Za-z0-9])(?:sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}|[sr]k_live_[A-Za-z0-9]{16,}|AIza[A-Za-z0-9_-]{35})"),
    ("github-token", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("slack-token", r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("aws-access-key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
)
# Only the password: ``scheme://user:`` before it and ``@host`` after it stay.
_URL_PASSWORD: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s:/@]+):([^\s/@]+)@")
_WORD: Final = re.compile(rf"[A-Za-z0-9+/_=-]{{{ENTROPY_MIN_LENGTH},}}")
_KIND: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_MARKER_START: Final = "[redacted:"
#: What ends a field cut to its limit (see :func:`_fit`).
CUT_MARK: Final = "\u2026"


def _fit(value: str, limit: int) -> str:
    """*value*, redacted, within *limit* characters: a field its markers made too long is cut, never left invalid.

    The cut ends in ``…`` and never splits a marker (one cut through is left out whole), so what is kept reads as
    redacted text and holds no part of a secret.
    """
    if len(value) <= limit:
        return value
    head = value[: limit - len(CUT_MARK)]
    start = head.rfind(_MARKER_START)
    if start >= 0 and "]" not in head[start:]:
        head = head[:start]
    return head.rstrip() + CUT_MARK


def _entropy(word: str) -> float:
    counts = Counter(word)
    return -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())


def _is_random(word: str) -> bool:
    if len(word) > ENTROPY_MAX_LENGTH:
        return False
    if not (any(c.isupper() for c in word) and any(c.islower() for c in word)):
        return False
    digits = sum(c.isdigit() for c in word)
    return _entropy(word) >= (ENTROPY_MIN_BITS if digits >= 2 else ENTROPY_MIN_BITS_WITHOUT_DIGITS)


@dataclass(frozen=True, slots=True)
class Redactor:
    """One redaction pass: its patterns (each a kind and a compiled expression), and whether the entropy rule runs."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...]
    entropy: bool = True

    def text(self, value: str) -> tuple[str, list[str]]:
        """*value* with every secret replaced by ``[redacted:<kind>]``, and the kind of each span replaced."""
        kinds: list[str] = []

        def marker(kind: str) -> str:
            kinds.append(kind)
            return f"[redacted:{kind}]"

        for kind, pattern in self.patterns:
            value = pattern.sub(lambda _m, k=kind: marker(k), value)  # type: ignore[misc]
        value = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{marker('url-password')}@", value)
        if self.entropy:
            value = _WORD.sub(lambda m: marker("high-entropy") if _is_random(m.group(0)) else m.group(0), value)
        return value, kinds

    def payload(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """*payload* with its text fields redacted, and ``meta.redacted`` when anything was (the input is never modified)."""
        out = dict(payload)
        kinds: list[str] = []

        def clean(value: object, limit: int | None = None) -> object:
            if not isinstance(value, str):
                return value
            cleaned, found = self.text(value)
            kinds.extend(found)
            # The schema's limit holds for the text as stored: a valid field never becomes invalid by its markers.
            return cleaned if not found or limit is None or len(value) > limit else _fit(cleaned, limit)

        if "voice" in out:
            out["voice"] = clean(out["voice"])
        for name in ("theme", "mood"):
            if name in out:
                out[name] = clean(out[name], LABEL_MAX)
        if isinstance(out.get("tags"), list | tuple):
            out["tags"] = _distinct_tags(out["tags"], [clean(tag, LABEL_MAX) for tag in out["tags"]])
        if isinstance(out.get("anchors"), list | tuple):
            out["anchors"] = [
                {
                    key: clean(value, ANCHOR_REF_MAX) if key == "ref" else clean(value) if key == "label" else value
                    for key, value in anchor.items()
                }
                if isinstance(anchor, Mapping)
                else anchor
                for anchor in out["anchors"]
            ]
        if isinstance(out.get("signals"), Mapping) and "focus" in out["signals"]:
            out["signals"] = {**out["signals"], "focus": clean(out["signals"]["focus"], LABEL_MAX)}
        if kinds and (isinstance(out.get("meta"), Mapping) or "meta" not in out):
            out["meta"] = {**out.get("meta", {}), "redacted": {"spans": len(kinds), "kinds": sorted(set(kinds))}}
        return out if kinds else dict(payload)


def _distinct_tags(given: list[Any] | tuple[Any, ...], cleaned: list[Any]) -> list[Any]:
    """*cleaned* (the tags *given*, redacted) with a tag left out where redaction made it equal to one before it.

    Two different secrets become the same marker; tags are a set, so the entry keeps one. Tags that were equal as given
    are all kept, for validation to refuse as it would without redaction.
    """
    kept: list[Any] = []
    first: dict[str, Any] = {}  # each redacted tag, and the tag as given that first became it
    for original, tag in zip(given, cleaned, strict=True):
        if isinstance(tag, str) and first.setdefault(tag, original) != original:
            continue
        kept.append(tag)
    return kept


def make_redactor(mode: object = "default", patterns: Mapping[str, str] | None = None) -> Redactor | None:
    """The redaction pass for *mode* (``"default"`` or ``"off"``) and the extra *patterns* (kind to regular expression); None when off.

    Extra patterns run with ``off`` too: a deployment may want its own and none of the defaults.

    Raises:
        ValueError: an unknown mode, a kind that is not a short lowercase name, or an expression that does not compile.
    """
    if mode not in REDACT_MODES:
        raise ValueError(f"redact must be one of {', '.join(map(repr, REDACT_MODES))}, got {mode!r}")
    extra: list[tuple[str, re.Pattern[str]]] = []
    for kind, expression in (patterns or {}).items():
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise ValueError(f"a redaction pattern's kind must be 1-40 lowercase letters, digits or '-', got {kind!r}")
        if not isinstance(expression, str) or not expression:
            raise ValueError(f"the redaction pattern of kind {kind!r} must be a non-empty regular expression, got {expression!r}")
        try:
            extra.append((kind, re.compile(expression)))
        except re.error as exc:
            raise ValueError(f"the redaction pattern of kind {kind!r} does not compile: {exc}; got {expression!r}") from None
    if mode == "off":
        return Redactor(tuple(extra), entropy=False) if extra else None
    defaults = tuple((kind, re.compile(expression, re.DOTALL)) for kind, expression in _DEFAULT)
    return Redactor(defaults + tuple(extra))
