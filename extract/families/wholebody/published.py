"""rtmlib 0.0.16's published whole-body models by name (its Wholebody modes), as the index
`phoenix-keypoints models` reads (jobs/models.py fetches them, checked against these pins).

The pins. OpenMMLab publishes no checksum for these zips (the 8 hex digits in some names are of
the training checkpoint, not of the zip). The sha256 values below are those that public projects
pinning the same files state (found through a code search, 2026-11; the YOLOX values by several
projects that agree); they could not be checked here (no network). A file no source states a
sha256 for has None: `models fetch` refuses it and says so, rather than trust unchecked bytes.
Where a source also states the zip's sha256, the zip is checked before it is opened. Data only.
"""

from __future__ import annotations

from typing import Any

_YOLOX_TINY = {"path": "rtmposev1/onnx_sdk/yolox_tiny_8xb8-300e_humanart-6f3252f9.zip",
               "input_hw": (416, 416),
               "onnx_sha256": "ceb11c07298f95c50d7c5abeb906d03340c85f23aa79e3e66966e7fb6c307250"}
_YOLOX_M = {"path": "rtmposev1/onnx_sdk/yolox_m_8xb8-300e_humanart-c2c7a14a.zip",
            "input_hw": (640, 640),
            "onnx_sha256": "3dea6513388889f0fff4b77bf7a26013600321b9eb9ceb0e9a400a82572f5f23",
            "zip_sha256": "a000224fd8ba283202bc62d4a5fcdfe353adb9f468777dbac1ea2ada2093adde"}
# TODO(pin): no public source states the sha256 of this zip or of its end2end.onnx; until one is
# pinned here, `models fetch lightweight` refuses (docs/wholebody.md says how to use it by hand).
_RTMW_L_M = {"path": "rtmw/onnx_sdk/rtmw-dw-l-m_simcc-cocktail14_270e-256x192_20231122.zip",
             "input_hw": (256, 192), "onnx_sha256": None}
_RTMW_X_L = {"path": "rtmw/onnx_sdk/rtmw-dw-x-l_simcc-cocktail14_270e-256x192_20231122.zip",
             "input_hw": (256, 192),
             "onnx_sha256": "9a9bc17c13ff0a1e37507f45a037a21bc410cd08374b0e664c57d0080843aa58",
             "zip_sha256": "1e3e77558dfc199129bfff1c583e51b4ee190914de6ae30688243c20163c148c"}
_RTMW_X_L_384 = {"path": "rtmw/onnx_sdk/rtmw-dw-x-l_simcc-cocktail14_270e-384x288_20231122.zip",
                 "input_hw": (384, 288),
                 "onnx_sha256": "bd033156e5104c4f5d2edfe0453e02661e30a2f3da453ec93c8764d561b83054",
                 "zip_sha256": "a87e1af41a0a067776dba7d46e1c21c8f6e9f18e247e0e606718dd1f31e96ffd"}
# rtmlib 0.0.16's Wholebody modes (rtmlib/tools/solution/wholebody.py): a detector, a pose model
PUBLISHED_AT = "https://download.openmmlab.com/mmpose/v1/projects/"  # rtmlib 0.0.16's host
PUBLISHED_MODELS: dict[str, dict[str, dict[str, Any]]] = {
    "lightweight": {"detector": _YOLOX_TINY, "pose": _RTMW_L_M},
    "balanced": {"detector": _YOLOX_M, "pose": _RTMW_X_L},
    "performance": {"detector": _YOLOX_M, "pose": _RTMW_X_L_384},
}
MODELS_ABOUT = "rtmlib's published whole-body models"  # `models --help`
MODELS_HELP = ("the detector and pose model of a named mode fetched with `phoenix-keypoints models "
               "fetch NAME` (lightweight, balanced, performance), instead of --detector and "
               "--pose-model")
