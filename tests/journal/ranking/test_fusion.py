"""Fusion of the lexical and semantic rankings, on plain id lists."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journal.ranking.fusion import FUSION, FusionParams, fuse, needs_partial

Ranked = list[tuple[str, float]]

_IDS = [f"e{n}" for n in range(12)]
_BM25 = st.floats(min_value=0.0, max_value=30.0, allow_nan=False)
_COSINE = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


def _ranked(scores: dict[str, float]) -> Ranked:
    """Best first, as an arm returns them (equal scores keep the id order)."""
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@st.composite
def _arms(draw: st.DrawFn) -> tuple[dict[str, float], dict[str, float]]:
    """A BM25 list over some ids and a cosine list over some ids (often overlapping)."""
    lexical = draw(st.dictionaries(st.sampled_from(_IDS), _BM25, max_size=len(_IDS)))
    semantic = draw(st.dictionaries(st.sampled_from(_IDS), _COSINE, max_size=len(_IDS)))
    return lexical, semantic


_PARAMS = st.sampled_from([
    FUSION,
    FusionParams(lexical_floor_rank=3, semantic_floor_rank=4),
    FusionParams(lexical_floor_rank=1, semantic_floor_rank=1, lexical_weight=0.8, semantic_weight=0.2),
    FusionParams(method="minmax"),
])


def _position(fused: Ranked, entry_id: str) -> int:
    return [i for i, _ in fused].index(entry_id)


@given(arms=_arms(), params=_PARAMS, data=st.data())
def test_a_higher_score_in_one_arm_never_moves_an_entry_down(arms: tuple[dict[str, float], dict[str, float]], params: FusionParams, data: st.DataObject) -> None:
    """Raising one entry's score in either arm leaves it at least as high in the fused list."""
    lexical, semantic = arms
    arm = data.draw(st.sampled_from([a for a in (lexical, semantic) if a] or [lexical]))
    if not arm:
        arm[data.draw(st.sampled_from(_IDS))] = 1.0
    entry_id = data.draw(st.sampled_from(sorted(arm)))
    before = fuse(_ranked(lexical), _ranked(semantic), params)
    ceiling = 30.0 if arm is lexical else 1.0
    arm[entry_id] = data.draw(st.floats(min_value=arm[entry_id], max_value=ceiling))
    after = fuse(_ranked(lexical), _ranked(semantic), params)
    assert dict(after)[entry_id] >= dict(before)[entry_id] - 1e-12
    beaten_before = {i for i, score in before if score < dict(before)[entry_id]}
    assert all(dict(after)[i] <= dict(after)[entry_id] + 1e-12 for i in beaten_before)


@given(arms=_arms(), params=_PARAMS)
def test_the_fused_list_holds_exactly_the_entries_of_either_list(arms: tuple[dict[str, float], dict[str, float]], params: FusionParams) -> None:
    """An entry in neither list never appears; every entry in one does, once."""
    lexical, semantic = arms
    fused = [i for i, _ in fuse(_ranked(lexical), _ranked(semantic), params)]
    assert len(fused) == len(set(fused))
    assert set(fused) == lexical.keys() | semantic.keys()


@given(arms=_arms(), params=_PARAMS)
def test_equal_fused_scores_are_ordered_by_semantic_then_lexical_rank(arms: tuple[dict[str, float], dict[str, float]], params: FusionParams) -> None:
    """The order is a function of the inputs: ties go to the better semantic rank, then the better lexical rank."""
    lexical, semantic = _ranked(arms[0]), _ranked(arms[1])
    fused = fuse(lexical, semantic, params)
    assert fused == fuse(list(lexical), list(semantic), params)
    sem_rank = {i: r for r, (i, _) in enumerate(semantic)}
    lex_rank = {i: r for r, (i, _) in enumerate(lexical)}
    far = len(_IDS)
    for (a, score_a), (b, score_b) in pairwise(fused):
        assert score_a >= score_b
        if score_a == score_b:
            assert (sem_rank.get(a, far), lex_rank.get(a, far)) < (sem_rank.get(b, far), lex_rank.get(b, far))


def test_a_weak_lexical_list_does_not_outrank_a_strong_meaning_match() -> None:
    """Fifty entries that match only a common word, at near-equal BM25, lose to the one clear cosine winner."""
    lexical = [(f"new{n}", 1.453 - n * 0.0002) for n in range(50)]
    semantic = [("puppy", 0.48)] + [(f"new{n}", 0.25 - n * 0.001) for n in range(49)]
    assert fuse(lexical, semantic)[0][0] == "puppy"
    assert fuse(lexical, semantic, FusionParams(method="minmax"))[0][0] != "puppy"  # the blend it replaces


def test_a_rare_exact_word_beats_a_flat_semantic_list() -> None:
    """One strong BM25 hit over common-word hits wins against cosines that barely rise above their floor."""
    lexical = [("ticket", 9.0)] + [(f"common{n}", 2.0) for n in range(40)]
    semantic = [(f"other{n}", 0.31 - n * 0.001) for n in range(49)] + [("ticket", 0.2)]
    assert fuse(lexical, semantic)[0][0] == "ticket"


