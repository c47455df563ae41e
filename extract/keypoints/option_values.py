"""Numbers given on the command line, read one way by every option of every command (jobs/cli.py,
each family's options.py): ASCII digits only, and a refusal in words.

Python reads more than a user typed as a number: `str.isdigit()` takes `²` and `٣`, `int()` reads
`٣` as 3 and `1_000` as 1000, `float()` reads `١.٥`, `nan` and `inf`. And argparse, when a type
function raises ValueError, names the function (`invalid _every value: '²'`). The types here
take ASCII digits, and for a number a decimal point and an exponent (`1e-3`), nothing else: no
sign (`+1`) and no space (`' 5'`), as docs/options.md says; they refuse with
argparse.ArgumentTypeError, whose text argparse prints as it is after `argument --flag:`.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeVar

_WHOLE = re.compile(r"[0-9]+")
N = TypeVar("N", int, float)
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def whole_number(least: int | None = None, most: int | None = None, why: str = "",
                 what: str = "a whole number") -> Callable[[str], int]:
    """An argparse type: an integer from `least` to `most` (None: unbounded), written in ASCII
    digits; a refusal past `most` says `why`. `what`: the number's words ("a whole number of
    frames")."""
    def parse(value: str) -> int:
        if not value.isascii() or not _WHOLE.fullmatch(value):
            raise argparse.ArgumentTypeError(f"must be {what}, not {value!r}")
        return _bounded(int(value), least, most, why, "{:,}")

    parse.__name__ = what  # never shown: every refusal is an ArgumentTypeError
    return parse


def decimal_number(least: float | None = None, most: float | None = None, above: bool = False,
                   what: str = "a number") -> Callable[[str], float]:
    """An argparse type: a finite decimal number from `least` (greater than it, with `above`) to
    `most`, in ASCII digits (`2`, `0.5`, `.5`, `1e-3`)."""
    def parse(value: str) -> float:
        if not value.isascii() or not _DECIMAL.fullmatch(value) or not math.isfinite(float(value)):
            raise argparse.ArgumentTypeError(
                f"must be {what}{_range(least, most, above)}, not {value!r}")
        x = float(value)
        if least is not None and (x <= least if above else x < least):
            raise argparse.ArgumentTypeError(
                f"must be {'greater than' if above else 'at least'} {least:g}, not {x:g}")
        return _bounded(x, None, most, "", "{:g}")

    parse.__name__ = what
    return parse


def _range(least: float | None, most: float | None, above: bool) -> str:
    """A number's range in words: ' above 0 and at most 1', ', 0 or more', ' from 1 to 9'."""
    low = "" if least is None else f" above {least:g}" if above else f" from {least:g}"
    if most is None:
        return f", {least:g} or more" if least is not None and not above else low
    joint = " at most" if not low else " and at most" if above else " to"
    return f"{low}{joint} {most:g}"


def _bounded(x: N, least: N | None, most: N | None, why: str, shown: str) -> N:
    if least is not None and x < least:
        raise argparse.ArgumentTypeError(f"must be >= {shown.format(least)}, not "
                                         f"{shown.format(x)}")
    if most is not None and x > most:
        raise argparse.ArgumentTypeError(f"must be at most {shown.format(most)}, not "
                                         f"{shown.format(x)}" + (f": {why}" if why else ""))
    return x
