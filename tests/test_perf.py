"""The speed-ups keep the numbers: landmark bytes read in one view, floats stored without dictionaries.

Speed itself is shown by scripts/bench*.py, not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from mediapipe.framework.formats import landmark_pb2

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.families.holistic.points import PARTS
from phoenix_keypoints.extract.families.holistic.runner import (
    Extractor,
    HolisticOptions,
    _points_from_attributes,
    _points_from_bytes,
)
from phoenix_keypoints.extract.keypoints.frames import read_frame


def _compare_parts(root: Path) -> dict[str, int]:
    """Every part MediaPipe finds on the dataset's frames: bytes path == attribute path, bit for bit."""
    found = dict.fromkeys(PARTS, 0)
    with Extractor(HolisticOptions()) as ex:
        for v in discover(root).videos:
            ex.start_video()
            for name in v.files:
                rgb = read_frame(root / v.folder / name)[0]
                if rgb is None:
                    continue
                results = ex._graph.process(rgb)
                for part, (n, c) in PARTS.items():
                    lm = getattr(results, f"{part}_landmarks")
                    if lm is None:
                        continue
                    fast = _points_from_bytes(lm, n, c)
                    assert fast is not None, f"{part}: layout not recognised"
                    slow = _points_from_attributes(lm, c)
                    assert fast.dtype == np.float32 and fast.shape == (n * c,)
                    assert np.array_equal(fast.view(np.uint32), slow.view(np.uint32)), part
                    found[part] += 1
    return found


def test_landmark_bytes_match_attributes_embedded(sample_root: Path) -> None:
    found = _compare_parts(sample_root)
    assert found["pose"] > 0 and found["face"] > 0, found


def test_landmark_bytes_match_attributes_hands(shared_sample: Path) -> None:
    found = _compare_parts(shared_sample)
    assert found["left_hand"] + found["right_hand"] > 0, found


def test_landmark_bytes_refuse_other_layouts() -> None:
    """A record without z, or one with `presence` set, is not read from bytes: attributes instead."""
    lm = landmark_pb2.NormalizedLandmarkList()
    for i in range(21):
        p = lm.landmark.add(x=0.1 * i, y=0.5, z=-0.25)
        if i == 7:
            p.ClearField("z")
    assert _points_from_bytes(lm, 21, 3) is None
    slow = _points_from_attributes(lm, 3)
    assert slow[7 * 3 + 2] == 0.0 and slow[3] == np.float32(0.1)

    pose = landmark_pb2.NormalizedLandmarkList()
    for _ in range(33):
        pose.landmark.add(x=0.5, y=0.5, z=0.0, visibility=0.9, presence=0.8)
    assert _points_from_bytes(pose, 33, 4) is None
    assert _points_from_bytes(pose, 32, 4) is None  # another count is never guessed at


@pytest.mark.parametrize("column", ["pose", "face"])
def test_parts_skip_dictionary_for_floats(clean_run: Path, column: str) -> None:
    """The merged file's landmark columns are plain (no dictionary), strings keep theirs."""
    md = pq.ParquetFile(clean_run / "keypoints.parquet").metadata
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    col = md.row_group(0).column(names.index(f"{column}.list.element"))
    assert "BYTE_STREAM_SPLIT" in col.encodings and "PLAIN_DICTIONARY" not in col.encodings
    assert not col.has_dictionary_page
    video = md.row_group(0).column(names.index("video"))
    assert video.has_dictionary_page
