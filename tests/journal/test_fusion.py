"""Fusion of the lexical and semantic rankings, on plain id lists."""

from __future__ import annotations

import pytest

from journal.fusion import FUSION, FusionParams, fuse


def test_an_entry_both_arms_found_beats_entries_only_one_found() -> None:
    """An entry ranked second by both arms outranks each arm's own winner found by that arm alone."""
    lexical = [("a", 9.0), ("both", 8.0), ("c", 1.0)]
    semantic = [("x", 0.9), ("both", 0.85), ("y", 0.1)]
    assert fuse(lexical, semantic)[0][0] == "both"


def test_weights_decide_between_the_arms_winners() -> None:
    """With no overlap, the arm with the larger weight supplies the top hit."""
    lexical, semantic = [("lex", 5.0), ("l2", 1.0)], [("sem", 0.9), ("s2", 0.1)]
    assert fuse(lexical, semantic, FusionParams(lexical_weight=0.7, semantic_weight=0.3))[0][0] == "lex"
    assert fuse(lexical, semantic, FusionParams(lexical_weight=0.3, semantic_weight=0.7))[0][0] == "sem"


def test_only_the_top_depth_candidates_of_each_arm_count() -> None:
    """Candidates below depth are dropped from the fused list."""
    lexical = [(f"l{i}", 10.0 - i) for i in range(10)]
    fused = fuse(lexical, [], FusionParams(depth=3))
    assert [entry_id for entry_id, _ in fused] == ["l0", "l1", "l2"]


def test_rrf_method_scores_by_rank_not_by_score() -> None:
    """Reciprocal rank fusion gives equal ranks equal credit whatever the raw scores."""
    params = FusionParams(method="rrf", rrf_k=0, lexical_weight=1, semantic_weight=1)
    fused = dict(fuse([("a", 100.0), ("b", 1.0)], [("b", 0.2), ("a", 0.1)], params))
    assert fused["a"] == pytest.approx(1.0 + 0.5)
    assert fused["b"] == pytest.approx(0.5 + 1.0)


def test_ties_are_broken_deterministically_by_semantic_rank() -> None:
    """Equal fused scores are ordered by the semantic arm, then the lexical arm."""
    params = FusionParams(lexical_weight=1, semantic_weight=1)
    assert [i for i, _ in fuse([("a", 2.0), ("b", 1.0)], [("b", 0.9), ("a", 0.1)], params)] == ["b", "a"]


def test_equal_scores_in_one_arm_all_scale_to_one() -> None:
    """A single lexical hit (no spread of scores) counts fully, not as zero."""
    assert dict(fuse([("only", 3.0)], [], FUSION))["only"] == pytest.approx(FUSION.lexical_weight)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"method": "sum"}, "method must be 'minmax' or 'rrf', got 'sum'"), ({"depth": 0}, "depth >= 1"), ({"lexical_weight": -1}, "must be >= 0")],
    ids=["method", "depth", "weight"],
)
def test_bad_fusion_parameters_are_refused(kwargs: dict[str, object], message: str) -> None:
    """Fusion parameters out of range raise a ValueError naming the bad value."""
    with pytest.raises(ValueError, match=message):
        FusionParams(**kwargs)  # type: ignore[arg-type]