def test_in_a_small_window_the_lowest_entry_is_the_floor() -> None:
    """With fewer entries than the floor rank, a lexical list that matched them all scales against its last entry."""
    lexical = [("a", 2.0), ("b", 1.9), ("c", 1.8)]
    semantic = [("c", 0.6), ("b", 0.3), ("a", 0.2)]
    fused = dict(fuse(lexical, semantic))
    assert fused["c"] > fused["a"]
    # the window holds a fourth entry that BM25 did not match: the lexical floor is 0
    fused = dict(fuse(lexical, [*semantic, ("d", 0.1)]))
    assert fused["a"] == pytest.approx(FUSION.lexical_weight * 1.0 + FUSION.semantic_weight * (0.2 - 0.1) / 0.9)


def test_an_entry_both_arms_found_beats_entries_only_one_found() -> None:
    """An entry ranked second by both arms outranks each arm's own winner found by that arm alone."""
    lexical = [("a", 9.0), ("both", 8.0), ("c", 1.0)]
    semantic = [("x", 0.9), ("both", 0.85), ("y", 0.1)]
    assert fuse(lexical, semantic)[0][0] == "both"


def test_weights_decide_between_the_arms_winners() -> None:
    """With no overlap, the arm with the larger weight supplies the top hit."""
    lexical, semantic = [("lex", 5.0), ("l2", 1.0)], [("sem", 0.9), ("s2", 0.0)]
    assert fuse(lexical, semantic, FusionParams(lexical_weight=0.7, semantic_weight=0.3))[0][0] == "lex"
    assert fuse(lexical, semantic, FusionParams(lexical_weight=0.3, semantic_weight=0.7))[0][0] == "sem"


def test_candidates_past_the_floor_rank_are_kept_at_the_end() -> None:
    """More candidates than the floor rank (a search for many hits) are all returned; those below the floor score 0."""
    lexical = [(f"l{i}", 100.0 - i) for i in range(80)]
    fused = fuse(lexical, [])
    assert [i for i, _ in fused] == [i for i, _ in lexical]
    assert all(score == 0 for _, score in fused[FUSION.lexical_floor_rank - 1:])


def test_minmax_and_rrf_use_only_the_top_depth_candidates() -> None:
    """The comparison methods drop candidates below depth."""
    lexical = [(f"l{i}", 10.0 - i) for i in range(10)]
    for method in ("minmax", "rrf"):
        assert [i for i, _ in fuse(lexical, [], FusionParams(method=method, depth=3))] == ["l0", "l1", "l2"]


def test_rrf_method_scores_by_rank_not_by_score() -> None:
    """Reciprocal rank fusion gives equal ranks equal credit whatever the raw scores."""
    params = FusionParams(method="rrf", rrf_k=0, lexical_weight=1, semantic_weight=1)
    fused = dict(fuse([("a", 100.0), ("b", 1.0)], [("b", 0.2), ("a", 0.1)], params))
    assert fused["a"] == pytest.approx(1.0 + 0.5)
    assert fused["b"] == pytest.approx(0.5 + 1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"method": "sum"}, "method must be one of 'evidence', 'minmax', 'rrf', got 'sum'"), ({"depth": 0}, "depth and floor ranks >= 1"),
     ({"lexical_floor_rank": 0}, "floor ranks >= 1"), ({"lexical_weight": -1}, "must be >= 0")],
    ids=["method", "depth", "floor", "weight"],
)
def test_bad_fusion_parameters_are_refused(kwargs: dict[str, object], message: str) -> None:
    """Fusion parameters out of range raise a ValueError naming the bad value."""
    with pytest.raises(ValueError, match=message):
        FusionParams(**kwargs)  # type: ignore[arg-type]


def test_in_a_small_journal_a_hit_on_one_searched_word_does_not_outrank_the_clear_cosine_first() -> None:
    """BM25 matched two entries, each on only one of the searched words: the lower is the floor, the cosine arm's first leads."""
    lexical = [("animals", 2.8), ("still", 2.1)]
    semantic = [("tabby", 0.51), ("mother", 0.41), ("kitten", 0.40)] + [(f"other{n}", 0.3 - n * 0.01) for n in range(28)] + [("animals", 0.2), ("still", 0.1)]
    assert fuse(lexical, semantic)[0][0] == "animals"  # without knowing the hits are partial, the floor is 0
    fused = [entry_id for entry_id, _ in fuse(lexical, semantic, partial={"animals", "still"})]
    assert fused[0] == "tabby" and fused.index("still") > fused.index("kitten")  # the floor hit itself keeps only its cosine


def test_a_hit_holding_every_searched_word_keeps_its_rise_from_zero() -> None:
    """Only partial hits set the floor: an exact match of the whole query still leads a short BM25 list."""
    lexical = [("ticket", 6.0), ("partial", 2.0)]
    semantic = [(f"other{n}", 0.35 - n * 0.01) for n in range(30)] + [("ticket", 0.2), ("partial", 0.1)]
    assert fuse(lexical, semantic, partial={"partial"})[0][0] == "ticket"
    assert needs_partial(len(lexical), len(semantic)) and not needs_partial(20, 50) and not needs_partial(0, 50)
