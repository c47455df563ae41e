"""How messages say a name they did not choose: the article before it.

A message that puts a name the tool does not know in advance after "a" (a family's name, a file
kind, a type) says "a openpose25 run" for a name said with a vowel first. `a(name)` gives "a X" or
"an X" by how the name is said: a word by its first letter, a number by how it is read aloud, a
name without vowels (xz, mp4) or starting with capitals (RTMPose, HRNet) letter by letter.
"""

from __future__ import annotations

import re

# letters whose spoken names start with a vowel sound (an F, an HRNet, an mp4, an xz)
_VOWEL_NAMED = frozenset("aefhilmnorsx")
# words said with a consonant first though they start with a vowel letter, or the reverse
_CONSONANT_START = ("one", "once", "uni", "use", "usu", "uti", "ura", "ure", "uro", "eu", "ewe")
_VOWEL_START = ("hour", "honest", "honor", "honour", "heir")
# names without a vowel said as words, not letter by letter (Python's str: "a string")
_SAID_AS_WORDS = ("str",)


def _number_article(digits: str) -> str:
    """By the number read aloud: its leading group of three digits (eight, eighty, eight hundred,
    eleven, eighteen thousand start with a vowel sound)."""
    lead = digits[: len(digits) % 3 or 3]
    return "an" if lead.startswith("8") or lead in ("11", "18") else "a"


def article(name: str) -> str:
    """"a" or "an" before `name`, as the name is said."""
    word = name.lstrip("`'\"(").replace(",", "")
    if not word:
        return "a"
    if word[0].isdigit():
        return _number_article(re.match(r"\d+", word).group())  # type: ignore[union-attr]
    low = word.lower()
    letters = not re.search(r"[aeiouy]", low) and low not in _SAID_AS_WORDS
    if letters or re.match(r"[A-Z]{2}", word):  # said letter by letter
        return "an" if low[0] in _VOWEL_NAMED else "a"
    if low.startswith(_VOWEL_START):
        return "an"
    if low.startswith(_CONSONANT_START):
        return "a"
    return "an" if low[0] in "aeiou" else "a"


def a(name: object) -> str:
    """`name` with its article: "a wholebody", "an openpose25", "an xz"."""
    return f"{article(str(name))} {name}"
