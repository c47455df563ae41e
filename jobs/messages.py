"""Every message to the user is written here: results on stdout, everything else on stderr.

Lines go through tqdm.write so that they land above a live progress bar instead of through it.
Callers compose the text (they know the facts); this module decides where and how it is shown.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

RESUME = "run the same command again to resume"


ANY_INPUT = "--dataset CORPUS"  # a run of unknown kind (no readable run.json)


def fresh(out: object, dataset: str = ANY_INPUT) -> str:
    """How to start a run folder over, said in full: only `run` has --fresh, and messages that
    need it are also shown by status, merge, slurm, tensors, export and verify. `dataset` is the
    input as the user typed it, or the placeholder of the run's corpus (`--manifest FILE`)."""
    return (f"`phoenix-keypoints run --out {quote(out)} --fresh {dataset}` (deletes that run "
            "and starts again)")


def quote(path: object) -> str:
    """A path as the user can paste it into a shell (spaces, `#`)."""
    import shlex

    return shlex.quote(str(path))


# control characters but newline and tab: a name a corpus holds may carry ESC or CR, which a
# terminal would obey (clear the screen, overwrite the line); shown as \xNN instead
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (9, 10)}


def terminal(text: str) -> str:
    """Text as it is safe to print: control characters as \\xNN and bytes of a name that are no
    UTF-8 as \\udcNN (as run.json writes them), so a name can neither steer the terminal nor
    stop the message with an encoding error."""
    if text.isprintable():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").translate(_CONTROLS)


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
