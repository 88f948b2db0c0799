"""One self-contained HTML page: escaped text, embedded JSON data and a strict Content-Security-Policy.

Both reports (``ghostjournal report``, ``ghostrunner report``) are built
here. Entry text and log fields are data a language model or a log line
wrote, so:

- every text goes through :func:`text` (HTML-escaped, lone surrogates and
  control characters replaced), never into an attribute unquoted;
- the records the page's script reads are JSON inside a
  ``<script type="application/json">`` element (:func:`embed_json`), with
  ``<``, ``>``, ``&``, U+2028, U+2029 and lone surrogates written as
  ``\\uXXXX``, so no text can close the element, open a comment or end a
  line of script;
- the page carries a Content-Security-Policy meta tag that allows nothing
  (``default-src 'none'``) but its own one style and one script, by hash: an
  injected element could neither run, load nor send anything.

Nothing is fetched: no font, no image, no script or style from outside the file.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from typing import Any, BinaryIO, Final

from journal.frame._page_assets import SCRIPT, STYLE

__all__ = ["content_security_policy", "embed_json", "first_line", "page", "page_title", "text"]

# C0 and C1 controls but tab and newline, and lone surrogates (no UTF-8 file can hold them).
_UNSHOWABLE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# What could end a script element, open an HTML comment, or end a line of a script in older parsers.
_JSON_UNSAFE: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def text(value: object) -> str:
    """*value* as HTML text, safe inside an element or a double-quoted attribute."""
    return html.escape(_UNSHOWABLE.sub("\ufffd", str(value)), quote=True)


def first_line(voice: str, limit: int = 200) -> str:
    """The first non-empty line of *voice*, cut to *limit* characters (an ellipsis when cut); plain text, not yet escaped."""
    line = next((part.strip() for part in voice.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "\u2026"


def embed_json(value: Any) -> str:
    """*value* as JSON that can sit inside a ``<script type="application/json">`` element whatever its strings hold."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", encoded)


def _digest(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy() -> str:
    """The page's policy: nothing from anywhere, except its own style and script, allowed by their hashes."""
    return (
        f"default-src 'none'; script-src {_digest(SCRIPT)}; style-src {_digest(STYLE)}; img-src 'none'; font-src 'none'; "
        "connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; worker-src 'none'; manifest-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )


#: How every page :func:`page` writes begins, whatever its policy's hashes: what :func:`page_title` knows one by.
_OPENING: Final = (
    b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    b'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
)
_TITLE: Final = re.compile(rb"\n<title>([^<\n]*)</title>\n")
#: Where the title of such a page ends at the latest: after the policy and two short tags (an agent's name is short).
_HEAD_BYTES: Final = 16 * 1024


def page_title(stream: BinaryIO) -> str | None:
    """The title of the page in *stream* (as written: HTML-escaped) if it is one :func:`page` wrote, else None.

    Reads at most the first 16 KiB: a report's file tells what wrote it (and which report it is) by its
    opening and its title, which is how ``--out`` knows an earlier report it may replace.
    """
    head = stream.read(_HEAD_BYTES)
    found = _TITLE.search(head) if head.startswith(_OPENING) else None
    return None if found is None else found[1].decode("utf-8", "replace")


def page(title: str, body: str, records: dict[str, Any]) -> bytes:
    """The whole page as UTF-8: *body* (HTML already escaped) and *records* (what the script shows and searches).

    *records* maps an element id to ``{"title": ..., "fields": [[label, value, form?], ...]}`` where form
    is absent (text), ``"long"`` (kept as written, line breaks and all) or ``"links"`` (a list of
    ``[id, label]`` of other records on the page).
    """
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">\n'
        '<meta name="referrer" content="no-referrer">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n"
        '<aside id="detail" hidden><a class="close" href="#">close</a><h2 id="detail-title"></h2><dl id="detail-fields"></dl></aside>\n'
        f'<script type="application/json" id="report-data">{embed_json(records)}</script>\n'
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )
    return document.encode("utf-8")
