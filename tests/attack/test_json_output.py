"""JSON on stdout stays UTF-8 JSON whatever a file name holds: an undecodable byte is escaped, and reads back to that byte.

Linux file names are bytes; Python hands a byte that is no UTF-8 over as a lone surrogate. Written raw,
that byte made ``--json`` output no UTF-8 at all, and any JSON reader refused the whole report.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from journal.frame.clikit import json_text
from tests._support import SIMPLE_AGENT, write_config

#: A name no UTF-8 decoder takes: what another program, or another locale, may leave in a directory.
BAD_NAME = b"bad\xff\xfe.json"

_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)  # any code point, lone surrogates included
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | _TEXT, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=12)


@given(_VALUES, st.sampled_from([None, 2]))
def test_any_value_prints_as_utf8_json_that_reads_back_equal(value: Any, indent: int | None) -> None:
    """Lone surrogates included, the text encodes as UTF-8 and a JSON reader gives back the very value."""
    text = json_text(value, indent=indent)
    assert json.loads(text.encode("utf-8")) == value


def _json_stdout(argv: list[str], cwd: Path) -> dict[str, Any]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout.decode("utf-8"))  # strict UTF-8: a raw byte fails here
    return parsed


def test_verify_json_names_a_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """The stray file is reported in JSON that parses, and its path turns back into the file's own bytes."""
    root = tmp_path / "journal"
    subprocess.run(["ghostjournal", "--root", str(root), "init"], check=True, capture_output=True)
    day = root / "entries" / "2026" / "01" / "01"
    day.mkdir(parents=True)
    (day / os.fsdecode(BAD_NAME)).write_bytes(b"not an entry")
    report = _json_stdout(["ghostjournal", "--root", str(root), "verify", "--json"], tmp_path)
    [problem] = report["problems"]
    assert os.fsencode(problem["path"]) == b"entries/2026/01/01/" + BAD_NAME


def test_import_dir_json_lists_a_bad_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """A peer directory's stray entry file with an undecodable name is listed under bad_files in JSON that parses."""
    peer = tmp_path / "peer"
    (peer / "entries" / "2026" / "03" / "03").mkdir(parents=True)
    (peer / "manifest.json").write_text(json.dumps({"format": "ghostjournal", "journal_id": "x", "manifest_version": 1,
                                                    "entry_schema_version": 1, "created_at": "2026-03-03T00:00:00Z", "append_only": True}))
    (peer / "entries" / "2026" / "03" / "03" / os.fsdecode(BAD_NAME)).write_bytes(b"{}")
    summary = _json_stdout(["ghostjournal", "--root", str(tmp_path / "journal"), "import", str(peer), "--partial", "--json"], tmp_path)
    [bad] = summary["bad_files"]
    assert os.fsencode(bad["file"]) == b"entries/2026/03/03/" + BAD_NAME


def test_runner_json_names_a_backup_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """``ghostrunner backup --into`` a folder with an undecodable name reports it in JSON that parses, byte for byte."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    parent = Path(os.fsdecode(os.fsencode(tmp_path) + b"/backups-\xff"))
    report = _json_stdout(["ghostrunner", "backup", "--config", str(config), "--into", str(parent), "--json"], tmp_path)
    assert os.fsencode(report["out"]).startswith(os.fsencode(parent) + b"/ghostrunner-backup-")
