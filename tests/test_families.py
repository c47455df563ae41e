"""A keypoint family is data (issue 38): one declaration every output reads, one package per
family, found through a registry; no module outside a family's own names that family.

The proof: tests/toy_family.py, a third family written in the tests only, made known as an
installed package makes a family known (an entry point), goes through run, resume, merge, tensors,
report, show, diff, verify, status, the .pose export and extract_keypoints without any file
outside the tests knowing it.
"""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import toy_family
from helpers import REPO, assert_no_traceback, cli_ok, copy_dataset, family_env, run_cli

from phoenix_keypoints.extract.keypoints.estimator import FAMILIES, family


def family_names() -> dict[str, set[str]]:
    """family -> what names it: its name, its package, the constants its declaration defines."""
    out = {}
    for name, spec in FAMILIES.items():
        module = spec.partition(":")[0]  # package:Class
        if not module.startswith("phoenix_keypoints.extract.families."):
            continue
        decl = REPO / module.removeprefix("phoenix_keypoints.").replace(".", "/") / "declaration.py"
        consts = {t.id for n in ast.parse(decl.read_text()).body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and t.id.isupper()}
        out[name] = {name, module} | {c for c in consts if name.upper() in c}
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (prose may name a family: "MediaPipe Holistic's points")."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, kinds) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _identifiers(node: ast.AST) -> list[str]:
    """The names a node spells: a variable, an attribute, a parameter, a keyword, a definition,
    an import."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg or ""]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return []


def naming(path: Path, name: str, words: set[str]) -> list[int]:
    """Lines of a module that name family `name`: an identifier holding its name in any case
    (`HolisticOptions`, `info.options.wholebody`, `HOLISTIC`) or one of its constants; a string
    (not a docstring) holding its name as a word ('holistic', 'pose-format-holistic',
    'wholebody: a YOLOX ...') or its package. A link to its page in docs/ is prose, not a switch."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])")
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = re.sub(rf"docs/{re.escape(name)}\.md", "", node.value)
            hit = bool(word.search(text)) or any(w in text for w in words if "." in w)
        else:
            hit = any(name in ident.lower() or ident in words for ident in _identifiers(node))
        if hit:
            lines.append(node.lineno)
    return lines


def _built_on(package: Path, module: str) -> bool:
    """Whether a family's package imports family `module`'s (so it may name the family)."""
    imports = re.compile(rf"^from {re.escape(module)}(\.\w+)* import", re.M)
    return any(imports.search(f.read_text()) for f in package.rglob("*.py"))


def test_no_module_outside_a_family_names_it() -> None:
    """A family's name, package and constants appear only in its package, a family's package
    built on it (one that imports it: the 3D whole-body family imports the whole-body family's
    detector, crop and flags) and the registry (which names the families): the command line,
    run.json, the parts, the exports and the report read what a family declares."""
    registry = REPO / "extract/keypoints/estimator.py"
    families = REPO / "extract/families"
    offenders = {}
    for name, words in family_names().items():
        for path in sorted([*(REPO / "extract").rglob("*.py"), *(REPO / "jobs").rglob("*.py")]):
            package = next((p for p in path.parents if p.parent == families), None)
            if path == registry or package is not None and (
                    package.name == name or _built_on(package, FAMILIES[name].partition(":")[0])):
                continue
            lines = naming(path, name, words)
            if lines:
                offenders.setdefault(path.relative_to(REPO).as_posix(), []).append((name, lines))
    assert not offenders, offenders


def test_the_naming_check_finds_what_names_a_family(tmp_path: Path) -> None:
    """The check above is not blind: each way a module can name a family is found."""
    words = family_names()["holistic"]
    named = ["x = 'holistic'", "x = 'pose-format-holistic'", "x = f'holistic-{n}'",
             "from phoenix_keypoints.extract.families.holistic.runner import HolisticOptions",
             "def f(o):\n    return o.holistic", "HOLISTIC_COMPONENTS = {}",
             "x = 'phoenix_keypoints.extract.families.holistic'"]
    not_named = ["x = 'see docs/holistic.md'", "x = 'MediaPipe Holistic'",
                 "def f():\n    'the holistic graph'"]
    path = tmp_path / "m.py"
    for source in named + not_named:
        path.write_text(source + "\n")
        assert bool(naming(path, "holistic", words)) == (source in named), source


