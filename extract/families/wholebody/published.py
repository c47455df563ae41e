"""rtmlib 0.0.16's published 2D models by name, as the index `phoenix-keypoints models` reads
(jobs/models.py fetches them, checked against these pins): each mode of its Wholebody, Body,
BodyWithFeet and Hand solutions (rtmlib/tools/solution/*.py), a detector and a pose model, with
the point set and detector kind a run of it reads them as. (Body's RTMO modes, one model without a
detector, are not a top-down pair: left out.) The 3D family publishes rtmlib's Wholebody3d.

The pins. OpenMMLab publishes no checksum for these zips (the 8 hex digits in some names are of
the training checkpoint, not of the zip). The sha256 values below are those that public projects
pinning the same files state (found through a code search, 2026-11; how many projects agree is
said beside each); they could not be checked here (no network). A file no source states a
sha256 for has None: `models fetch` refuses its name and says so, rather than trust unchecked
bytes. Where a source also states the zip's sha256, the zip is checked before it is opened. Data
only.
"""

from __future__ import annotations

from typing import Any

_SDK = "rtmposev1/onnx_sdk/"
# detectors (YOLOX, HumanArt; RTMDet-nano for hands)
_YOLOX_TINY = {"path": _SDK + "yolox_tiny_8xb8-300e_humanart-6f3252f9.zip",  # 5+ projects
               "input_hw": (416, 416),
               "onnx_sha256": "ceb11c07298f95c50d7c5abeb906d03340c85f23aa79e3e66966e7fb6c307250"}
_YOLOX_M = {"path": _SDK + "yolox_m_8xb8-300e_humanart-c2c7a14a.zip",  # 3+ projects
            "input_hw": (640, 640),
            "onnx_sha256": "3dea6513388889f0fff4b77bf7a26013600321b9eb9ceb0e9a400a82572f5f23",
            "zip_sha256": "a000224fd8ba283202bc62d4a5fcdfe353adb9f468777dbac1ea2ada2093adde"}
_YOLOX_X = {"path": _SDK + "yolox_x_8xb8-300e_humanart-a39d44ed.zip",  # 2 projects (zip: 1)
            "input_hw": (640, 640),
            "onnx_sha256": "8e9ea96a176bd48501eaaa77216e49ee30794d2f8ba80c7b9862beca4ea972da",
            "zip_sha256": "1c6fccc5cd450eb563b1fe4eba13c9bdf9ea8263b6ae1cb3ada765aa4ebea2c7"}
_RTMDET_HAND = {"path": _SDK + "rtmdet_nano_8xb32-300e_hand-267f9c8f.zip",  # 1 project, 2 files
                "input_hw": (320, 320),
                "onnx_sha256": "568d3ea97a5b142488366b67e036b6a5cb0a1fef9087a710cb8e66b6979fbac2",
                "zip_sha256": "9c0370a43c02b2fe42b4382aba7383d97cfa3ed35623b655cac4f0c25cfde402"}
# whole-body pose models (RTMW, COCO-WholeBody 133)
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
# body pose models (RTMPose, body7: COCO 17 points)
_BODY_S = {"path": _SDK + "rtmpose-s_simcc-body7_pt-body7_420e-256x192-acd4a1ef_20230504.zip",
           "input_hw": (256, 192),  # 5+ projects
           "onnx_sha256": "9aeb635b83f86aea45cf45d85798f7eba1a162de8e0d721c44e54fe5eebaf47d"}
_BODY_M = {"path": _SDK + "rtmpose-m_simcc-body7_pt-body7_420e-256x192-e48f03d0_20230504.zip",
           "input_hw": (256, 192),  # 3 projects
           "onnx_sha256": "5c0a4bf67953e6d2ac43ce15e77dc9d5d354ae18430a47d2c5963a7bc5683e3c"}
_BODY_X = {"path": _SDK + "rtmpose-x_simcc-body7_pt-body7_700e-384x288-71d7b7e9_20230629.zip",
           "input_hw": (384, 288),  # 2 projects
           "onnx_sha256": "df0c0fa91e9870b1515dcaff741fd76cc753dcfb12786862f61b243bae81cd52"}
