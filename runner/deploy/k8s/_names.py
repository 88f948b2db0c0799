"""Kubernetes object names made from agent, routine and shard names: DNS-1123 labels, never two alike.

An agent's name may hold uppercase letters, ``.``, ``@`` and ``_`` (and
anything at all through the Python API), none of which a Kubernetes name
takes. A name is therefore a readable part, the words lowercased and every
other character run made one ``-``, followed by a hash of the exact words
(``evening-batou-2-3f1c9a0b2e``): ``Motoko`` and ``motoko``, ``a.b`` and
``a-b`` read alike but hash apart. The hash decides, not the readable part,
which is cut to fit; :func:`unique_names` still refuses the (2**-40) chance
of two alike, so no object can ever overwrite another's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

from runner.errors import UnitRenderError

__all__ = ["CRONJOB_NAME_MAX", "DNS_LABEL", "LABEL_MAX", "dns_name", "unique_names"]

#: A DNS-1123 label: what Kubernetes takes as a namespace, a label value here, and (at most 63 characters) a name.
DNS_LABEL: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
LABEL_MAX: Final = 63
#: A CronJob's name is at most 52 characters: its controller appends 11 ("-" and the scheduled minute) for each Job.
CRONJOB_NAME_MAX: Final = 52
_HASH_CHARS: Final = 10
_OTHER: Final = re.compile(r"[^a-z0-9]+")


def _readable(word: str) -> str:
    return _OTHER.sub("-", word.lower()).strip("-")


def dns_name(prefix: str, *words: str, limit: int = LABEL_MAX) -> str:
    """``PREFIX-WORDS-HASH``: a DNS-1123 label of at most *limit* characters, the hash taken over *prefix* and the exact *words*."""
    digest = hashlib.sha256("\0".join([prefix, *words]).encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    room = limit - len(prefix) - len(digest) - 2
    readable = "-".join(part for part in map(_readable, words) if part)[:room].strip("-")
    return "-".join(part for part in (prefix, readable, digest) if part)


def unique_names(named: Iterable[tuple[str, str]]) -> None:
    """Refuse two different things (*what*, name) given one name.

    Raises:
        UnitRenderError: two of them share a name (a hash collision of :func:`dns_name`).
    """
    seen: dict[str, str] = {}
    for what, name in named:
        if name in seen and seen[name] != what:
            raise UnitRenderError("--out", f"{seen[name]} and {what} would both be named {name!r}; rename one of them")
        seen[name] = what
