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

from phoenix_keypoints.extract.families.wholebody.heads import DECODERS
from phoenix_keypoints.extract.families.wholebody.layouts import DEFAULT_LAYOUT
from phoenix_keypoints.extract.families.wholebody.persons import MAX_PERSONS
from phoenix_keypoints.extract.families.wholebody.rtmdet import KIND_NAMES, kind_of
from phoenix_keypoints.extract.keypoints.contract import moved_record
from phoenix_keypoints.extract.keypoints.estimator import OptionError
from phoenix_keypoints.extract.keypoints.option_values import whole_number

ABOUT = "COCO-WholeBody 133 points from --detector and --pose-model: docs/wholebody.md"
DOCS = "docs/wholebody.md"


def add_run_options(p: argparse._ActionsContainer) -> None:
    p.add_argument("--detector", type=Path, metavar="DET.onnx",
                   help="wholebody: a YOLOX person detector (.onnx, with or without NMS inside)")
    p.add_argument("--pose-model", type=Path, metavar="POSE.onnx",
                   help="wholebody: a top-down pose model (.onnx): SimCC (RTMPose, RTMW, DWPose) "
                        "or heatmaps (ViTPose, HRNet), its head read from its outputs (the 3D "
                        "family's: an RTMW3D one)")
    p.add_argument("--point-set", metavar="NAME",
                   help="wholebody: the pose model's points: coco-wholebody, coco, halpe26, hand21 "
                        "(default: the one its number of points decides)")
    p.add_argument("--detector-kind", choices=KIND_NAMES,
                   help="wholebody: how --detector is read: as rtmlib's YOLOX (raw pixels) or its "
                        "RTMDet (normalised input; default for a hand21 pose model, as rtmlib's "
                        "Hand; docs/heads.md)")
    p.add_argument("--decoder", choices=DECODERS,
                   help="wholebody, heatmap heads: rtmlib's ViTPose DARK-UDP (default) or mmpose's "
                        "DARK (docs/heads.md)")
    p.add_argument("--det-every", type=_every, metavar="K",
                   help="wholebody: detect every K frames of a video, following each person in "
                        "between as rtmlib's PoseTracker(det_frequency=K) (default 1: every frame)")
    p.add_argument("--max-persons", type=_max_persons, metavar="N",
                   help="wholebody: pose at most N boxes a frame where every box is posed (a hand "
                        f"model, --det-every), the largest first; the row's note says how many "
                        f"were not (default {MAX_PERSONS}: docs/heads.md)")


# --det-every's K: a whole number of frames, 1 or more (1: a detection on every frame)
_every = whole_number(1, what="a whole number of frames")


# --max-persons' N: a whole number of boxes, 1 or more
_max_persons = whole_number(1, what="a whole number of boxes")


def asked_settings(args: argparse.Namespace, estimator: str | None,
                   fetched: Callable[[], tuple[Path, ...]] | None = None) -> dict[str, Any] | None:
    """The model files (below), --det-every K (rtmlib's PoseTracker rule: this family's alone)
    and --max-persons N, or None. Given, they choose this family."""
    every = getattr(args, "det_every", None)
    cap = getattr(args, "max_persons", None)
    if every is not None and estimator not in (None, "wholebody"):
        raise OptionError("--det-every is for --estimator wholebody.")
    if cap is not None and estimator not in (None, "wholebody"):
        raise OptionError("--max-persons bounds the boxes posed a frame where every box is posed: "
                          "--estimator wholebody (the other families pose the largest box alone).")
    files = _model_files(args, estimator, fetched)
    more = {**({"det_every": every} if every is not None else {}),
            **({"max_persons": cap} if cap is not None else {})}
    return files if not more else (files or {}) | more


def _model_files(args: argparse.Namespace, estimator: str | None,
                 fetched: Callable[[], tuple[Path, ...]] | None) -> dict[str, Any] | None:
    """--detector and --pose-model (or --models NAME: `fetched` gives its checked files), checked
    and recorded (sha256, size, input size), or None. Given, they choose this family; with
    --estimator naming a family built on this one they are that family's to read."""
    from phoenix_keypoints.extract.families.wholebody.runner import record

    det, pose = getattr(args, "detector", None), getattr(args, "pose_model", None)
    reading = (getattr(args, "point_set", None), getattr(args, "decoder", None),
               getattr(args, "detector_kind", None))
    other = estimator not in (None, "wholebody")
    if reading[2] is not None and reading[2] not in KIND_NAMES:  # a models index names it too
        raise OptionError(f"--detector-kind {reading[2]!r}: one of {', '.join(KIND_NAMES)}.")
    if reading[2] is not None and not other and det is None and getattr(args, "models", None) is None:
        raise OptionError("--detector-kind says how --detector is read: give it with --detector.")
    if any(reading) and (other or (pose is None and getattr(args, "models", None) is None)):
        raise OptionError("--point-set, --decoder and --detector-kind say how a whole-body model's "
                          "outputs are read: give them with --pose-model (or --models), --estimator "
                          "wholebody.")
    if getattr(args, "models", None) is not None:
        if other and _built_on(str(estimator)):  # a family built on this one reads it
            return None
        if det is not None or pose is not None or other:
            raise OptionError("--models NAME names a whole-body detector and pose model: give it "
                              "with --estimator wholebody, without --detector and --pose-model.")
        assert fetched is not None, "--models is added with its cache (jobs/models.py)"
        return record(*fetched(), *reading)
    if (det is None and pose is None) or (other and _built_on(str(estimator))):
        return None
    if other:
        raise OptionError("--detector and --pose-model are for --estimator wholebody.")
    if pose is None:  # a pose model alone takes the whole frame (a hand crop, say)
        raise OptionError("--estimator wholebody needs --pose-model POSE.onnx, with --detector "
                          "DET.onnx unless the pose model takes the whole frame (docs/wholebody.md "
                          "says where rtmlib's published ones are).")
    return record(det, pose, *reading)


