"""`run_job`: the `run` command called from Python (a script, `python -`, a notebook).

Why beside the command line and not another path: it builds the very argument list `run` parses
and calls the same handler, so options, refusals, resume and outputs are the command's own; only
the ending differs: a refusal is raised as RunRefused (where `run` exits 2) and the outcome is
returned as a RunResult (where `run` exits 0 or 1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class RunRefused(Exception):
    """`run` would refuse this (exit 2); the message says what, where and what to do."""


@dataclass(frozen=True)
class RunResult:
    """What a run_job did: its folder, whether every frame is in the outputs, and what was not ok."""

    run_dir: Path
    complete: bool
    exit_status: int  # what `run` would have exited with: 0 all done and merged, 1 not
    frames_not_ok: dict[str, int] = field(default_factory=dict)  # status -> frames
    failed_videos: dict[str, str] = field(default_factory=dict)  # video -> why


def _negations(parser: argparse.ArgumentParser) -> dict[str, str]:
    """keyword -> the `run` flag that stores False in it (--no-follow-links, and a family's own
    such as a --no-... flag): read from the parser, so a family's flag needs no
    entry here."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.option_strings[0] for a in sub.choices["run"]._actions
            if a.option_strings and a.nargs == 0 and a.const is False}


def _keywords(parser: argparse.ArgumentParser) -> dict[str, str]:
    """keyword -> its `run` flag (--limit-videos for limit_videos), every option of `run` as
    this installation builds it (a named family's flags too)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.option_strings[0] for a in sub.choices["run"]._actions
            if a.option_strings and a.dest not in ("help", "handler")}


def _check_keywords(options: dict[str, Any], flags: dict[str, str]) -> None:
    """A keyword `run` has no option for is a TypeError, as Python says one of any function's,
    with the closest keywords it takes (a typo's fix)."""
    import difflib

    for key in options:
        if key not in flags:
            near = difflib.get_close_matches(key, list(flags), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
            raise TypeError(f"run_job() got an unexpected keyword argument {key!r}{hint} (its "
                            "keywords are run's options, - as _: docs/python.md)")


def _in_python_words(said: str, flags: dict[str, str], given: dict[str, Any]) -> str:
    """argparse's "... error: argument --limit-videos: must be ..." as a caller from Python wrote
    it: the keyword and the value given (limit_videos='x': must be ...), the flag beside it."""
    head, sep, why = said.partition("error: argument ")
    flag, colon, rest = why.partition(": ")
    key = next((k for k, f in flags.items() if f in flag.split("/")), None)
    if not (sep and colon and key):
        return said
    return f"{key}={given.get(key)!r}: {rest} (run's {flags[key]})"


def _argv(options: dict[str, Any], negations: dict[str, str],
          flags: dict[str, str] | None = None) -> list[str]:
    """Keywords as `run` flags (`flags`: keyword -> its flag; else made from the keyword): True
    is the flag alone, False the flag that stores False where `run` has one, a list is
    comma-joined, None is left out."""
    argv = []
    for key, value in options.items():
        if value is None:
            continue
        if key in negations and value is False:
            argv.append(negations[key])
            continue
        flag = (flags or {}).get(key) or "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


def run_job(dataset: str | Path | None = None, out: str | Path | None = None,
            workers: int | None = None, **options: Any) -> RunResult:
    """Run a whole job as `phoenix-keypoints run --dataset ... --out ... --workers N` does (any other
    `run` option as a keyword: limit_videos=5, videos=["a", "b"], refine_face_landmarks=True) and
    say what happened. Raises RunRefused where `run` would refuse the input (exit 2)."""
    from phoenix_keypoints.jobs import messages
    from phoenix_keypoints.jobs.cli import _load_named, _refusals, _run, build_parser
    from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunDir

    try:  # an installed family named by estimator= (or the run in out): its flags join
        _load_named(_argv({"estimator": options.get("estimator"), "out": out}, {}))
    except _refusals() as e:
        raise RunRefused(str(e)) from None
    parser = build_parser()
    flags = _keywords(parser)
    _check_keywords(options, flags)
    argv = ["run", *_argv({"dataset": dataset, "out": out, "workers": workers, **options},
                          _negations(parser), flags)]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
        args.argv = argv
    except SystemExit:
        said = err.getvalue().strip().splitlines()[-1]
        raise RunRefused(_in_python_words(said, flags, {"dataset": dataset, "out": out,
                                                        "workers": workers, **options})) from None
    try:
        code = _run(args)
    except _refusals() as e:
        raise RunRefused(str(e)) from None
    except JobFailed as e:
        messages.error(str(e))
        code = 1
    if args.out is None:  # the older --output_path placed the run folder itself
        return RunResult(Path(), code == 0, code)
    rd = RunDir(Path(args.out))
    merge = rd.load().merge if rd.exists() else None
    if merge is None:
        return RunResult(rd.path, False, code)
    not_ok = {s: n for s, n in merge.statuses.items() if s != "ok"}
    return RunResult(rd.path, code == 0 and not merge.partial, code, not_ok, dict(merge.failed_videos))
