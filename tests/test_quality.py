"""The report's per-video figures, computed for several videos at once, must not leak across the
boundaries between videos: checked on hand-made frame features against a per-video reference. And
the quality report and `show` read the parts, roles and colours from the file's declaration."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phoenix_keypoints.extract.families.holistic import declaration
from phoenix_keypoints.extract.inspect.quality import (
    Rated,
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
    rated = Rated.of(declaration(None))
    figs, timeline = block_figures(feats, np.array([0, 3]), rated, Thresholds())
    assert figs["frames"].tolist() == [3, 3]
    assert figs["face_rate"].tolist() == [1.0, 0.0]
    assert figs["right_hand_gap"].tolist() == [0, 3]
    assert figs["outside_frames"].tolist() == [0, 1]
    assert timeline.tolist() == [11, 11, 11, 1, 33, 1]
    one = {k: v[1].item() for k, v in figs.items()}
    codes, reasons, severity = flags(one, rated, Thresholds())
    assert codes == ["face", "left_hand", "right_hand", "outside"]
    assert severity > 3
    codes, _, _ = flags(one, rated, Thresholds(min_face_rate=0, min_hand_rate=0, max_outside=0.5))
    assert codes == []


def test_strip_indices_include_problem_frames() -> None:
    timeline = np.zeros(100, np.uint8)
    assert strip_indices(timeline) == [0, 20, 40, 59, 79, 99]
    timeline[33] = 16  # a swap
    picks = strip_indices(timeline)
    assert 33 in picks and len(picks) == 6
    assert strip_indices(np.zeros(2, np.uint8)) == [0, 1]


# --- the quality report and its drawing read the declaration of the file ----------------------
# A family of landmark lists made up here (columns, point counts, roles, colours, engine all its
# own): the report rates its regions' columns, measures gaps and swaps on its hands' declared
# wrist, jitter on its body's declared shoulders, and show draws it in its declared colours.
LISTS = "lister"
LIST_PARTS = {"trunk": (5, 4), "mesh": (3, 3), "lh": (2, 3), "rh": (2, 3)}
LIST_COLOURS = {"mesh": (0, 0, 255), "body": (255, 0, 0), "left_hand": (0, 255, 0),
                "right_hand": (255, 0, 255)}


def _lists_declaration():
    import pyarrow as pa

    from phoenix_keypoints.extract.keypoints.estimator import Declaration, QualitySpec
    from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

    schema = pa.schema([*BASE_FIELDS, *(pa.field(c, pa.list_(pa.float32())) for c in LIST_PARTS)])
    return Declaration(
        name=LISTS, parts=LIST_PARTS, schema=schema, title="made-up landmark lists",
        regions={"body": ("trunk", 0, 5), "face": ("mesh", 0, 3), "left_hand": ("lh", 0, 2),
                 "right_hand": ("rh", 0, 2)},
        skeleton={"body": ((1, 2),), "face": ((0, 1), (1, 2)), "left_hand": ((0, 1),),
                  "right_hand": ((0, 1),)},
        colours={"face": LIST_COLOURS["mesh"], "body": LIST_COLOURS["body"],
                 "left_hand": LIST_COLOURS["left_hand"], "right_hand": LIST_COLOURS["right_hand"]},
        legend={"body": "trunk"},
        quality=QualitySpec(engine="The Lister", head=3, shoulders=(1, 2), visibility=3,
                            visible=0.5, wrist=1, thin=("face",), dotted=("left_hand",)))


@pytest.fixture
def lists_family(monkeypatch: pytest.MonkeyPatch):
    """The made-up family, known to the registry as an installed package's would be."""
    import sys
    import types

    from phoenix_keypoints.extract.families import Family
    from phoenix_keypoints.extract.keypoints import estimator

    decl = _lists_declaration()

    class Lists(Family):
        def declaration(self, settings=None):
            return decl

        def declaration_of_schema(self, schema):
            return decl if schema.equals(decl.schema) else None

    module = types.ModuleType("lists_family")
    module.Lists = Lists
    monkeypatch.setitem(sys.modules, "lists_family", module)
    monkeypatch.setitem(estimator.FAMILIES, LISTS, "lists_family:Lists")
    return Lists


