"""Every message to the user is written here: results on stdout, everything else on stderr.

Lines go through tqdm.write so that they land above a live progress bar instead of through it.
Callers compose the text (they know the facts); this module decides where and how it is shown.
"""

from __future__ import annotations

import re
import sys
import unicodedata

from tqdm import tqdm

RESUME = "run the same command again to resume"


ANY_INPUT = "--dataset CORPUS"  # a run of unknown kind (no readable run.json)


def fresh(out: object, dataset: str = ANY_INPUT, typed: tuple[str, ...] = ()) -> str:
    """How to start a run folder over, said in full: only `run` has --fresh, and messages that
    need it are also shown by status, merge, slurm, tensors, export and verify. `dataset` is the
    input as the user typed it, or the placeholder of the run's corpus (`--manifest FILE`).
    `typed`: a `run` command line as typed, repeated whole (every option asked, in the user's
    spelling) with --fresh, and `dataset` where it names no input."""
    if typed[:1] == ("run",):
        import shlex

        rest, given = _input_apart(list(typed))
        line = shlex.join([*rest, "--fresh", *given]) if given else \
            f"{shlex.join([*rest, '--fresh'])} {dataset}"
        return f"`phoenix-keypoints {line}` (deletes that run and starts again)"
    return (f"`phoenix-keypoints run --out {quote(out)} --fresh {dataset}` (deletes that run "
            "and starts again)")


_INPUT_FLAGS = ("--dataset", "--dataset_path", "--manifest")


def _input_apart(typed: list[str]) -> tuple[list[str], list[str]]:
    """(the command line without its input, the input's flag and value as typed): a hint puts
    --fresh before the input, as every other hint does."""
    for i, token in enumerate(typed):
        if token.split("=")[0] in _INPUT_FLAGS:
            n = 1 if "=" in token else 2
            return typed[:i] + typed[i + n:], typed[i:i + n]
    return typed, []


def quote(path: object) -> str:
    """A path as the user can paste it into a shell (spaces, `#`)."""
    import shlex

    return shlex.quote(str(path))


# What a terminal would obey or hide rather than show: control characters but newline and tab
# (ESC, CR: clear the screen, overwrite the line), format characters (U+202E turns the rest of the
# line right to left, U+200B is invisible), line and paragraph separators, unassigned code points
# and lone surrogates. A name a corpus holds may carry any of them; they are shown as escapes.
_HIDDEN = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Cn"))
_NOT_PLAIN = re.compile(r"[^\x20-\x7e\n\t]")


def _escaped(match: re.Match[str]) -> str:
    c = match.group()
    if unicodedata.category(c) not in _HIDDEN:
        return c
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(text: str) -> str:
    """Text as it is safe to print: control, format (bidi, zero-width) and separator characters
    as \\xNN or \\uNNNN, and bytes of a name that are no UTF-8 as \\udcNN (as run.json writes
    them), so a name can neither steer nor hide in the terminal, nor stop the message with an
    encoding error."""
    if text.isascii() and text.isprintable():
        return text
    return _NOT_PLAIN.sub(_escaped, text)


def result(text: str) -> None:
    """What the command produced (paths, counts): stdout, so it can be piped."""
    tqdm.write(terminal(text), file=sys.stdout)


def say(text: str) -> None:
    """Progress worth reading (a worker died and is replaced, resuming, ...): stderr."""
    tqdm.write(terminal(text), file=sys.stderr)


def note(text: str) -> None:
    say(f"note: {text}")


def warn(text: str) -> None:
    say(f"warning: {text}")


def error(text: str) -> None:
    say(f"error: {text}")


def listing(items: list[str], limit: int = 10, total: int | None = None) -> str:
    """The first `limit` items, comma-separated, with ' ...' when there are more (`total`: how
    many there are, when `items` holds only the first)."""
    more = (len(items) if total is None else total) > min(limit, len(items))
    return ", ".join(items[:limit]) + (" ..." if more else "")
