"""Holistic's command-line options: what it adds to `run` (and `slurm`), what a run records of
them, and how a resume's asked options meet the recorded ones (the hooks of
extract/keypoints/estimator.py's docstring)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions
from phoenix_keypoints.extract.keypoints.option_values import decimal_number, whole_number

# a confidence: a number in (0, 1], in ASCII digits
_confidence = decimal_number(0, 1, above=True)


def add_run_options(p: argparse._ActionsContainer) -> None:
    """MediaPipe Holistic's graph options (each None when not given: a resume keeps the run's)."""
    p.add_argument("--model-complexity", type=whole_number(), choices=(0, 1, 2),
                   help="Holistic pose model (default 1, the only one mediapipe 0.10.21 ships)")
    p.add_argument("--refine-face-landmarks", action="store_true", default=None,
                   help="Holistic's attention face model: 478 face points (468 + 10 iris)")
    p.add_argument("--static-image-mode", action="store_true", default=None,
                   help="detect on every frame instead of tracking (slower; tracking is still "
                        "reset between videos)")
    p.add_argument("--no-smooth-landmarks", dest="smooth_landmarks", action="store_false",
                   default=None, help="turn off Holistic's landmark smoothing across frames")
    p.add_argument("--min-detection-confidence", "--min_detection_confidence", type=_confidence,
                   metavar="F", help="Holistic's min_detection_confidence, in (0, 1] (default 0.5)")
    p.add_argument("--min-tracking-confidence", "--min_tracking_confidence", type=_confidence,
                   metavar="F", help="Holistic's min_tracking_confidence, in (0, 1] (default 0.5)")


def asked_settings(args: argparse.Namespace, estimator: str | None,
                   fetched: Callable[[], tuple[Path, ...]] | None = None) -> dict[str, Any] | None:
    """The options given (None: none). They never choose the family: with another --estimator
    they are not used."""
    given = {f: getattr(args, f, None) for f in HolisticOptions.__dataclass_fields__}
    given = {k: v for k, v in given.items() if v is not None}
    return given or None


def settings_of(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """The options a run records: those asked over the recorded ones (whose missing keys take the
    value that run used), else the defaults."""
    return HolisticOptions.from_dict(recorded).as_dict() | (asked or {})


def settings_conflicts(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> list[str]:
    """Each option asked that differs from the one the run was planned with."""
    have = HolisticOptions.from_dict(recorded).as_dict()
    return [f"{k} ({have[k]} when planned, {v} asked)" for k, v in settings_of(asked, recorded).items()
            if have[k] != v]
