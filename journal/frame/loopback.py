"""Whether a host or a URL's host is this machine: the one test behind every "loopback only" rule.

A local model mirror may be plain http, an MCP server on a loopback address needs no token, and a
systemd unit whose every backend is local may be kept off the network; each asks this module.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback_host", "is_loopback_url"]


def is_loopback_host(host: str) -> bool:
    """Whether *host* (a name or an address, IPv6 without brackets) is ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """Whether *url*'s host is this machine (see :func:`is_loopback_host`); a URL without a host is not."""
    return is_loopback_host(urlsplit(url).hostname or "")
