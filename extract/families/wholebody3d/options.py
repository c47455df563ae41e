"""The 3D whole-body family's command-line options: the whole-body family's two model files
(--detector, --pose-model: that family adds the flags, and leaves them to this one when
--estimator names it), read here as this family records them (with the 3D head), and how a
resume's asked files meet the recorded ones (the whole-body family's rules: the same keys)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phoenix_keypoints.extract.families.wholebody.options import (
    moved_files,
    settings_conflicts,
    settings_of,
)
from phoenix_keypoints.extract.families.wholebody3d.declaration import WHOLEBODY3D
from phoenix_keypoints.extract.keypoints.estimator import OptionError

__all__ = ["ABOUT", "DOCS", "asked_settings", "moved_files", "settings_conflicts", "settings_of"]

ABOUT = "COCO-WholeBody 133 points in 3D from --detector and an RTMW3D --pose-model: docs/wholebody.md"
DOCS = "docs/wholebody.md"


def asked_settings(args: argparse.Namespace, estimator: str | None,
                   fetched: Callable[[], tuple[Path, ...]] | None = None) -> dict[str, Any] | None:
    """--detector and --pose-model when --estimator names this family (a resume of its run
    without --estimator is asked so too): checked and recorded with the pose model's 3D head, or
    None. Without --estimator they are the whole-body family's."""
    det, pose = getattr(args, "detector", None), getattr(args, "pose_model", None)
    if estimator != WHOLEBODY3D or (det is None and pose is None):
        return None
    if det is None or pose is None:
        raise OptionError(f"--estimator {WHOLEBODY3D} needs both --detector DET.onnx and "
                          "--pose-model RTMW3D.onnx (docs/wholebody.md, 3D).")
    from phoenix_keypoints.extract.families.wholebody3d.runner import record

    return record(det, pose)
