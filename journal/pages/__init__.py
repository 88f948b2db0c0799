"""The journal report: one self-contained HTML page of a journal's days, with its SVG charts."""

__all__: list[str] = []
