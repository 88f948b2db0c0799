"""A real headless Chromium for the report tests, driven by Playwright, that records every request and console message.

Chromium comes from the distribution's package (``apt-get install chromium``),
not from Playwright's own download. Without it (or without Playwright) the
browser tests skip, except under CI, where they fail: CI must run them.

Each page is opened from a ``file://`` URL with every other request routed to
a recorder that aborts it, so a test can assert that the page asked for
nothing; an init script (run by the browser, not the page, so the page's
policy does not govern it) records Content-Security-Policy violations, which
an escaped page never causes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
_WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__violations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {reason}")
    pytest.skip(reason)


@dataclass
class Opened:
    """A page of a report, and what it did while it loaded and since."""

    page: Any
    url: str
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        """Every request but the page's own file."""
        return [url for url in self.requests if url.split("#")[0] != self.url]

    def violations(self) -> list[str]:
        return list(self.page.evaluate("window.__violations"))

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, policy violations and foreign requests: all should be empty."""
        return ([f"console {kind}: {message}" for kind, message in self.console if kind in {"error", "warning"}]
                + [f"exception: {error}" for error in self.errors] + [f"violation: {item}" for item in self.violations()]
                + [f"request: {url}" for url in self.foreign_requests()])


class Browser:
    """One Chromium with a fresh profile; :meth:`open` loads a report file in a new page."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def open(self, path: Path, fragment: str = "") -> Opened:
        page = self.context.new_page()
        url = path.resolve().as_uri()
        opened = Opened(page, url)
        page.on("console", lambda message: opened.console.append((message.type, message.text)))
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        page.on("request", lambda request: opened.requests.append(request.url))
        page.goto(url + fragment)
        page.wait_for_selector("body[data-ready='1']", state="attached")
        return opened


def launched(profile: Path) -> Iterator[Browser]:
    """A module's browser (use it from a module-scoped fixture): skipped without Chromium, failed without it under CI."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=ARGS, viewport={"width": 1280, "height": 900},
            service_workers="block",
        )
        try:
            context.add_init_script(_WATCH)
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
            yield Browser(context)
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
