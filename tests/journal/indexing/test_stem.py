"""The light stemmer proposals compare words by: plural and -ing/-ed endings, and nothing that folds unlike words together."""

from __future__ import annotations

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
