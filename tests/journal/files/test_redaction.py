"""Redaction at append: every seeded secret is caught, and no word of real journals and conversations is touched."""

from __future__ import annotations

import base64
import io
import json
import random
import string
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.cli.cli import cli as journal_cli
from journal.files import make_redactor
from journal.files.entry import validate_payload
from tests.journal._equivalence import REPO, dev_split

_BASE62 = string.ascii_letters + string.digits
_URLSAFE = _BASE62 + "_-"


def _token(rng: random.Random, length: int, alphabet: str = _BASE62) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _pem(rng: random.Random, label: str) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode("ascii")
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"


def _seeded(count: int = 40, seed: int = 38) -> Iterator[tuple[str, str, str]]:
    """``(kind, secret, sentence holding it)``: real-looking secrets of every kind the default pass names, made from *seed*."""
    rng = random.Random(seed)
    for n in range(count):
        jwt = ".".join(
            (
                _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
                _b64url(json.dumps({"sub": str(rng.randrange(10**9)), "iat": 1700000000 + n}).encode()),
                _b64url(rng.randbytes(32)),
            )
        )
        secrets = [
            ("api-key", "sk-" + _token(rng, 48)),
            ("api-key", "sk-proj-" + _token(rng, 56, _URLSAFE)),
            ("api-key", "sk-ant-api03-" + _token(rng, 93, _URLSAFE)),
            ("api-key", "sk_live_" + _token(rng, 24)),
            ("api-key", "AIza" + _token(rng, 35, _URLSAFE)),
            ("github-token", "ghp_" + _token(rng, 36)),
            ("github-token", "github_pat_" + _token(rng, 22) + "_" + _token(rng, 59)),
            ("slack-token", f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{_token(rng, 24)}"),
            ("aws-access-key", "AKIA" + _token(rng, 16, string.ascii_uppercase + string.digits)),
            ("jwt", jwt),
            ("private-key", _pem(rng, rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"]))),
            ("url-password", _token(rng, rng.randrange(8, 20), _BASE62 + "!$%^&*()")),
            ("high-entropy", base64.b64encode(rng.randbytes(30)).decode("ascii")),
            ("high-entropy", _token(rng, 40)),
        ]
        templates = [
            "Deployed the service; the key is {s} and it works now.",
            "Note to self: {s}",
            "export TOKEN={s}",
            'config: {{"token": "{s}"}} was pasted in the chat.',
        ]
        for kind, secret in secrets:
            if kind == "url-password":
                yield kind, secret, f"Connected with postgres://app_user:{secret}@db.internal:5432/main after the restart."
            else:
                yield kind, secret, rng.choice(templates).format(s=secret)


def test_every_seeded_secret_is_caught() -> None:
    redactor = make_redactor()
    assert redactor is not None
    missed = []
    for kind, secret, sentence in _seeded():
        redacted, kinds = redactor.text(sentence)
        if secret in redacted or kind not in kinds or f"[redacted:{kind}]" not in redacted:
            missed.append((kind, secret, redacted))
    assert missed == []


def _journal_set_texts() -> Iterator[str]:
    journal_set = json.loads((REPO / "bench" / "journal_set.json").read_text(encoding="utf-8"))
    freshness_set = json.loads((REPO / "bench" / "freshness_set.json").read_text(encoding="utf-8"))
    entries = [*journal_set["entries"], *(entry for scenario in freshness_set["scenarios"] for entry in scenario["entries"])]
    for entry in entries:
        yield from (entry[field] for field in ("voice", "theme", "mood") if isinstance(entry.get(field), str))
        yield from entry.get("tags", [])
    yield from (query["query"] for query in journal_set["queries"])


def _runner_journal_texts(tmp_path: Path) -> Iterator[str]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from journal_sets import simulate_background
    finally:
        sys.path.remove(str(REPO / "bench"))
    root = tmp_path / "runner-journal"
    simulate_background(root, 120)
    with Journal(root) as journal:
        for entry in journal.list(limit=None):
            yield from (entry.voice, entry.theme, *entry.tags, *(anchor["ref"] for anchor in entry.anchors or ()))


def _locomo_texts(split: Path) -> Iterator[str]:
    source = split / "locomo-dev.json" if split.is_dir() else split
    for conversation in json.loads(source.read_text(encoding="utf-8")):
        for value in conversation["conversation"].values():
            if isinstance(value, list):
                for turn in value:
                    yield turn["text"]
                    if "blip_caption" in turn:
                        yield turn["blip_caption"]
        yield from (question["question"] for question in conversation["qa"])


def _false_redactions(texts: Iterator[str]) -> list[tuple[str, list[str]]]:
    redactor = make_redactor()
    assert redactor is not None
    return [(text, kinds) for text in texts if (kinds := redactor.text(text)[1])]


def test_no_word_of_the_bench_journal_sets_is_redacted(tmp_path: Path) -> None:
    texts = [*_journal_set_texts(), *_runner_journal_texts(tmp_path)]
    assert len(texts) > 500
    assert _false_redactions(iter(texts)) == []


def test_no_word_of_the_locomo_dev_split_is_redacted() -> None:
    split = dev_split()
    if split is None:
        pytest.skip("the LoCoMo dev split is not here (set GHOSTJOURNAL_LOCOMO_DEV to its directory)")
    texts = list(_locomo_texts(split))
    assert len(texts) > 1000
    assert _false_redactions(iter(texts)) == []


def test_what_is_not_caught_stays_as_written() -> None:
    redactor = make_redactor()
    assert redactor is not None
    kept = [
        "Merged da39a3ee5e6b4b0d3255bfef95601890afd80709 into main.",
        "Entry 550e8400-e29b-41d4-a716-446655440000 continues the thread.",
        "ThisIsAVeryLongCamelCaseIdentifier came up in the review.",
        "see https://example.com/docs/python-api.md#semantic-search",
        "data:image/png;base64," + base64.b64encode(random.Random(1).randbytes(600)).decode("ascii"),
    ]
    assert [redactor.text(text)[0] for text in kept] == kept


def test_an_append_stores_the_redacted_text_and_records_how_many_spans(tmp_path: Path) -> None:
    secret = "ghp_" + "Ab1" * 12
    with Journal(tmp_path / "journal") as journal:
        entry = journal.append(
            {
                "kind": "note",
                "agent": "a",
                "theme": "ops",
                "voice": f"token {secret} and sk-{'Zy9' * 10}",
                "anchors": [{"type": "url", "ref": "https://u:hunter22@example.com/x"}],
            }
        )
        assert entry.voice == "token [redacted:github-token] and [redacted:api-key]"
        assert entry.anchors is not None and entry.anchors[0]["ref"] == "https://u:[redacted:url-password]@example.com/x"
        assert entry.meta["redacted"] == {"spans": 3, "kinds": ["api-key", "github-token", "url-password"]}
        assert journal.search(secret) == []
    assert not any(secret.encode() in path.read_bytes() for path in (tmp_path / "journal").rglob("*") if path.is_file())


def test_redaction_is_configurable_off_and_with_extra_patterns(tmp_path: Path) -> None:
    payload: dict[str, Any] = {"kind": "note", "agent": "a", "theme": "t", "voice": "ticket TCK-99812 and ghp_" + "Ab1" * 12}
    with Journal(tmp_path / "off", redact="off") as journal:
        assert journal.append(payload).voice == payload["voice"]
    with Journal(tmp_path / "extra", redact_patterns={"ticket": r"TCK-\d+"}) as journal:
        stored = journal.append(payload)
        assert stored.voice == "ticket [redacted:ticket] and [redacted:github-token]"
    with Journal(tmp_path / "only", redact="off", redact_patterns={"ticket": r"TCK-\d+"}) as journal:
        assert journal.append(payload).voice.startswith("ticket [redacted:ticket] and ghp_")
    with pytest.raises(ValueError, match="redact must be one of 'default', 'off', got 'on'"):
        Journal(tmp_path / "bad", redact="on")
    with pytest.raises(ValueError, match="does not compile"):
        Journal(tmp_path / "bad", redact_patterns={"ticket": "("})
    assert not (tmp_path / "bad").exists()


def test_an_import_stores_entries_as_exported_and_a_rerun_finds_them_duplicates(tmp_path: Path) -> None:
    """Redaction is the append's: an entry another journal stored with its secret is imported byte for byte (redacting it would give
    an entry of the same id with other bytes, a conflict on every rerun), and appends with redaction on still redact; and a group
    append of payloads (append_many) redacts as append does."""
    secret = "ghp_Zq8Lw2Rt6Yp1Xc4Vb7Nm0Ks3Df5Gh9Jj2Aa"  # noqa: S105 - a made-up token, planted to be redacted
    source = Journal(tmp_path / "source", redact="off")
    kept = source.append({"kind": "note", "agent": "motoko", "theme": "deploy", "voice": f"token {secret}"})
    stream = io.BytesIO()
    source.export(stream)
    target = Journal(tmp_path / "target")
    for attempt in range(2):
        summary = target.import_stream(io.BytesIO(stream.getvalue()))
        assert (summary.appended, summary.duplicate, summary.conflict) == ((1, 0, 0) if attempt == 0 else (0, 1, 0))
    assert target.get(kept.id).to_json_bytes() == kept.to_json_bytes()
    [grouped] = target.append_many([{"kind": "note", "agent": "motoko", "theme": "deploy", "voice": f"again {secret}"}])
    assert not isinstance(grouped, Exception)
    assert secret not in grouped.entry.voice and grouped.entry.meta["redacted"]["spans"] == 1


# Short secrets of each kind whose marker is longer than the secret itself, and words around them.
_SHORT_SECRETS = st.one_of(
    st.builds(lambda kind, body: f"xox{kind}-{body}", st.sampled_from("abprs"), st.text(_BASE62, min_size=10, max_size=12)),
    st.builds(lambda body: f"AKIA{body}", st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16)),
    st.builds(lambda password: f"https://u:{password}@h", st.text(_BASE62, min_size=1, max_size=6)),
    st.builds(lambda number: f"TCK-{number}", st.integers(0, 99)),
)
_LABEL = st.lists(st.one_of(_SHORT_SECRETS, st.sampled_from(["harbor", "rain", "[redacted:ticket]", "x"])), min_size=1, max_size=30).map(
    " ".join
)
_LONG_KIND = "a-kind-of-secret-this-deployment-knows-1"  # the longest kind a pattern may have: 40 characters


@settings(max_examples=150)
@given(
    theme=_LABEL,
    mood=_LABEL,
    focus=_LABEL,
    tags=st.lists(_LABEL, max_size=6, unique=True),
    ref=st.lists(_SHORT_SECRETS, min_size=1, max_size=300).map(" ".join),
)
def test_an_entry_valid_as_given_stays_valid_once_redacted_and_holds_no_secret(
    theme: str, mood: str, focus: str, tags: list[str], ref: str
) -> None:
    """Markers are longer than short secrets (``[redacted:slack-token]`` for ``xoxb-`` and ten characters), and different
    secrets become the same marker: a label its markers make too long is cut to its limit, tags that became the same are kept
    once, so a valid entry is stored rather than refused over text its author never wrote."""
    payload: dict[str, Any] = {
        "kind": "note",
        "agent": "a",
        "voice": "v",
        "theme": theme,
        "mood": mood,
        "tags": tags,
        "signals": {"focus": focus},
        "anchors": [{"type": "url", "ref": ref}],
    }
    try:
        validate_payload(payload)
    except ValueError:
        return  # over a limit as given: refused as it would be without redaction
    redactor = make_redactor("default", {_LONG_KIND: r"TCK-\d+"})
    assert redactor is not None
    stored = validate_payload(redactor.payload(payload))
    text = json.dumps(stored)
    for secret in _secrets_in(payload):
        assert secret not in text
    assert len(stored["tags"]) == len(set(stored["tags"]))
    for label in (stored["theme"], stored["mood"], stored["signals"]["focus"], *stored["tags"]):
        assert len(label) <= 200
        assert "[redacted:" not in label.rsplit("]", 1)[-1]  # a cut never leaves part of a marker
    assert len(stored["anchors"][0]["ref"]) <= 2048


def _secrets_in(payload: dict[str, Any]) -> set[str]:
    """The short secrets planted in *payload*'s labels and ref (the words of the kinds :data:`_SHORT_SECRETS` makes)."""
    words = " ".join([payload["theme"], payload["mood"], payload["signals"]["focus"], *payload["tags"], payload["anchors"][0]["ref"]])
    found = set()
    for word in words.split():
        if word.startswith(("xox", "AKIA", "TCK-")):
            found.add(word)
        elif word.startswith("https://u:"):
            found.add(word.removeprefix("https://u:").removesuffix("@h") + "@h")
    return found


def test_the_command_line_stores_two_secret_tags_and_a_long_redacted_theme(tmp_path: Path) -> None:
    """``ghostjournal append`` of a valid entry whose redacted theme would be over 200 characters and whose two tags would become
    one marker: stored, exit 0."""
    theme = " ".join(["xoxb-1234567890"] * 12)  # 191 characters as given, 275 with its markers
    payload = {"kind": "note", "agent": "a", "theme": theme, "voice": "v", "tags": ["xoxb-1111111111", "xoxb-2222222222"]}
    journal = tmp_path / "journal"
    Journal(journal).close()
    done = CliRunner().invoke(journal_cli, ["--root", str(journal), "append", "--json"], input=json.dumps(payload))
    assert done.exit_code == 0, done.output
    entry = json.loads(done.output)["entry"]
    assert entry["tags"] == ["[redacted:slack-token]"]
    assert len(entry["theme"]) <= 200 and entry["theme"].endswith("[redacted:slack-token]\u2026")
    assert not any(b"xoxb" in path.read_bytes() for path in (journal / "entries").rglob("*.json"))