# --- the toy family, in real processes ---------------------------------------------------------------
@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An entry point of group phoenix_keypoints.families naming tests/toy_family.py, as an
    installed package would declare it: on PYTHONPATH for the command line and its workers."""
    return family_env(tmp_path_factory.mktemp("site"), "toyfamily", "toy = toy_family:Toy")


ok = cli_ok


@pytest.fixture(scope="module")
def toy_run(sample_root: Path, toy_env: dict[str, str], tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy") / "run"
    ok(["run", "--dataset", sample_root, "--out", out, "--estimator", "toy", "--chunk-frames", "20",
        "--workers", "2"], toy_env)
    return out


def video_values(run: Path) -> tuple[str, np.ndarray]:
    t = pq.read_table(run / "keypoints.parquet")
    video = t["video"][0].as_py()
    rows = t.filter(pc.equal(t["video"], video))
    return video, np.array(rows["toy"].to_pylist(), np.float32).reshape(-1, 4, 3)


def test_the_toy_family_runs_merges_and_writes_its_tensors(toy_run: Path, sample_root: Path) -> None:
    from phoenix_keypoints.extract.keypoints.filemeta import read_file_metadata
    from phoenix_keypoints.extract.keypoints.frames import read_frame

    t = pq.read_table(toy_run / "keypoints.parquet")
    assert t.schema.equals(toy_family.SCHEMA) and t.num_rows > 0
    assert read_file_metadata(toy_run / "keypoints.parquet")["estimator"] == "toy"
    video, values = video_values(toy_run)
    first = t.filter(pc.equal(t["video"], video))["image"][0].as_py()
    rgb = read_frame(next(sample_root.rglob(Path(first).name)))[0]
    np.testing.assert_array_equal(values[0], toy_family.ToyEstimator().process(rgb)["toy"]
                                  .reshape(4, 3))  # the points are the pixels' own
    split = t["split"][0].as_py()
    arr = np.load(toy_run / "tensors" / f"{split}.npy")
    mask = np.load(toy_run / "tensors" / f"{split}.mask.npy")
    assert arr.shape[1:] == (4, 3) and mask.shape[1:] == (4,)
    np.testing.assert_array_equal(arr[:len(values)], values)
    np.testing.assert_array_equal(mask[:len(values)], values[:, :, 2] >= 0.5)


def test_the_toy_family_resumes_to_the_same_bytes(toy_run: Path, sample_root: Path,
                                                  toy_env: dict[str, str], tmp_path: Path) -> None:
    """A run that lost a part and its merge does that part again: the same keypoints.parquet."""
    copy = tmp_path / "run"
    shutil.copytree(toy_run, copy)
    parts = sorted((copy / "parts").glob("*.parquet"))
    assert len(parts) > 1, parts
    parts[0].unlink()
    (copy / "keypoints.parquet").unlink()
    ok(["run", "--dataset", sample_root, "--out", copy, "--estimator", "toy"], toy_env)
    assert (copy / "keypoints.parquet").read_bytes() == (toy_run / "keypoints.parquet").read_bytes()
    ok(["merge", "--out", copy], toy_env)
    assert "agree" in ok(["diff", toy_run, copy], toy_env)


def test_a_part_keeps_its_familys_settings_under_its_name(toy_run: Path, sample_root: Path,
                                                          toy_env: dict[str, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part's footer keeps the settings its rows were made with under its family's name, not
    the default family's (issue 55 item 7); a part written before, its settings under "holistic",
    is still read, trusted by a resume and merged to the same bytes."""
    from phoenix_keypoints.extract.keypoints.estimator import names
    from phoenix_keypoints.jobs.rundir.parts import META_KEY, read_part_info

    monkeypatch.syspath_prepend(toy_env["PYTHONPATH"].split(":")[0])
    names(rescan=True)
    copy = tmp_path / "run"
    shutil.copytree(toy_run, copy)
    parts = sorted((copy / "parts").glob("chunk-*.parquet"))
    for part in parts:
        footer = json.loads(pq.read_schema(part).metadata[META_KEY])
        assert footer["toy"] == {"estimator": "toy"} and "holistic" not in footer, footer
        footer["holistic"] = footer.pop("toy")  # as the version before wrote every family's
        table = pq.read_table(part).replace_schema_metadata({META_KEY: json.dumps(footer)})
        pq.write_table(table, part, row_group_size=table.num_rows,
                       **toy_family.DECLARATION.write_options())
        assert read_part_info(part)[0].settings == {"estimator": "toy"}
    old = {p: p.read_bytes() for p in parts}
    (copy / "keypoints.parquet").unlink()
    ok(["run", "--dataset", sample_root, "--out", copy, "--estimator", "toy"], toy_env)
    assert {p: p.read_bytes() for p in parts} == old, "the old parts trusted, none done again"
    assert (copy / "keypoints.parquet").read_bytes() == (toy_run / "keypoints.parquet").read_bytes()
    ok(["merge", "--out", copy], toy_env)
    assert (copy / "keypoints.parquet").read_bytes() == (toy_run / "keypoints.parquet").read_bytes()


