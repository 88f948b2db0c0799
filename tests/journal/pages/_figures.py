"""What a journal report's header says, beside what its panels show: the figures the report tests compare."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["header_and_panels"]


def header_and_panels(page: Any) -> tuple[dict[str, int], dict[str, int]]:
    """The counts the header states, and the same counts as the panels and the timeline show them, by name.

    Names: entries, each kind, continuity links, corrections. The panels' side counts the timeline's entries, each kind in the
    bars by day, the digests as columns of the focus panel, and the links as lines drawn or as the bars counting them.
    """
    summary = page.text_content("p.summary")
    parts = summary.split(" \u00b7 ")
    header = {"entries": int(parts[0].split(" ", 1)[0])}
    header |= {kind: int(count) for kind, count in (item.rsplit(" ", 1) for item in parts[1].split(", "))}
    for part in parts[2:]:
        if match := re.fullmatch(r"(\d+) continuity links?, longest chain \d+", part):
            header["continuity links"] = int(match.group(1))
        elif match := re.fullmatch(r"(\d+) corrections?", part):
            header["corrections"] = int(match.group(1))
    header.setdefault("continuity links", 0)
    header.setdefault("corrections", 0)
    shown: dict[str, int] = {"entries": page.eval_on_selector_all("li.entry", "items => items.length")}
    for title in page.eval_on_selector_all("#chart-kinds svg g.col > title", "titles => titles.map(title => title.textContent)"):
        for kind, count in re.findall(r"(\w+) (\d+)", title.partition("(")[2]):
            shown[kind] = shown.get(kind, 0) + int(count)
    if "digest" in shown:
        shown["digest"] = page.eval_on_selector_all("#chart-focus svg g.col", "cols => cols.length")
    if page.query_selector("#chart-links svg line") is not None or page.query_selector("#chart-links svg g.col") is None:
        shown["continuity links"] = page.eval_on_selector_all("#chart-links line.continues", "lines => lines.length")
        shown["corrections"] = page.eval_on_selector_all("#chart-links line.corrects", "lines => lines.length")
    else:  # a long window: the links counted per week or month
        shown["continuity links"] = shown["corrections"] = 0
        for title in page.eval_on_selector_all("#chart-links svg g.col > title", "titles => titles.map(title => title.textContent)"):
            for kind, count in re.findall(r"(continues|corrects) (\d+)", title):
                shown["continuity links" if kind == "continues" else "corrections"] += int(count)
    return header, shown
