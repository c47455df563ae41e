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
    """--detector and --pose-model (or --models NAME) when --estimator names this family (a
    resume of its run without --estimator is asked so too; --models of this family's sets it):
    checked and recorded with the pose model's 3D head, or None. Without --estimator they are the
    whole-body family's."""
    det, pose = getattr(args, "detector", None), getattr(args, "pose_model", None)
    models = estimator == WHOLEBODY3D and getattr(args, "models", None) is not None
    if models and (det is not None or pose is not None):
        raise OptionError("--models NAME names the detector and pose model: give it without "
                          "--detector and --pose-model.")
    if not models and (estimator != WHOLEBODY3D or (det is None and pose is None)):
        return None
    if not models and (det is None or pose is None):
        raise OptionError(f"--estimator {WHOLEBODY3D} needs both --detector DET.onnx and "
                          "--pose-model RTMW3D.onnx (docs/wholebody.md, 3D).")
    from phoenix_keypoints.extract.families.wholebody3d.runner import record

    if models:  # --models NAME: the files its fetch checked (jobs/models.py)
        assert fetched is not None, "--models is added with its cache (jobs/models.py)"
        return record(*fetched())
    return record(det, pose)
