"""The toy family (tests/toy_family.py) as a third party might write it from docs/families.md:
its module imports onnxruntime at once and its estimator makes a session ($ORT_TOY_MODEL), with
nothing about telemetry (issue 52 item 7: the tool turns it off before any family loads)."""

from __future__ import annotations

import os
from typing import Any

import onnxruntime
import toy_family


class OrtToy(toy_family.Toy):
    """The toy family whose estimator opens an onnxruntime session first."""

    def open_estimator(self, settings: dict[str, Any], num_threads: int | None = 1) -> Any:
        onnxruntime.InferenceSession(os.environ["ORT_TOY_MODEL"],
                                     providers=["CPUExecutionProvider"])
        return toy_family.open_estimator(settings, num_threads)