def lerp_gaps(values: np.ndarray, found: np.ndarray, max_gap: int) -> np.ndarray:
    """The reference --fill interpolate: per point, a run of at most max_gap frames not found
    between two found ones, each frame the straight line between them."""
    out = values.astype(np.float64)
    for k in range(values.shape[1]):
        at = np.flatnonzero(found[:, k])
        for a, b in zip(at[:-1], at[1:], strict=True):
            if 1 < b - a <= max_gap + 1:
                for t in range(a + 1, b):
                    out[t, k] = values[a, k] + (values[b, k] - values[a, k]) * (t - a) / (b - a)
    return out


def test_tensors_writes_every_declared_point_of_a_family_without_a_point_table(
        sample_root: Path, toy_env: dict[str, str], tmp_path: Path) -> None:
    """`tensors` on a run of a family that declares no PointTable (issue 55 item 3): the default
    set again (the run's tensors/, the same bytes), gaps filled and float16 as asked; what only a
    point table gives is refused naming what the family would declare. coffee-1's frames 3, 5-6
    and 8-10 are black, so its two lit points are missing for gaps of 1, 2 and 3 frames."""
    import cv2

    data = copy_dataset(sample_root, tmp_path / "data", writable=True)
    frames = next(data.rglob("coffee-1"))
    for n in (3, 5, 6, 8, 9, 10):
        path = frames / f"images{n:04d}.png"
        cv2.imwrite(str(path), np.zeros_like(cv2.imread(str(path))))
    run = tmp_path / "run"
    ok(["run", "--dataset", data, "--out", run, "--estimator", "toy", "--workers", "2"], toy_env)
    tensors = run / "tensors"
    before = {p.name: p.read_bytes() for p in tensors.glob("*.npy")}
    assert "(4 points;" in ok(["tensors", "--out", run], toy_env)
    assert {p.name: p.read_bytes() for p in tensors.glob("*.npy")} == before
    said = ok(["tensors", "--out", run, "--fill", "interpolate", "--max-gap", "2"], toy_env)
    assert f"{tensors / 'toy-4-interp2'}/ (4 points;" in said, said
    meta = json.loads((tensors / "toy-4-interp2" / "points.json").read_text())
    assert (meta["tag"], meta["fill"], meta["max_gap"], meta["num_points"]) == (
        "toy-4-interp2", "interpolate", 2, 4)
    raw, mask = np.load(tensors / "test.npy"), np.load(tensors / "test.mask.npy")
    got = np.load(tensors / "toy-4-interp2" / "test.npy")
    np.testing.assert_array_equal(np.load(tensors / "toy-4-interp2" / "test.mask.npy"), mask)
    row = next(r for r in pq.read_table(tensors / "test.index.parquet").to_pylist()
               if r["video"] == "coffee-1")
    rows = slice(row["start"], row["start"] + row["length"])
    assert (~mask[rows][[2, 4, 5, 7, 8, 9], :2]).all() and mask[rows][[0, 3, 6, 10], :2].all()
    want = lerp_gaps(raw[rows], mask[rows], 2)
    np.testing.assert_allclose(got[rows], want, rtol=1e-6)
    changed = (got[rows] != raw[rows]).any(axis=2)
    assert changed.sum() == 6 and changed[[2, 4, 5], :2].all(), changed  # the 3-frame gap: not
    np.testing.assert_array_equal(np.delete(got, np.r_[rows], axis=0),
                                  np.delete(raw, np.r_[rows], axis=0))
    ok(["tensors", "--out", run, "--dtype", "float16"], toy_env)
    assert np.load(tensors / "toy-4-f16" / "test.npy").dtype == np.float16
    recorded = json.loads((run / "run.json").read_text())["tensors"]
    assert recorded["toy-4-interp2"]["num_points"] == 4 and recorded["default"]["points"] == "toy-4"
    for asked, needs in ((["--normalize", "shoulders"], "needs a point table's `anchor`"),
                         (["--points", "0-1"], "--points chooses among a point table's parts")):
        proc = run_cli(["tensors", "--out", run, *asked], env=toy_env)
        assert_no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert needs in proc.stderr and "the toy family declares none" in proc.stderr, proc.stderr
        assert "Declaration's `points` (a PointTable" in proc.stderr, proc.stderr


