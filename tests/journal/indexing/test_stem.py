"""The light stemmer proposals compare words by: plural and -ing/-ed endings, and nothing that folds unlike words together."""

from __future__ import annotations

import tracemalloc

import pytest

from journal.indexing._stem import stem


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("burnables", "burnable"),
        ("photos", "photo"),
        ("batteries", "battery"),
        ("shoes", "shoe"),
        ("running", "run"),
        ("scanned", "scan"),
        ("scans", "scan"),
        ("weddings", "wed"),
        ("wedding", "wed"),
        ("called", "call"),  # a doubled l, s or z is the word's own
        ("seeing", "see"),  # so is a doubled vowel
    ],
)
def test_a_word_and_its_other_forms_share_a_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


@pytest.mark.parametrize(
    "word",
    ["bus", "glass", "moved", "red", "sing", "c41", "1password", "kneecap", "general", "generous"],
)
def test_a_word_the_rules_do_not_reach_is_left_as_it_is(word: str) -> None:
    """Short words, words with a digit, -ss and -us endings, and what a full stemmer would fold ("general", "generous")."""
    assert stem(word) == word


def test_stemming_many_long_unique_words_keeps_none_of_them() -> None:
    """The stems kept for words met again hold short words alone: a journal of hashes or run-on tokens grows no cache."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(200):  # 4 MB of words, each met once and let go
            word = f"{n:06d}" + "x" * 20_000 + "ings"
            assert stem(word) == word  # a word with a digit is left as it is
            del word
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 400_000, f"stemming 200 long words kept {kept} bytes"
    assert stem("photograph" * 4 + "ers") == "photograph" * 4 + "er"  # the rules reach a long word all the same
