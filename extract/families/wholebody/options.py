"""The whole-body family's command-line options: the two model files it adds to `run` (and
`slurm`), named one by one or as a fetched mode (`--models NAME`, whose flags and cache
jobs/models.py adds for a family that publishes models: PUBLISHED below), what a run records of
them, and how a resume's asked files meet the recorded ones (the hooks of
extract/keypoints/estimator.py's docstring)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.keypoints.estimator import OptionError

ABOUT = "COCO-WholeBody 133 points from --detector and --pose-model: docs/wholebody.md"
DOCS = "docs/wholebody.md"


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--detector", type=Path, metavar="DET.onnx",
                   help="wholebody: a YOLOX person detector (.onnx, with or without NMS inside)")
    p.add_argument("--pose-model", type=Path, metavar="POSE.onnx",
                   help="wholebody: an RTMPose / RTMW / DWPose COCO-WholeBody SimCC model (.onnx; "
                        "the 3D family's: an RTMW3D one)")
    p.add_argument("--det-every", type=_every, metavar="K",
                   help="wholebody: detect every K frames of a video, following each person in "
                        "between as rtmlib's PoseTracker(det_frequency=K) (default 1: every frame)")


def _every(value: str) -> int:
    """--det-every's K: a whole number of frames, 1 or more (1: a detection on every frame)."""
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of frames, 1 or more, not {value!r}")
    return int(value)


def asked_settings(args: argparse.Namespace, estimator: str | None,
                   fetched: Callable[[], tuple[Path, ...]] | None = None) -> dict[str, Any] | None:
    """The model files (below) and --det-every K (rtmlib's PoseTracker rule: this family's
    alone), or None. Given, they choose this family."""
    every = getattr(args, "det_every", None)
    if every is not None and estimator not in (None, "wholebody"):
        raise OptionError("--det-every is for --estimator wholebody.")
    files = _model_files(args, estimator, fetched)
    return files if every is None else (files or {}) | {"det_every": every}


def _model_files(args: argparse.Namespace, estimator: str | None,
                 fetched: Callable[[], tuple[Path, ...]] | None) -> dict[str, Any] | None:
    """--detector and --pose-model (or --models NAME: `fetched` gives its checked files), checked
    and recorded (sha256, size, input size), or None. Given, they choose this family; with
    --estimator naming a family built on this one they are that family's to read."""
    from phoenix_keypoints.extract.families.wholebody.runner import record

    det, pose = getattr(args, "detector", None), getattr(args, "pose_model", None)
    if getattr(args, "models", None) is not None:
        if det is not None or pose is not None or estimator not in (None, "wholebody"):
            raise OptionError("--models NAME names a whole-body detector and pose model: give it "
                              "with --estimator wholebody, without --detector and --pose-model.")
        assert fetched is not None, "--models is added with its cache (jobs/models.py)"
        return record(*fetched())
    other = estimator not in (None, "wholebody")
    if (det is None and pose is None) or (other and _built_on(str(estimator))):
        return None
    if other:
        raise OptionError("--detector and --pose-model are for --estimator wholebody.")
    if det is None or pose is None:
        raise OptionError("--estimator wholebody needs both --detector DET.onnx and --pose-model "
                          "POSE.onnx (docs/wholebody.md says where rtmlib's published ones are).")
    return record(det, pose)


def _built_on(estimator: str) -> bool:
    """Whether family `estimator` takes these two model files too (one built on this family's
    detector and crop): it reads --detector and --pose-model as its own (its asked_settings)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    return {"detector", "pose_model"} <= set(family(estimator).clip_options())


def settings_of(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """The model files a run records: those asked (a resume checks they are the same bytes) over
    the recorded ones; --det-every 1 (the default) is not written, so it makes the run it makes
    without it, byte for byte."""
    return {k: v for k, v in {**recorded, **(asked or {})}.items() if (k, v) != ("det_every", 1)}


def settings_conflicts(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> list[str]:
    """Each model file asked whose bytes are not the recorded one's; another --det-every."""
    every, had = (asked or {}).get("det_every"), recorded.get("det_every", 1)
    diffs = [f"--det-every ({had} when planned, {every} asked)"] if every not in (None, had) else []
    for key in ("detector", "pose_model"):
        mine, theirs = (asked or {}).get(key), recorded.get(key)
        if mine and theirs and _model_bytes(mine) != _model_bytes(theirs):
            diffs.append(f"--{key.replace('_', '-')} ({theirs['path']} with sha256 "
                         f"{theirs['sha256'][:12]} when planned, {mine['path']} with "
                         f"{mine['sha256'][:12]} asked{_external_note(mine, theirs)})")
    return diffs


def moved_files(asked: dict[str, Any], recorded: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The record with each model file where --detector / --pose-model name it now (a resume
    checked they are the same bytes), and a line per move ("--detector OLD -> NEW")."""
    moved = {k: asked[k]["path"] for k in ("detector", "pose_model")
             if k in asked and k in recorded and asked[k]["path"] != recorded[k]["path"]}
    lines = [f"--{k.replace('_', '-')} {recorded[k]['path']} -> {path}" for k, path in moved.items()]
    return {**recorded, **{k: {**recorded[k], "path": path} for k, path in moved.items()}}, lines


def _model_bytes(record: dict) -> tuple:
    """What a model is: its file's sha256 and its external data files' (location, sha256)."""
    return record["sha256"], [(e["location"], e["sha256"]) for e in record.get("external_data", [])]


def _external_note(mine: dict, theirs: dict) -> str:
    if mine["sha256"] != theirs["sha256"]:
        return ""
    return "; the same file, other external data"
