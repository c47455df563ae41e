"""The openpose25 estimator: frames through the user's model in batches (the declaration says
`batches`, so the tool gives --batch-size frames a call). No state between frames: a batch gives
each frame what it gives alone, so the output is the same for any --batch-size."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.keypoints.estimator import RUNTIME, runtime
from phoenix_keypoints.extract.keypoints.model_calls import bounded, run_options
from phoenix_openpose25.declaration import FOUND, NAME, SCORE_THRESHOLD, declaration
from phoenix_openpose25.model import ADVICE, FLAG, answer_problem, input_size, session

BAD_OUTPUT = "bad_openpose25_output"  # a frame's status where the model's answer is nonsense


class OpenPose25Estimator:
    """One per worker process (open_estimator): the model loaded once, run on batches."""

    def __init__(self, settings: dict[str, Any], num_threads: int | None = 1) -> None:
        run = runtime() | settings.get(RUNTIME, {})  # --batch-size, --device: not recorded
        self.settings = {k: v for k, v in settings.items() if k != RUNTIME}
        self.declaration = declaration(self.settings)
        self.batch_size = int(run["batch_size"])
        rec = self.settings["model"]
        self._session = session(rec, num_threads)
        self._input = self._session.get_inputs()[0].name
        self.height, self.width = input_size(self._session, rec["path"])

    def start_video(self) -> None:
        pass  # nothing carries from one frame to the next

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        return self.process_batch([rgb])[0]

    def process_batch(self, rgbs: list[np.ndarray]) -> list[dict[str, Any]]:
        """Each frame's points (x, y scaled from the model's input to the frame), or, where the
        model answers nonsense, each frame's status and note (no points)."""
        x = np.stack([cv2.resize(rgb, (self.width, self.height), interpolation=cv2.INTER_AREA)
                      for rgb in rgbs]).astype(np.float32).transpose(0, 3, 1, 2) / 255.0
        # under the tool's watchdog: --model-deadline and --model-memory per frame of the call
        out = bounded(lambda: self._session.run(None, {self._input: x}, run_options()), FLAG,
                      self.settings["model"]["path"], len(x), advice=ADVICE)[0]
        why = answer_problem(out, len(rgbs))
        if why:
            return [{"status": BAD_OUTPUT, "note": why} for _ in rgbs]
        found = []
        for rgb, points in zip(rgbs, out.astype(np.float32), strict=True):
            points = points.copy()
            points[:, 0] *= rgb.shape[1] / self.width
            points[:, 1] *= rgb.shape[0] / self.height
            found.append({NAME: points.reshape(-1),
                          FOUND: int((points[:, 2] >= SCORE_THRESHOLD).sum())})
        return found

    def blame(self, status: str) -> str:
        """What is at fault when the first frames all fail alike (the run stops, exit 2)."""
        return f"{FLAG} {self.settings['model']['path']}"

    def close(self) -> None:
        self._session = None
