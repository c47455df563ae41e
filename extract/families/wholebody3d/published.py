"""rtmlib 0.0.16's published 3D whole-body models by name (its Wholebody3d solution,
rtmlib/tools/solution/wholebody3d.py: one mode, balanced), as the index `phoenix-keypoints models`
reads (jobs/models.py): the whole-body family's YOLOX-m detector and the RTMW3D-x pose model, a
bare .onnx that rtmlib fetches from a Hugging Face repository (not a zip).

The pins, as the whole-body family's published.py says them. No public source states a sha256 for
the RTMW3D-x file (found through a code search, 2026-11: projects that fetch it pin none), so
`models fetch wholebody3d-balanced` refuses, saying so, until one is pinned here; docs/wholebody.md
says how to use the file by hand. Data only.
"""

from __future__ import annotations

from typing import Any

from phoenix_keypoints.extract.families.wholebody.published import _YOLOX_M, PUBLISHED_AT

__all__ = ["MODELS_ABOUT", "MODELS_DOCS", "PUBLISHED_AT", "PUBLISHED_MODELS"]

# TODO(pin): no public source states the sha256 of this file.
_RTMW3D_X = {"path": "Soykaf/RTMW3D-x/resolve/main/onnx/"
                     "rtmw3d-x_8xb64_cocktail14-384x288-b0a0eab7_20240626.onnx",
             "at": "https://huggingface.co/", "input_hw": (384, 288), "onnx_sha256": None}

PUBLISHED_MODELS: dict[str, dict[str, Any]] = {
    "wholebody3d-balanced": {"detector": _YOLOX_M, "pose": _RTMW3D_X,
                             "about": "rtmlib Wholebody3d, mode balanced"},
}
MODELS_ABOUT = "rtmlib's published 3D model"  # `models --help`
MODELS_DOCS = "docs/wholebody.md"  # where a refusal sends the user