def test_a_family_adds_its_own_option_to_run(sample_root: Path, toy_env: dict[str, str],
                                             tmp_path: Path) -> None:
    """The toy family's --toy-bright (its add_run_options): in `run --estimator toy --help` (an
    installed family's flags join the parser where a command names it, issue 46: `run --help`
    imports no installed family), recorded in run.json under the family's name, deciding the
    values, and met by a resume (settings_conflicts; the run in --out names the family) without
    a line outside the test knowing it."""
    assert "--toy-bright F" in ok(["run", "--estimator", "toy", "--help"], toy_env)
    assert "--toy-bright" not in ok(["run", "--help"], toy_env)
    out = tmp_path / "run"
    ok(["run", "--dataset", sample_root, "--out", out, "--estimator", "toy", "--toy-bright", "0.25",
        "--limit-videos", "1"], toy_env)
    options = json.loads((out / "run.json").read_text())["options"]
    assert options["estimator"] == "toy" and options["toy"] == {"bright_at": 0.25}
    t = pq.read_table(out / "keypoints.parquet")
    values = np.array(t["toy"].to_pylist(), np.float32).reshape(-1, 4, 3)
    np.testing.assert_array_equal(t["bright"].to_numpy(), (values[:, :, 2] >= 0.25).sum(axis=1))
    assert t.num_rows > 0 and (t["bright"].to_numpy() != (values[:, :, 2] >= 0.5).sum(axis=1)).any()
    ok(["run", "--dataset", sample_root, "--out", out], toy_env)  # a resume keeps the run's own
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--toy-bright", "0.5"],
                   env=toy_env)
    assert_no_traceback(proc)
    assert proc.returncode == 2 and "--toy-bright (0.25 when planned, 0.5 asked)" in proc.stderr


def test_report_show_diff_verify_status_and_exports_read_the_declaration(
        toy_run: Path, toy_env: dict[str, str], tmp_path: Path) -> None:
    ok(["report", "--out", toy_run], toy_env)
    assert pq.read_table(toy_run / "report" / "videos.parquet").num_rows > 0
    video, _ = video_values(toy_run)
    ok(["show", "--out", toy_run, "--video", video, "--to", tmp_path / "sheet.png"], toy_env)
    assert (tmp_path / "sheet.png").stat().st_size > 0
    ok(["verify", "--out", toy_run], toy_env)
    assert "estimator: toy" in ok(["status", "--out", toy_run], toy_env)
    t = pq.read_table(toy_run / "keypoints.parquet")
    bright = t["bright"].to_pylist()
    bright[0] = (bright[0] or 0) + 1
    pq.write_table(t.set_column(t.schema.get_field_index("bright"), "bright",
                                pa.array(bright, pa.int32())), tmp_path / "other.parquet")
    proc = run_cli(["diff", toy_run / "keypoints.parquet", tmp_path / "other.parquet"], env=toy_env)
    assert proc.returncode == 1 and "bright differs in 1 frame(s)" in proc.stdout, proc.stdout
    refused = run_cli(["export", "--out", toy_run, "--format", "legacy-pkl", "--to", tmp_path / "x"],
                      env=toy_env)
    assert refused.returncode == 2 and "toy run (toy quarter points)" in refused.stderr
    assert "Its exports: pose." in refused.stderr, refused.stderr


