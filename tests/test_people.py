"""Every person a family finds exported (issue 55, "what the class gives every family", item 2):
a family that declares `people` (a list column holding every person as the points of a part)
gets a .pose of every person, `export --format pose` and `Keypoints.to_pose()` alike (people =
the most persons in the video, a person a frame lacks masked), and its tensors and report say
whose points they hold (the signer, its parts). Without the declaration nothing changes: one
person. The cases are built: frames of 0, 1 and 3 persons (tests/crowd_family.py), a file of
them written by hand, and one small `run` of that family through the commands.
"""

from __future__ import annotations

import html
import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import crowd_family
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from crowd_family import DECLARATION, POINTS
from helpers import cli_ok, family_env

from phoenix_keypoints.extract.keypoints.estimator import Declaration

pose_format = pytest.importorskip("pose_format")

# persons per frame of the hand-written file: video a meets 0, 1 and 3; video b nobody
FRAMES = {"a": (0, 1, 3, 1), "b": (0, 0)}


def crowd(n: int, t: int) -> np.ndarray:
    """n persons [n, POINTS, 3] of frame t, distinct float32 values; person 2's last point under
    the threshold (absent)."""
    out = np.zeros((n, POINTS, 3), np.float32)
    for p in range(n):
        out[p, :, 0] = np.arange(POINTS) * 1.25 + p + t / 3
        out[p, :, 1] = np.arange(POINTS) * 0.7 + 10 * p + t / 7
        out[p, :, 2] = 0.75 + 0.01 * p
    if n == 3:
        out[2, -1, 2] = 0.25
    return out


def crowd_file(path: Path, decl: Declaration = DECLARATION) -> Path:
    """keypoints.parquet of the crowd family as a run writes it: the signer (person 0) in the
    part, everyone in the list, null where a frame has nobody."""
    rows: dict[str, list] = {f.name: [] for f in decl.schema}
    for video, persons in FRAMES.items():
        for t, n in enumerate(persons):
            people = crowd(n, t)
            rows["crowd"].append(people[0].ravel().tolist() if n else None)
            rows["everyone"].append(people.ravel().tolist() if n else None)
            rows["persons"].append(n)
            for k, v in (("split", "test"), ("video", video), ("frame", t), ("time_s", None),
                         ("image", f"{video}/{t}.png"), ("width", 200), ("height", 100),
                         ("status", "ok"), ("note", None), ("file_size", None),
                         ("file_mtime_ns", None), ("file_sha256", None)):
                rows[k].append(v)
    pq.write_table(pa.Table.from_pydict(rows, schema=decl.schema), path)
    return path


def read_pose(path: Path):
    return pose_format.Pose.read(path.read_bytes())


@pytest.mark.parametrize(("people", "lists", "said"), [
    ({"nobody": "crowd"}, {"everyone": 12}, "'nobody' is not one of its list columns (everyone)"),
    ({"everyone": "face"}, {"everyone": 12}, "'everyone' repeats 'face', which is not one of its"),
    ({"everyone": "crowd"}, {"everyone": 10}, "not 'crowd''s 4 points x 3 values = 12"),
])
def test_a_declaration_says_what_is_wrong_with_its_people(people, lists, said) -> None:
    with pytest.raises(ValueError, match="the crowd declaration's people: ") as e:
        Declaration(name="crowd", parts={"crowd": (4, 3)}, lists=lists, people=people)
    assert said in str(e.value), str(e.value)


def test_people_cover_every_part_or_none() -> None:
    """A .pose person is every part's points: a people list for one part of two is refused."""
    with pytest.raises(ValueError, match="no list column repeats 'hand'"):
        Declaration(name="crowd", parts={"crowd": (4, 3), "hand": (2, 3)},
                    lists={"everyone": 12}, people={"everyone": "crowd"})


def test_the_plugin_check_reports_a_bad_people_declaration() -> None:
    """The plugin check (contract.problems) says it, as it says any declaration that raises."""
    from phoenix_keypoints.extract.keypoints.contract import problems

    class BadCrowd(crowd_family.Crowd):
        def declaration(self, settings=None):
            return replace(DECLARATION, lists={"everyone": 5})

    said = " ".join(problems(BadCrowd()))
    assert "declaration(None) raised ValueError" in said and "'everyone' holds 5 values" in said


