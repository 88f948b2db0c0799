"""Make or check ``tests/data/minilm-reference/``: what the reference encoder says, for machines without torch.

The reference is the pinned all-MiniLM-L6-v2 run by sentence-transformers (the
``st`` extra, after torch's CPU build). The test suite holds the encoders this
project runs (ONNX Runtime, NumPy) to it without installing torch, through
what this script keeps:

- ``vectors.npy``: the reference's vectors of the equivalence texts
  (``tests/journal/_equivalence.py``), as float16: each component within
  float16 rounding (a few 1e-4 at most) of the float32 vector, far inside the tests' tolerances;
- ``dev-top10.npy``: each LoCoMo dev-split question's top 10 turns of its own
  conversation, by the reference's cosines;
- ``meta.json``: digests of the texts and of the dev split the figures were
  made from, the model's identity and the library versions that made them.

Run from the checkout, where sentence-transformers is installed::

    python tests/data/minilm_reference.py           # check the kept figures against a fresh run; exit 1 if they differ
    python tests/data/minilm_reference.py --write   # make them anew (after the texts, the model or the split changed)

The dev split is found as the tests find it ($GHOSTJOURNAL_LOCOMO_DEV, else
``shared/data/locomo-dev`` beside the checkout).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
from tests.journal._equivalence import REFERENCE_DIR, dev_split, dev_split_rankings, digest_of, equivalence_texts

#: How far a kept vector may be from a fresh one (float16 rounding) before the check fails.
_TOLERANCE = 5e-4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="make the figures anew instead of checking them")
    args = parser.parse_args()
    split = dev_split()
    if split is None:
        print("the LoCoMo dev split is required: set GHOSTJOURNAL_LOCOMO_DEV", file=sys.stderr)
        return 2
    import sentence_transformers

    encoder = SentenceTransformerEncoder()
    texts = equivalence_texts()
    vectors = encoder.encode(texts)
    rankings, split_digest = dev_split_rankings(encoder.encode, split)
    meta = {
        "model": encoder.identity,
        "texts": len(texts),
        "texts_sha256": digest_of(texts),
        "dev_split_sha256": split_digest,
        "questions": int(rankings.shape[0]),
        "made_with": {"sentence_transformers": sentence_transformers.__version__, "numpy": np.__version__},
    }
    if args.write:
        REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
        np.save(REFERENCE_DIR / "vectors.npy", vectors.astype(np.float16))
        np.save(REFERENCE_DIR / "dev-top10.npy", rankings)
        (REFERENCE_DIR / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {REFERENCE_DIR}: {len(texts)} vectors, {rankings.shape[0]} rankings")
        return 0
    kept = json.loads((REFERENCE_DIR / "meta.json").read_text(encoding="utf-8"))
    problems = [f"{key}: kept {kept.get(key)!r}, now {meta[key]!r}" for key in ("model", "texts_sha256", "dev_split_sha256") if kept.get(key) != meta[key]]
    drift = float(np.abs(np.load(REFERENCE_DIR / "vectors.npy").astype(np.float32) - vectors).max())
    if drift > _TOLERANCE:
        problems.append(f"vectors: a component differs by {drift:.2e} (more than {_TOLERANCE:g})")
    if not np.array_equal(np.load(REFERENCE_DIR / "dev-top10.npy"), rankings):
        problems.append("dev-split top 10s differ")
    for problem in problems:
        print(problem, file=sys.stderr)
    print("the kept reference figures hold" if not problems else "the kept reference figures are stale: rerun with --write")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
