"""What the openai backend asks of a server's reply, and what a server's refusal or Retry-After means.

A server is asked for the most constrained reply format it accepts
(:data:`REPLY_FORMATS`, best first): a reply constrained to the JSON schema of
the entry fields, else any JSON object, else the prompt alone.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any, Final

from runner.backends.base import REPLY_SCHEMA

__all__ = ["REPLY_FORMATS", "is_format_refusal", "parse_retry_after", "response_format"]

#: The reply formats asked for, most constrained first; None: the prompt alone asks for JSON.
REPLY_FORMATS: Final = ("json_schema", "json_object", None)
#: Words in a 400/422 answer that say the server refused the reply format (not the request as a whole).
_FORMAT_REFUSAL_WORDS: Final = ("response_format", "json_schema", "json_object", "schema", "structured")
#: The longest Retry-After honoured; a longer one is no use within one run.
_MAX_RETRY_AFTER: Final = 3600.0


def response_format(kind: str | None) -> dict[str, Any] | None:
    """The ``response_format`` of a request asking for reply format *kind* (one of REPLY_FORMATS)."""
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "journal_entry", "schema": REPLY_SCHEMA, "strict": False}}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """The seconds a ``Retry-After`` header value asks to wait (delay-seconds or an HTTP date), capped at an hour; None if unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), _MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return min(max(wait, 0.0), _MAX_RETRY_AFTER)


def is_format_refusal(status: int, body: bytes) -> bool:
    """Whether an answer *status*/*body* refuses the reply format asked for (so another format may be accepted)."""
    if status not in (400, 422):
        return False
    text = body.decode("utf-8", "replace").lower()
    return any(word in text for word in _FORMAT_REFUSAL_WORDS)