def test_the_pose_file_holds_every_person(tmp_path: Path) -> None:
    """[frames, people, points, 2] with people the most a frame of the video holds (3; a video of
    nobody: 1, all masked); each person's x, y and score as the file holds them, float32 exact; a
    person a frame lacks, and a point under the threshold, masked with confidence 0."""
    from phoenix_keypoints.extract.outputs.export import write_declared_pose_files

    keypoints = crowd_file(tmp_path / "keypoints.parquet")
    assert write_declared_pose_files(keypoints, tmp_path / "pose", DECLARATION, 25.0) == 2
    pose = read_pose(tmp_path / "pose" / "test" / "a.pose")
    data, conf = pose.body.data, np.asarray(pose.body.confidence)
    assert data.shape == (4, 3, POINTS, 2) and conf.shape == (4, 3, POINTS)
    assert data.dtype == np.float32
    for t, n in enumerate(FRAMES["a"]):
        people = crowd(n, t)
        for p in range(3):
            here = people[p, :, 2] >= 0.5 if p < n else np.zeros(POINTS, bool)
            assert (np.ma.getmaskarray(data[t, p]).all(axis=-1) == ~here).all(), (t, p)
            assert (conf[t, p][~here] == 0).all()
            if here.any():
                np.testing.assert_array_equal(np.asarray(data[t, p])[here], people[p, here, :2])
                np.testing.assert_array_equal(conf[t, p][here], people[p, here, 2])
    assert int((conf[2] > 0).sum()) == 3 * POINTS - 1  # the third person's last point absent
    nobody = read_pose(tmp_path / "pose" / "test" / "b.pose").body
    assert nobody.data.shape == (2, 1, POINTS, 2) and np.ma.getmaskarray(nobody.data).all()


def test_without_people_the_pose_file_holds_one_person(tmp_path: Path) -> None:
    """The same file read by a declaration without `people`: the signer (its part) alone, as
    before the field existed."""
    from phoenix_keypoints.extract.outputs.export import write_declared_pose_files

    one = replace(DECLARATION, people={})
    keypoints = crowd_file(tmp_path / "keypoints.parquet", one)
    write_declared_pose_files(keypoints, tmp_path / "pose", one, 25.0)
    body = read_pose(tmp_path / "pose" / "test" / "a.pose").body
    assert body.data.shape == (4, 1, POINTS, 2)
    for t, n in enumerate(FRAMES["a"]):
        if n:
            np.testing.assert_array_equal(np.asarray(body.data[t, 0]), crowd(n, t)[0, :, :2])
        else:
            assert np.ma.getmaskarray(body.data[t, 0]).all()


@pytest.fixture
def crowd_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crowd family known to the registry in this process, as an installed package's is."""
    from phoenix_keypoints.extract.keypoints import estimator

    monkeypatch.setitem(sys.modules, "crowd_family", crowd_family)
    monkeypatch.setitem(estimator.FAMILIES, "crowd", "crowd_family:Crowd")


def test_to_pose_of_a_clip_holds_every_person(crowd_known, tmp_path: Path) -> None:
    """Keypoints.to_pose() of the same frames (the arrays extract_keypoints gives: the list
    [T, most items, values], NaN past a frame's persons) is the exported file, byte for byte."""
    from phoenix_keypoints.extract.clip import Keypoints, _padded
    from phoenix_keypoints.extract.outputs.export import write_declared_pose_files

    write_declared_pose_files(crowd_file(tmp_path / "keypoints.parquet"), tmp_path / "pose",
                              DECLARATION, 25.0)
    persons = FRAMES["a"]
    signer = np.full((len(persons), POINTS, 3), np.nan, np.float32)
    for t, n in enumerate(persons):
        if n:
            signer[t] = crowd(n, t)[0]
    everyone = _padded([crowd(n, t).ravel() if n else None for t, n in enumerate(persons)],
                       POINTS * 3)
    kp = Keypoints({"crowd": signer, "everyone": everyone}, 25.0, "crowd",
                   ["ok"] * len(persons), [f"a/{t}.png" for t in range(len(persons))],
                   [200] * len(persons), [100] * len(persons), [None] * len(persons), DECLARATION)
    buf = io.BytesIO()
    kp.to_pose().write(buf)
    assert buf.getvalue() == (tmp_path / "pose" / "test" / "a.pose").read_bytes()


