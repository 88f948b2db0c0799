"""Self-contained HTML pages: the page frame, its one style and script, SVG charts, the journal report.
"""

__all__: list[str] = []