def test_the_pose_export_and_extract_keypoints(toy_run: Path, sample_root: Path,
                                               toy_env: dict[str, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pose_format")
    from pose_format import Pose

    from phoenix_keypoints import extract_keypoints

    ok(["export", "--out", toy_run, "--format", "pose", "--to", tmp_path / "poses"], toy_env)
    video, values = video_values(toy_run)
    written = next((tmp_path / "poses").rglob(f"{video}.pose")).read_bytes()
    pose = Pose.read(written)
    assert [c.name for c in pose.header.components] == ["top", "bottom"]
    assert pose.header.components[0].points == ["top_left", "top_right"]
    # the declared skeleton and colours, as `show` draws them (issue 55 item 4): each region's
    # limb, numbered in its component, in its colour
    assert [(c.limbs, np.asarray(c.colors).tolist()) for c in pose.header.components] == [
        ([(0, 1)], [[255, 210, 0]]), ([(0, 1)], [[40, 230, 40]])]
    found = values[:, :, 2] >= 0.5  # its declared threshold: a point under it is absent (masked)
    np.testing.assert_array_equal(pose.body.data[:, 0].filled(0),
                                  np.where(found[..., None], values[:, :, :2], 0))
    np.testing.assert_array_equal(np.asarray(pose.body.confidence)[:, 0] == 0, ~found)
    monkeypatch.syspath_prepend(toy_env["PYTHONPATH"].split(":")[0])
    folder = next(p.parent for p in sorted(sample_root.rglob("*.png")) if p.parent.name == video)
    kp = extract_keypoints(folder, estimator="toy")
    np.testing.assert_array_equal(kp["toy"], values)
    # a mapping of its parts: `in`, keys() and iteration agree with kp[part] (issue 55 item 7)
    assert "toy" in kp and "x" not in kp and 0 not in kp
    assert list(kp) == kp.keys() == ["toy"] and dict(kp).keys() == {"toy"}
    buf = io.BytesIO()
    kp.to_pose().write(buf)
    assert buf.getvalue() == written
    assert isinstance(family("toy"), sys.modules["toy_family"].Toy)


# --- what every family is promised (issue 48 item 4) ----------------------------------------------
def test_every_family_gets_the_plain_report_at_least(toy_run: Path, toy_env: dict[str, str],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A family with no report of its own, no ReportSpec and no QualitySpec (the toy without its
    write_report): `report` writes the plain report made from its declaration, each region's
    found fraction per video, where it refused ("declares no quality report") though `run` and
    `status` tell its user to run it."""
    from phoenix_keypoints.extract.inspect.report import write_report
    from phoenix_keypoints.extract.keypoints.estimator import names
    from phoenix_keypoints.jobs.inspect import report_input

    monkeypatch.delattr(toy_family.Toy, "write_report")
    monkeypatch.syspath_prepend(toy_env["PYTHONPATH"].split(":")[0])
    names(rescan=True)
    info = write_report(report_input(toy_run), tmp_path / "report")
    videos = pq.read_table(tmp_path / "report" / "videos.parquet").to_pandas()
    video, values = video_values(toy_run)
    row = videos[videos["video"] == video].iloc[0]
    found = values[:, :, 2] >= 0.5  # the declared presence rule; a region: half its points
    assert row["frames"] == len(values)
    assert row["top_found"] == pytest.approx((found[:, 0:2].mean(axis=1) >= 0.5).mean())
    assert row["bottom_found"] == pytest.approx((found[:, 2:4].mean(axis=1) >= 0.5).mean())
    assert info["videos"] == len(videos) > 1
    page = (tmp_path / "report" / "index.html").read_text()  # its title is "toy quarter points"
    assert "<h1>Keypoints: toy quarter points: " in page and "points keypoints" not in page


def test_to_pose_and_the_pose_export_read_one_rule(toy_run: Path, toy_env: dict[str, str],
                                                   sample_root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A family whose declaration lists no `pose` export: `export --format pose` refuses its run
    and `Keypoints.to_pose()` refuses its clip, in the same words (it made a .pose the export
    would not)."""
    from dataclasses import replace

    from phoenix_keypoints import extract_keypoints
    from phoenix_keypoints.extract.keypoints.estimator import names
    from phoenix_keypoints.jobs.run.outputs import export_command
    from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError

    no_pose = replace(toy_family.DECLARATION, exports=())
    monkeypatch.setattr(toy_family, "DECLARATION", no_pose)
    monkeypatch.setattr(toy_family.ToyEstimator, "declaration", no_pose)
    monkeypatch.syspath_prepend(toy_env["PYTHONPATH"].split(":")[0])
    names(rescan=True)
    with pytest.raises(RunError) as exported:
        export_command(RunDir(toy_run), "pose", tmp_path / "poses")
    video, _ = video_values(toy_run)
    folder = next(p.parent for p in sorted(sample_root.rglob("*.png")) if p.parent.name == video)
    kp = extract_keypoints(folder, estimator="toy")
    with pytest.raises(ValueError) as posed:
        kp.to_pose()
    said = str(exported.value).replace(str(toy_run), "this clip")
    assert str(posed.value) == f"to_pose(): {said}", (str(posed.value), said)
    assert "Its exports: none." in said and not (tmp_path / "poses").exists()