def test_a_report_and_tensors_of_a_declared_family_say_whose_points(crowd_known,
                                                                    tmp_path: Path) -> None:
    """The plain report's page and figures, and the tensor set's points.json, say the parts are
    the signer's and where everyone is (the most persons a frame holds: 3)."""
    from phoenix_keypoints.extract.inspect.plain import plain_declaration, write_plain_report
    from phoenix_keypoints.extract.outputs.declared import points_meta

    keypoints = crowd_file(tmp_path / "keypoints.parquet")
    said = ("the signer (the family's parts: crowd); every person, at most 3 a frame, in list "
            "column everyone (.pose holds them all)")
    info = write_plain_report(plain_declaration(DECLARATION), keypoints, "t", tmp_path / "r")
    assert info["person"] == said
    assert html.escape(f"Person: {said}.") in (tmp_path / "r" / "index.html").read_text()
    videos = pq.read_table(tmp_path / "r" / "videos.parquet").to_pandas().set_index("video")
    assert videos["people"].to_dict() == {"a": 3, "b": 0}
    assert points_meta(DECLARATION, {"test": 6}, {"test": 2}, keypoints)["person"] == said
    one = replace(DECLARATION, people={})
    assert "person" not in points_meta(one, {"test": 6}, {"test": 2}, keypoints)
    assert "person" not in write_plain_report(plain_declaration(one), keypoints, "t",
                                              tmp_path / "r1")


# --- one small run of the family, through the commands ---------------------------------------
@pytest.fixture(scope="module")
def crowd_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return family_env(tmp_path_factory.mktemp("site"), "crowdfamily", "crowd = crowd_family:Crowd")


def test_a_run_of_a_multi_person_family_exports_every_person(
        sample_root: Path, crowd_env: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`run`, then `export --format pose`: every person of each frame, as the runner found them
    (crowd_family.persons_of, from the frame's pixels); `tensors` and `report` name the person;
    extract_keypoints(...).to_pose() is the exported file."""
    from phoenix_keypoints import extract_keypoints
    from phoenix_keypoints.extract.keypoints.estimator import names

    out = tmp_path / "run"
    said = "person:    the signer (the family's parts: crowd); every person, at most 3 a frame"
    assert said in cli_ok(["run", "--dataset", sample_root, "--out", out, "--estimator", "crowd",
                           "--limit-videos", "1"], crowd_env)
    t = pq.read_table(out / "keypoints.parquet").to_pandas()
    split, video = t[t["persons"] == 3].iloc[0][["split", "video"]]  # a video with 3 persons
    t = t[(t["split"] == split) & (t["video"] == video)]
    persons = t["persons"].tolist()
    assert {0, 1, 3} <= set(persons), persons  # the case: frames of 0, 1 and 3 persons
    cli_ok(["export", "--out", out, "--format", "pose", "--to", tmp_path / "poses"], crowd_env)
    written = tmp_path / "poses" / split / f"{video}.pose"
    body = read_pose(written).body
    assert body.data.shape == (len(persons), 3, POINTS, 2)
    conf = np.asarray(body.confidence)
    for i, row in enumerate(t["everyone"]):
        people = np.asarray([] if row is None else row, np.float32).reshape(-1, POINTS, 3)
        assert (conf[i, len(people):] == 0).all()
        for p, person in enumerate(people):
            here = person[:, 2] >= 0.5
            np.testing.assert_array_equal(np.asarray(body.data[i, p])[here], person[here, :2])
            assert (conf[i, p][~here] == 0).all()
    assert said in cli_ok(["tensors", "--out", out, "--fill", "interpolate", "--name", "f"],
                          crowd_env)
    record = json.loads((out / "run.json").read_text())["tensors"]["f"]
    assert record["person"].startswith("the signer (the family's parts: crowd)")
    assert json.loads((out / "tensors" / "points.json").read_text())["person"] == record["person"]
    assert said in cli_ok(["report", "--out", out], crowd_env)

    monkeypatch.syspath_prepend(crowd_env["PYTHONPATH"].split(":")[0])
    names(rescan=True)
    folder = next(p.parent for p in sorted(sample_root.rglob("*.png")) if p.parent.name == video)
    kp = extract_keypoints(folder, estimator="crowd")
    buf = io.BytesIO()
    kp.to_pose().write(buf)
    assert buf.getvalue() == written.read_bytes()
