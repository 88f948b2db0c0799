"""Make ``tests/data/peer-0.1.1``: a journal directory written by the real ghostjournal 0.1.1 from PyPI.

That package is another project that happens to share this one's distribution
name, so it is never installed into this project's environment. Its import
name (``ghostjournal``) does not clash with ours (``journal``), so a child
Python with a separate install directory first on ``sys.path`` runs it::

    pip install --target /tmp/peer-0.1.1 ghostjournal==0.1.1   # brings its filelock<4 along
    python tests/data/make_peer_sample.py /tmp/peer-0.1.1

The script refuses any other version of the package. Every entry is appended
through the peer's own ``Journal.append`` with a fixed id and ts, so its
entry files come out the same on every run; only ``manifest.json``'s
``journal_id`` and ``created_at`` (a random uuid and the clock) are then set
to fixed values, in the peer's own way of writing JSON, so that rerunning the
script changes nothing in git. The peer's ``index/`` SQLite file is left out:
its bytes depend on the SQLite build, and an import never reads it.

The entries cover what the import's mapping must handle: ``mood`` and
``client_key`` stored as null, a client key, anchors with and without a
label (one null), signals with continuity refs, an ``embedding``, a null
``meta.source_routine``, a ts with a negative offset late in the evening (its
day directory is the local date), a ts with a space for the ``T`` (the peer
accepts it, our schema does not), an agent name with a space (our schema
refuses it; ``--agent-map`` renames it) and a theme with a line break (our
schema refuses it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "peer-0.1.1"
VERSION = "0.1.1"
JOURNAL_ID = "6f1d2a8e-0c4b-4f3e-9a57-2b8e6c1d0f11"
CREATED_AT = "2026-03-01T00:00:00+00:00"

_BASE = {"voice": "The harbour lights came on one by one.", "tags": []}
ENTRIES: list[dict[str, object]] = [
    {"id": "peer-001", "ts": "2026-03-01T08:00:00+00:00", "kind": "pulse", "agent": "motoko", "theme": "harbour lights",
     "mood": None, "client_key": None, "tags": ["harbour", "evening light"]},
    {"id": "peer-002", "ts": "2026-03-01T09:30:00.250000+00:00", "kind": "note", "agent": "motoko", "theme": "tide tables",
     "mood": "calm", "client_key": "motoko:2026-03-01:2", "voice": "Read the tide tables twice; the numbers held."},
    {"id": "peer-003", "ts": "2026-03-01T22:30:00-05:00", "kind": "evening", "agent": "motoko", "theme": "a day of small repairs",
     "anchors": [{"type": "file", "ref": "notes/repairs.md", "label": "repairs"}, {"type": "url", "ref": "https://example.org/tides", "label": None},
                 {"type": "commit", "ref": "4f3e9a5"}],
     "signals": {"focus": "process", "novelty": 0.4, "continuity_refs": ["peer-001", "peer-002"]},
     "voice": "Small repairs all day: a hinge, a cable, the tide script."},
    {"id": "peer-004", "ts": "2026-03-02T07:00:00Z", "kind": "digest", "agent": "motoko", "theme": "week of tides",
     "embedding": [0.125, -0.5, 0.75, 0.0], "meta": {"schema_version": 1, "source_routine": "weekly-digest", "window": "2026-W09"},
     "voice": "A week of tides, summed up."},
    {"id": "peer-005", "ts": "2026-03-02T12:00:00+02:00", "kind": "note", "agent": "ops@example.org", "theme": "quiet noon",
     "meta": {"schema_version": 1, "source_routine": None}, "signals": {"focus": None, "novelty": 0},
     "client_key": "ops:noon", "voice": "Nothing moved at noon."},
    {"id": "peer-006", "ts": "2026-03-03 08:15:00+00:00", "kind": "pulse", "agent": "motoko", "theme": "fog",
     "voice": "Fog on the water; the foghorn every minute."},
    {"id": "peer-007", "ts": "2026-03-03T18:45:00+00:00", "kind": "note", "agent": "Ada Lovelace", "theme": "engines",
     "tags": ["analytical engine"], "client_key": "ada:1", "voice": "The engine weaves algebraic patterns."},
    {"id": "peer-008", "ts": "2026-03-04T06:00:00+00:00", "kind": "pulse", "agent": "motoko", "theme": "first line\nsecond line",
     "voice": "A theme with a line break in it."},
    {"id": "0b6f4e2c-9d1a-4c3b-8e7f-5a6b7c8d9e0f", "ts": "2026-03-04T09:00:00+00:00", "kind": "note", "agent": "motoko",
     "theme": "a uuid id", "mood": "curious", "voice": "An id the peer would have made itself."},
    {"id": "peer-010", "ts": "2026-03-05T10:00:00+00:00", "kind": "evening", "agent": "motoko", "theme": "storm warning",
     "mood": "uneasy", "tags": ["storm", "harbour"], "signals": {"continuity_refs": ["peer-003"]},
     "voice": "A storm warning for the night; the boats doubled their lines."},
    {"id": "peer-011", "ts": "2026-03-05T23:59:59.999999+00:00", "kind": "note", "agent": "motoko", "theme": "last minute",
     "client_key": "motoko:2026-03-05:late", "voice": "Written in the last second of the day."},
    {"id": "peer-012", "ts": "2026-03-06T05:00:00+01:00", "kind": "pulse", "agent": "ops@example.org", "theme": "dawn",
     "tags": ["dawn"], "voice": "Dawn, and the storm passed north."},
]

_CHILD = """
import importlib.metadata, json, sys
version = importlib.metadata.version("ghostjournal")
if version != sys.argv[2]:
    sys.exit(f"ghostjournal {version} is on the path, not {sys.argv[2]}")
from ghostjournal import Journal
journal = Journal(sys.argv[1])
for entry in json.load(sys.stdin):
    journal.append(entry)
"""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[1]).resolve()
    if OUT.exists():
        shutil.rmtree(OUT)
    payloads = json.dumps([{**_BASE, **entry} for entry in ENTRIES])
    # -I: only the install directory and the standard library, never this project's environment.
    code = f"import sys; sys.path.insert(0, {str(target)!r}); exec({_CHILD!r})"
    subprocess.run([sys.executable, "-I", "-c", code, str(OUT), VERSION], input=payloads, text=True, check=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest.update(journal_id=JOURNAL_ID, created_at=CREATED_AT)
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(OUT / "index")
    (OUT / "models").rmdir()  # empty: git would not keep it
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