def _built_on(estimator: str) -> bool:
    """Whether family `estimator` takes these two model files too (one built on this family's
    detector and crop): it reads --detector and --pose-model as its own (its asked_settings)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    return {"detector", "pose_model"} <= set(family(estimator).clip_options())


def settings_of(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """The model files a run records: those asked (a resume checks they are the same bytes) over
    the recorded ones; --det-every 1 and --max-persons 100 (the defaults) are not written, so
    they make the run they make without them, byte for byte. A planned run keeps the layout it
    recorded: a hand run from before every hand was kept (no `hands`) goes on in its one column."""
    merged = {**recorded, **(asked or {})}
    if "pose_model" in recorded:
        merged.pop("hands", None)
        merged |= {"hands": recorded["hands"]} if "hands" in recorded else {}
    return {k: v for k, v in merged.items() if (k, v) not in _DEFAULTS}


_DEFAULTS = (("det_every", 1), ("max_persons", MAX_PERSONS))  # not written (settings_of)


def settings_conflicts(asked: dict[str, Any] | None, recorded: dict[str, Any]) -> list[str]:
    """Each model file asked whose bytes are not the recorded one's; another --det-every."""
    diffs = []
    for key, default in _DEFAULTS:
        mine, had = (asked or {}).get(key), recorded.get(key, default)
        if mine not in (None, had):
            diffs.append(f"--{key.replace('_', '-')} ({had} when planned, {mine} asked)")
    for key in ("detector", "pose_model"):
        mine, theirs = (asked or {}).get(key), recorded.get(key)
        if mine and theirs and _model_bytes(mine) != _model_bytes(theirs):
            diffs.append(f"--{key.replace('_', '-')} ({theirs['path']} with sha256 "
                         f"{theirs['sha256'][:12]} when planned, {mine['path']} with "
                         f"{mine['sha256'][:12]} asked{_external_note(mine, theirs)})")
        elif mine and theirs and kind_of(mine) != kind_of(theirs):  # read as another detector
            diffs.append(f"--detector read as {kind_of(theirs)} when planned, as {kind_of(mine)} "
                         f"now (pass --detector-kind {kind_of(theirs)})")
    for flag in ("--point-set", "--decoder"):  # how the pose model's outputs are read
        mine, theirs = _reading(asked, flag), _reading(recorded, flag)
        if (asked or {}).get("pose_model") and mine != theirs:  # a pose model asked again
            diffs.append(f"{flag} ({theirs} when planned, {mine} asked)")
    return diffs


def _reading(record: dict[str, Any] | None, flag: str) -> str:
    """A record's --point-set or --decoder (one recorded without them: rtmlib's SimCC 133)."""
    if flag == "--point-set":
        return (record or {}).get("point_set", DEFAULT_LAYOUT)
    head = (record or {}).get("head")
    return head.get("decoder", DECODERS[0]) if isinstance(head, dict) else DECODERS[0]


def moved_files(asked: dict[str, Any], recorded: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The record with each model file where --detector / --pose-model name it now (a resume
    checked they are the same bytes), and a line per move ("--detector OLD -> NEW")."""
    moved = {k: asked[k]["path"] for k in ("detector", "pose_model")
             if k in asked and k in recorded and asked[k]["path"] != recorded[k]["path"]}
    lines = [f"--{k.replace('_', '-')} {recorded[k]['path']} -> {path}" for k, path in moved.items()]
    return {**recorded, **{k: moved_record(recorded[k], asked[k]) for k in moved}}, lines


def _model_bytes(record: dict) -> tuple:
    """What a model is: its file's sha256 and its external data files' (location, sha256)."""
    return record["sha256"], [(e["location"], e["sha256"]) for e in record.get("external_data", [])]


def _external_note(mine: dict, theirs: dict) -> str:
    if mine["sha256"] != theirs["sha256"]:
        return ""
    return "; the same file, other external data"