# body with feet (RTMPose, Halpe 26 points)
# TODO(pin): no public source states a sha256 for the s and x Halpe26 files (only for m): until one
# is pinned, `models fetch body-with-feet-lightweight` and `-performance` refuse.
_FEET_S = {"path": _SDK + "rtmpose-s_simcc-body7_pt-body7-halpe26_700e-256x192-7f134165_20230605.zip",
           "input_hw": (256, 192), "onnx_sha256": None}
_FEET_M = {"path": _SDK + "rtmpose-m_simcc-body7_pt-body7-halpe26_700e-256x192-4d3e73dd_20230605.zip",
           "input_hw": (256, 192),  # 6+ projects (zip: 2+)
           "onnx_sha256": "26f3a19e61304a600dfb82d1001d41d24343b89fc70a33ffc84657e0b0bf2ecf",
           "zip_sha256": "55b81170e236040b59fc792ad0a8315301ac4c079a3bdb1095d838aad3088d18"}
_FEET_X = {"path": _SDK + "rtmpose-x_simcc-body7_pt-body7-halpe26_700e-384x288-7fb6e239_20230606.zip",
           "input_hw": (384, 288), "onnx_sha256": None}
# TODO(pin): no public source states a sha256 for rtmlib's hand pose model (one states only its
# first 8 hex digits): until one is pinned, `models fetch hand-lightweight` refuses.
_HAND_M = {"path": _SDK + "rtmpose-m_simcc-hand5_pt-aic-coco_210e-256x256-74fb594_20230320.zip",
           "input_hw": (256, 256), "onnx_sha256": None}

PUBLISHED_AT = "https://download.openmmlab.com/mmpose/v1/projects/"  # rtmlib 0.0.16's host
_WB, _BODY, _FEET = "coco-wholebody", "coco", "halpe26"  # point sets (layouts.py)
PUBLISHED_MODELS: dict[str, dict[str, Any]] = {
    # Wholebody (rtmlib/tools/solution/wholebody.py): the names as they always were
    "lightweight": {"detector": _YOLOX_TINY, "pose": _RTMW_L_M, "point_set": _WB,
                    "about": "rtmlib Wholebody, mode lightweight"},
    "balanced": {"detector": _YOLOX_M, "pose": _RTMW_X_L, "point_set": _WB,
                 "about": "rtmlib Wholebody, mode balanced"},
    "performance": {"detector": _YOLOX_M, "pose": _RTMW_X_L_384, "point_set": _WB,
                    "about": "rtmlib Wholebody, mode performance"},
    # Body (body.py, MODE): YOLOX + RTMPose body7, COCO 17 points
    "body-lightweight": {"detector": _YOLOX_TINY, "pose": _BODY_S, "point_set": _BODY,
                         "about": "rtmlib Body, mode lightweight"},
    "body-balanced": {"detector": _YOLOX_M, "pose": _BODY_M, "point_set": _BODY,
                      "about": "rtmlib Body, mode balanced"},
    "body-performance": {"detector": _YOLOX_X, "pose": _BODY_X, "point_set": _BODY,
                         "about": "rtmlib Body, mode performance"},
    # BodyWithFeet (body_with_feet.py): YOLOX + RTMPose Halpe26
    "body-with-feet-lightweight": {"detector": _YOLOX_TINY, "pose": _FEET_S, "point_set": _FEET,
                                   "about": "rtmlib BodyWithFeet, mode lightweight"},
    "body-with-feet-balanced": {"detector": _YOLOX_M, "pose": _FEET_M, "point_set": _FEET,
                                "about": "rtmlib BodyWithFeet, mode balanced"},
    "body-with-feet-performance": {"detector": _YOLOX_X, "pose": _FEET_X, "point_set": _FEET,
                                   "about": "rtmlib BodyWithFeet, mode performance"},
    # Hand (hand.py: its one mode): RTMDet-nano hand detector + RTMPose hand5, 21 points
    "hand-lightweight": {"detector": _RTMDET_HAND, "pose": _HAND_M, "point_set": "hand21",
                         "detector_kind": "rtmdet", "about": "rtmlib Hand, mode lightweight"},
}
MODELS_ABOUT = "rtmlib's published 2D models"  # `models --help`
MODELS_DOCS = "docs/wholebody.md"  # where a refusal sends the user
