"""The report's per-video figures, computed for several videos at once, must not leak across the
boundaries between videos: checked on hand-made frame features against a per-video reference."""

from __future__ import annotations

import numpy as np

from phoenix_keypoints.extract.inspect.quality import (
    Thresholds,
    block_figures,
    flags,
    jitters,
    longest_gaps,
    swap_frames,
)
from phoenix_keypoints.extract.inspect.report import strip_indices


def test_longest_gaps_stop_at_video_boundaries() -> None:
    present = np.array([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0], bool)
    starts = np.array([0, 5, 8])  # videos: [1 0 0 1 0] [0 0 0] [1 1 0]
    assert longest_gaps(present, starts).tolist() == [2, 3, 1]
    assert longest_gaps(np.ones(4, bool), np.array([0, 2])).tolist() == [0, 0]
    assert longest_gaps(np.zeros(4, bool), np.array([0])).tolist() == [4]


def test_swap_frames() -> None:
    nan = [np.nan, np.nan]
    # the right hand (at x=100) is labelled left in frame 2, and right again in frame 3
    left = np.array([nan, nan, [101, 50], nan], np.float32)
    right = np.array([[100, 50], [100, 50], nan, [102, 50]], np.float32)
    got = swap_frames(left, right, np.array([0]), jump=30, radius=10)
    assert got.tolist() == [False, False, True, True]
    # both hands held together, moving slowly: no swap
    left = np.array([[100, 50], [101, 50], [102, 50]], np.float32)
    right = np.array([[105, 50], [106, 50], [107, 50]], np.float32)
    assert not swap_frames(left, right, np.array([0]), 30, 10).any()
    # the same relabelling across a boundary between two videos is not a swap
    left = np.array([nan, [101, 50]], np.float32)
    right = np.array([[100, 50], nan], np.float32)
    assert not swap_frames(left, right, np.array([0, 1]), 30, 10).any()


def test_jitters_are_per_video_medians() -> None:
    sh = np.zeros((7, 2, 2), np.float32)
    sh[:, :, 0] = np.array([0.0, 1.0, 3.0, 10.0, 0.0, 2.0, 4.0])[:, None]  # both shoulders' x
    # video 1 moves 1, 2, 7 (median 2); video 2 moves 2, 2; nothing crosses the boundary
    assert jitters(sh, np.array([0, 4])).tolist() == [2.0, 2.0]
    sh[5] = np.nan  # no visible shoulders in frame 5: its two moves are dropped
    got = jitters(sh, np.array([0, 4, 6]))  # video 3 is one frame: no move at all
    assert got[0] == 2.0 and np.isnan(got[1]) and np.isnan(got[2])


def test_block_figures_and_flags() -> None:
    n = 6
    feats = {
        "present": np.array([[1, 1, 0, 1]] * 3 + [[1, 0, 0, 0]] * 3, bool),
        "wrists": np.full((n, 2, 2), np.nan, np.float32),
        "shoulders": np.zeros((n, 2, 2), np.float32),
        "outside": np.array([0, 0, 0, 0, 1, 0], bool),
        "not_ok": np.zeros(n, bool),
        "status": np.full(n, "", object),
    }
    figs, timeline = block_figures(feats, np.array([0, 3]), Thresholds())
    assert figs["frames"].tolist() == [3, 3]
    assert figs["face_rate"].tolist() == [1.0, 0.0]
    assert figs["right_hand_gap"].tolist() == [0, 3]
    assert figs["outside_frames"].tolist() == [0, 1]
    assert timeline.tolist() == [11, 11, 11, 1, 33, 1]
    one = {k: v[1].item() for k, v in figs.items()}
    codes, reasons, severity = flags(one, Thresholds())
    assert codes == ["face", "left_hand", "right_hand", "outside"]
    assert severity > 3
    codes, _, _ = flags(one, Thresholds(min_face_rate=0, min_hand_rate=0, max_outside=0.5))
    assert codes == []


def test_strip_indices_include_problem_frames() -> None:
    timeline = np.zeros(100, np.uint8)
    assert strip_indices(timeline) == [0, 20, 40, 59, 79, 99]
    timeline[33] = 16  # a swap
    picks = strip_indices(timeline)
    assert 33 in picks and len(picks) == 6
    assert strip_indices(np.zeros(2, np.uint8)) == [0, 1]
