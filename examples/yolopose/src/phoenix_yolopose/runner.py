"""The yolopose estimator: a frame at a time through the user's batch-1 model (the declaration
does not say `batches`), each answer decoded in numpy (decode.py). No state between frames."""

from __future__ import annotations

from typing import Any

import numpy as np

from phoenix_keypoints.extract.keypoints.model_calls import bounded, run_options
from phoenix_yolopose.declaration import BOXES, DECLARATION, NAME, PEOPLE, PERSONS
from phoenix_yolopose.decode import anchors, letterbox, persons, signer
from phoenix_yolopose.model import ADVICE, FLAG, answer_problem, input_size, session

BAD_OUTPUT = "bad_yolopose_output"  # a frame's status where the model's answer is nonsense


class YoloPoseEstimator:
    """One per worker process (open_estimator): the model loaded once."""

    declaration = DECLARATION

    def __init__(self, settings: dict[str, Any], num_threads: int | None = 1) -> None:
        self.settings = dict(settings)
        rec = self.settings["model"]
        self._session = session(rec, num_threads)
        self._input = self._session.get_inputs()[0].name
        self.height, self.width = input_size(self._session, rec["path"])
        self.anchors = anchors(self.height, self.width)

    def start_video(self) -> None:
        pass  # nothing carries from one frame to the next

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        """The frame's signer (its landmark column), everyone and their boxes (its list columns),
        how many; or, where the model answers nonsense, the frame's status and note."""
        x, scale, pad = letterbox(rgb, self.height, self.width)
        out = bounded(lambda: self._session.run(None, {self._input: x}, run_options()), FLAG,
                      self.settings["model"]["path"], 1, advice=ADVICE)[0]
        why = answer_problem(out, self.anchors)
        if why:
            return {"status": BAD_OUTPUT, "note": why}
        people, boxes = persons(out[0].astype(np.float32), scale, pad)
        who = signer(boxes)
        if who is None:
            return {NAME: None, PEOPLE: None, BOXES: None, PERSONS: 0}
        order = [who, *(i for i in range(len(people)) if i != who)]  # the signer first (.pose's
        # person 0), then the others in score order
        return {NAME: people[who].reshape(-1), PEOPLE: people[order].reshape(-1),
                BOXES: boxes[order].reshape(-1), PERSONS: len(people)}

    def blame(self, status: str) -> str:
        """What is at fault when the first frames all fail alike (the run stops, exit 2)."""
        return f"{FLAG} {self.settings['model']['path']}"

    def close(self) -> None:
        self._session = None