def _lists_file(path: Path) -> Path:
    """Two videos of 6 frames, 200 x 100 pixels. Video a: the left hand missing in frames 2-3,
    then its wrist (point 1) lands where the right wrist was (a swap); the shoulders (trunk 1, 2)
    move 2 px a frame. Video b: no hands at all, the mesh never found."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    decl = _lists_declaration()
    rows: dict[str, list] = {f.name: [] for f in decl.schema}
    for video, n in (("a", 6), ("b", 6)):
        for i in range(n):
            trunk = np.full((5, 4), 0.5, np.float32)
            trunk[1:3, 0] = np.array([0.4, 0.6]) + 0.01 * i  # 2 px a frame at width 200
            rh = np.array([[0.2, 0.5, 0], [0.25, 0.5, 0]], np.float32)
            lh = np.array([[0.8, 0.5, 0], [0.75, 0.5, 0]], np.float32)
            if i == 4:
                lh[1, :2] = rh[1, :2] + 0.01  # appears where the right wrist was
            lh_here = video == "a" and i not in (2, 3)
            rows["trunk"].append(trunk.ravel().tolist())
            mesh = [0.3, 0.2, 0, 0.5, 0.2, 0, 0.7, 0.2, 0]  # a line across the top
            rows["mesh"].append(mesh if video == "a" else None)
            rows["lh"].append(lh.ravel().tolist() if lh_here else None)
            rows["rh"].append(rh.ravel().tolist() if video == "a" and i != 4 else None)
            for k, v in (("split", "test"), ("video", video), ("frame", i), ("time_s", None),
                         ("image", f"{video}/{i}.png"), ("width", 200), ("height", 100),
                         ("status", "ok"), ("note", None), ("file_size", None),
                         ("file_mtime_ns", None), ("file_sha256", None)):
                rows[k].append(v)
    pq.write_table(pa.Table.from_pydict(rows, schema=decl.schema), path)
    return path


def test_the_quality_report_and_show_read_the_declaration(lists_family, tmp_path: Path) -> None:
    """Another family's landmark lists go through the quality report and `show` by its declaration
    alone: figures named by its columns, its roles' points, its engine's words, its colours."""
    import cv2
    import pandas as pd
    import pyarrow.parquet as pq

    from phoenix_keypoints.extract.inspect.overlay import write_overlay
    from phoenix_keypoints.extract.inspect.report import ReportInput, write_report
    from phoenix_keypoints.extract.inspect.rows import video_rows

    kp = _lists_file(tmp_path / "keypoints.parquet")
    plan = pd.DataFrame({"split": ["test"] * 3, "video": ["a", "b", "c"],
                         "speaker": ["s1", "s1", "s2"], "problem": [None, None, "not on disk"]})
    info = write_report(ReportInput(kp, "lists", plan), tmp_path / "report")
    assert (info["videos"], info["frames"], info["flagged"]) == (3, 12, 3)
    got = pq.read_table(tmp_path / "report" / "videos.parquet").to_pandas().set_index("video")
    assert [c for c in got.columns if c.endswith(("_rate", "_gap"))] == [
        "trunk_rate", "mesh_rate", "lh_rate", "rh_rate", "lh_gap", "rh_gap"]
    a, b = got.loc["a"], got.loc["b"]
    assert (a["trunk_rate"], a["mesh_rate"], a["lh_rate"], a["rh_rate"]) == (1, 1, 4 / 6, 5 / 6)
    assert (a["lh_gap"], a["rh_gap"], b["lh_gap"], b["rh_gap"]) == (2, 1, 6, 6)
    assert a["swaps"] == 1 and a["jitter_px"] == pytest.approx(2.0, abs=1e-3)
    assert list(b["flags"]) == ["mesh", "lh", "rh"]
    assert "mesh found in 0% of frames" in list(b["reasons"])[0]
    assert got.loc["c", "problem"] == "not on disk" and got.loc["c", "severity"] == 4.0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "where The Lister found the part" in page
    assert "<th>trunk</th><th>mesh</th>" in page and "<th>longest without lh</th>" in page

    rows = video_rows(kp, ["a"])
    n, seen = write_overlay(rows, None, tmp_path / "a.png", scale=1)
    assert (n, seen) == (6, 0)
    sheet = cv2.cvtColor(cv2.imread(str(tmp_path / "a.png")), cv2.COLOR_BGR2RGB)
    frames = sheet[:100].astype(int)  # one row of 6 tiles, above their legend bands
    for colour in LIST_COLOURS.values():  # every region drawn in its declared colour
        assert (np.abs(frames - colour).max(axis=2) <= 30).any(), colour
