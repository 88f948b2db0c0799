"""serve's hand-off of a worker's result: the last stdout line, or a clear reason why there is none."""

from __future__ import annotations

import pytest

from runner.errors import MalformedResultError
from runner.run.contract import Outcome, RunIdentity, RunResult
from runner.run.worker import read_result

RESULT = RunResult(RunIdentity(run_id="r-1", agent="motoko", routine="evening", slot="2026-09-05", client_key="motoko:evening:2026-09-05",
                               scheduled="2026-09-05T21:00:00+00:00"), outcome=Outcome.DUPLICATE, entry_id="e-1", duration_ms=1.0)


def test_the_last_line_is_the_result() -> None:
    """Whatever the worker printed before its result line (and trailing blank lines) does not matter."""
    out = f"a stray line\n{RESULT.to_json_line()}\n\n".encode()
    assert read_result(out) == RESULT


@pytest.mark.parametrize(("out", "message"), [
    (b"", "the worker printed nothing"),
    (b"\xff\xfe\n", "the output is not UTF-8"),
    (RESULT.to_json_line().encode() + b"\nnot a result\n", "not JSON"),
])
def test_output_without_a_result_line_is_refused(out: bytes, message: str) -> None:
    """No output, bytes that are not UTF-8, and a last line that is no result each raise MalformedResultError."""
    with pytest.raises(MalformedResultError, match=message):
        read_result(out)
