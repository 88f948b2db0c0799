"""A light stemmer for the words supersede proposals compare: plural and ``-ing``/``-ed`` endings, nothing more.

Two versions of a fact rarely use a word in the same form ("burnables" and
"burnable", "running" and "runs", "photos" and "photo"), and pairing counts the
words two entries share, so it compares stems. The rules are few and
predictable, on purpose: a full stemmer (Porter's) also folds words that mean
different things ("general" and "generous" both to "gener"), which would make
entries about different things read alike.

- Plurals, after Harman's S-stemmer: ``-ies`` to ``-y`` (not ``-eies``,
  ``-aies``), else a last ``-s`` dropped (not ``-us``, ``-ss``); his ``-es``
  to ``-e`` is that same drop.
- Then ``-ing`` and ``-ed`` dropped from a word longer than five letters that
  keeps at least three, and a doubled last consonant made single
  ("running", "scanned" to "run", "scan"), but ``l``, ``s``, ``z`` and a
  vowel ("called" stays "call", "seeing" "see").

Words with a digit or shorter than four letters are left as they are.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

__all__ = ["CACHED_LENGTH", "stem"]

_KEEP_DOUBLED: Final = frozenset("aeioulsz")


#: The longest word whose stem is kept for the next time it is met: a longer one (a hash, a run-on token, a word of a
#: script written without spaces) is rarely met twice, and kept, a cache of many such words would hold megabytes.
CACHED_LENGTH: Final = 32


def stem(word: str) -> str:
    """The stem of a case-folded *word* (see the module's rules)."""
    return _stem(word) if len(word) > CACHED_LENGTH else _cached_stem(word)


# Pairing stems its neighbours' kept words at each append: a journal's words recur, so each is stemmed once.
@lru_cache(maxsize=1 << 16)
def _cached_stem(word: str) -> str:
    return _stem(word)


def _stem(word: str) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("us", "ss")):
        word = word[:-1]
    if len(word) > 5:
        for ending in ("ing", "ed"):
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                word = word[: -len(ending)]
                if word[-1] == word[-2] and word[-1] not in _KEEP_DOUBLED:
                    word = word[:-1]
                break
    return word
