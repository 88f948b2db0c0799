"""A URL's address, checked before anything connects: the one test behind every configured or given URL.

A host and port that :func:`urllib.parse.urlsplit` cannot split (``[::1``), a port that is no
number or out of range, a host with an empty label (``a..b``, which ends in ``UnicodeError`` in the
resolver) or characters no resolver takes each raise ``ValueError`` at once, with what a URL must
be, instead of in whatever call first reads the URL.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["UrlAddress", "check_url_address", "url_authority"]

#: One label of a host name: letters, digits, '-' and '_' (container and service names use it), 1 to 63 of them.
_LABEL: Final = re.compile(r"[A-Za-z0-9_-]{1,63}")
_MAX_HOST: Final = 253
_MAX_PORT: Final = 65535
#: What every refusal says a URL's address must be.
HOST_EXPECTED: Final = (
    "a URL whose host is an ASCII name (dot-separated labels of letters, digits, '-' or '_'), an IPv4 address or an [IPv6] address"
)
PORT_EXPECTED: Final = "a URL whose port is a number from 1 to 65535"


@dataclass(frozen=True, slots=True)
class UrlAddress:
    """Where a URL points: its host (an IPv6 address without brackets) and its port, if it names one."""

    host: str
    port: int | None


def url_authority(url: str) -> str:
    """The ``host:port`` part of *url* as written (between ``//`` and the next ``/``, ``?`` or ``#``), or ``""``; never raises."""
    if "//" not in url:
        return ""
    rest = url.split("//", 1)[1]
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


def check_url_address(url: str) -> UrlAddress:
    """The host and port of *url*, which must have an authority without user:password@.

    Raises:
        ValueError: the address is not a host name, an IPv4 or a bracketed IPv6 address, optionally
            followed by ``:PORT`` with a port from 1 to 65535; its message says what was expected.
    """
    if any(ord(char) < 33 or ord(char) == 127 for char in url):
        raise ValueError("a URL with no spaces or control characters")
    authority = url_authority(url)
    if "@" in authority:
        raise ValueError("a URL without user:password@")
    if authority.startswith("["):
        host, bracket, after = authority[1:].partition("]")
        if not bracket or (after and not after.startswith(":")) or not _is_ipv6(host):
            raise ValueError(HOST_EXPECTED)
        port_text = after[1:] if after else None
    else:
        host, colon, port_text_or_empty = authority.partition(":")
        port_text = port_text_or_empty if colon else None
        if not host:
            raise ValueError("a URL with a host name")
        if not _is_host_name(host):
            raise ValueError(HOST_EXPECTED)
    port = None
    if port_text:  # "host:" names no port, like no colon at all (RFC 3986, 3.2.3)
        if not re.fullmatch(r"[0-9]{1,5}", port_text) or not 1 <= int(port_text) <= _MAX_PORT:
            raise ValueError(PORT_EXPECTED)
        port = int(port_text)
    return UrlAddress(host, port)


def _is_ipv6(text: str) -> bool:
    if not re.fullmatch(r"[0-9A-Fa-f:.]+", text):  # no %zone: no client here takes one
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _is_host_name(host: str) -> bool:
    name = host.removesuffix(".")  # a fully qualified name may end in a dot
    return len(name) <= _MAX_HOST and all(_LABEL.fullmatch(label) for label in name.split("."))
