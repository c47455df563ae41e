"""The Python face as a researcher calls it (issue 34): `extract_keypoints` on one clip in this
process, `run_job` from a script without a `__main__` guard, from `python -` and from a notebook,
and one clip or one folder as `--dataset`. Every value is compared with a run's on the same frames,
never with numbers written down: which frames MediaPipe detects is not this suite's business.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    assert_no_traceback,
    busy_workers,
    cli_env,
    popen_cli,
    run_cli,
    video_rows,
    wait_for,
)
from kinds import clip
from tiny_onnx import tiny_models

from phoenix_keypoints import extract_keypoints
from phoenix_keypoints.extract.families.holistic.points import layout
from phoenix_keypoints.extract.families.wholebody.declaration import WHOLEBODY, WHOLEBODY_PARTS
from phoenix_keypoints.extract.keypoints.estimator import declaration
from phoenix_keypoints.extract.outputs.tensors import part_blocks

VIDEO = "cameraman-1"  # 16 frames of the embedded sample's dev split
FIRST = 6  # frames taken where a test needs only a few
NTSC = Fraction(30000, 1001)  # a rate no constant would give


def run_parts(run: Path, video: str) -> dict[str, np.ndarray]:
    """One video's keypoints from a run: {part: float32 [T, points, channels]}, NaN where none."""
    rows = video_rows(pq.read_table(run / "keypoints.parquet"), video)
    out = {}
    for part, (block, present) in part_blocks(rows, list(layout()), layout()).items():
        block = block.copy()
        block[~present] = np.nan
        out[part] = block
    return out


def assert_equal_to_run(kp, run: Path, video: str, frames: int | None = None) -> None:
    ref = run_parts(run, video)
    assert kp.keys() == list(ref)
    for part, values in ref.items():
        assert kp[part].dtype == np.float32
        np.testing.assert_array_equal(kp[part], values[:frames], err_msg=part)
    assert len(kp) == len(ref["pose"][:frames])


def frames_of(sample_root: Path) -> Path:
    return sample_root / "features" / "fullFrame-210x260px" / "dev" / VIDEO


def python(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """This test's Python (the .venv's) as a user runs it: a script or `-`, in a folder of theirs."""
    return subprocess.run([sys.executable, *args], input=stdin, cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=300)


# --- extract_keypoints: one clip in this process ---------------------------------------------------
def test_extract_keypoints_on_a_folder_equals_the_run(sample_root: Path, clean_run: Path) -> None:
    kp = extract_keypoints(frames_of(sample_root))
    assert_equal_to_run(kp, clean_run, VIDEO)
    assert kp.fps == 25.0 and set(kp.status) == {"ok"}
    assert kp["pose"].shape[1:] == (33, 4) and kp["face"].shape[1:] == (468, 3)


def test_extract_keypoints_on_an_array_and_a_list_equals_the_run(sample_root: Path,
                                                                  clean_run: Path) -> None:
    pngs = sorted(frames_of(sample_root).glob("images*.png"))[:FIRST]
    rgb = np.stack([cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in pngs])
    kp = extract_keypoints(rgb, fps=12.5)
    assert_equal_to_run(kp, clean_run, VIDEO, FIRST)
    assert kp.fps == 12.5
    assert_equal_to_run(extract_keypoints([str(p) for p in pngs]), clean_run, VIDEO, FIRST)


def test_extract_keypoints_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="uint8 RGB"):
        extract_keypoints(np.zeros((2, 8, 8), np.uint8))
    with pytest.raises(ValueError, match="estimator"):
        extract_keypoints(np.zeros((1, 8, 8, 3), np.uint8), estimator="openpose")
    with pytest.raises(TypeError, match="model_complexity"):
        extract_keypoints(np.zeros((1, 8, 8, 3), np.uint8), model_complexty=1)
    with pytest.raises(FileNotFoundError):
        extract_keypoints(tmp_path / "nothing.mp4")


def test_one_video_file_runs_and_its_pose_has_the_stream_rate(tmp_path: Path) -> None:
    """`--dataset clip.mp4` (was refused), `--workers 1` (was an abbreviation whose warning named
    --num_gpus), extract_keypoints on the clip equal to the run, and the .pose export at the
    video's rate as pose-format's videos_to_poses writes it (was 25 for every video)."""
    video = clip(tmp_path / "clips" / "signer.mp4", 0, FIRST, rate=NTSC)
    proc = run_cli(["run", "--dataset", video, "--out", tmp_path / "run", "--workers", "1"])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    assert "--num_gpus" not in proc.stderr and "--num_workers_per_gpu" not in proc.stderr
    if "will idle" in proc.stderr:  # a machine with more than one usable core
        assert "--workers 1 asks for 1" in proc.stderr, proc.stderr
    again = run_cli(["run", "--dataset", video, "--out", tmp_path / "run"])  # resumes: all done
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr
    kp = extract_keypoints(video)
    assert_equal_to_run(kp, tmp_path / "run", "signer")
    assert kp.fps == pytest.approx(float(NTSC))

    ours = tmp_path / "poses"
    exported = run_cli(["export", "--out", tmp_path / "run", "--format", "pose", "--to", ours])
    assert exported.returncode == 0, exported.stderr
    theirs = subprocess.run([Path(sys.executable).parent / "videos_to_poses", "--format", "mediapipe",
                             "--directory", video.parent], capture_output=True, text=True, timeout=300)
    assert theirs.returncode == 0, theirs.stderr
    from pose_format import Pose

    def fps(path: Path) -> float:
        return Pose.read(path.read_bytes()).body.fps

    assert fps(ours / "all" / "signer.pose") == fps(video.with_suffix(".pose"))
    assert fps(video.with_suffix(".pose")) == pytest.approx(29.97, abs=0.01)
    assert kp.to_pose().body.fps == pytest.approx(fps(ours / "all" / "signer.pose"))  # (file: float32)


def test_one_folder_of_frames_runs_as_one_video(sample_root: Path, clean_run: Path,
                                                tmp_path: Path) -> None:
    """`--dataset FOLDER_OF_PNGS` (was refused): one video, the run's values for those frames;
    and a path none of the layouts takes is refused naming which one it almost is."""
    proc = run_cli(["run", "--dataset", frames_of(sample_root), "--out", tmp_path / "run"])
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(run_parts(tmp_path / "run", VIDEO)["face"],
                                  run_parts(clean_run, VIDEO)["face"])
    again = run_cli(["run", "--dataset", frames_of(sample_root), "--out", tmp_path / "run"])
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr  # its own input
    sibling = frames_of(sample_root).parent.parent / "test" / "coffee-1"
    other = run_cli(["run", "--dataset", sibling, "--out", tmp_path / "run"])
    assert other.returncode == 2 and "other dataset" in other.stderr, other.stderr  # not the folder
    png = tmp_path / "nested" / "deeper" / "v1" / "a.png"
    png.parent.mkdir(parents=True)
    png.write_bytes((frames_of(sample_root) / "images0001.png").read_bytes())
    (tmp_path / "notes.txt").write_text("hello")
    for path, says in ((tmp_path / "nested", "its subfolder"), (tmp_path / "notes.txt", "not a video"),
                       (png, "not a video file"), (tmp_path / "nested" / "deeper" / "v1" / "x", "")):
        refused = run_cli(["run", "--dataset", path, "--out", tmp_path / "refused"])
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
        assert_no_traceback(refused)


def wholebody_rows(run: Path, video: str) -> np.ndarray:
    """One video's whole-body points from a run: float32 [T, 133, 3], NaN where no row values."""
    rows = video_rows(pq.read_table(run / "keypoints.parquet"), video)
    block, present = part_blocks(rows, [WHOLEBODY], declaration({"estimator": WHOLEBODY}).parts)[
        WHOLEBODY]
    block = block.copy()
    block[~present] = np.nan
    return block


def test_extract_keypoints_wholebody_equals_the_run(sample_root: Path, tmp_path: Path) -> None:
    """estimator="wholebody" (was refused) on a folder and a video: the run's 133 points exactly,
    run_job(estimator="wholebody", ...) and `run --estimator wholebody` making the reference runs,
    and the named parts as the COCO-WholeBody slices of those points."""
    from phoenix_keypoints import RunRefused, run_job

    models = tiny_models(tmp_path / "models")
    wb = {"estimator": "wholebody", "detector": models["detector"], "pose_model": models["pose"]}
    r = run_job(dataset=frames_of(sample_root), out=tmp_path / "folder", workers=1, **wb)
    assert r.complete and r.frames_not_ok == {}, r
    video = clip(tmp_path / "clips" / "signer.mp4", 0, FIRST, rate=NTSC)
    proc = run_cli(["run", "--dataset", video, "--out", tmp_path / "video", "--estimator", "wholebody",
                    "--detector", models["detector"], "--pose-model", models["pose"]])
    assert proc.returncode == 0, proc.stderr
    for source, run, name in ((frames_of(sample_root), r.run_dir, VIDEO),
                              (video, tmp_path / "video", "signer")):
        kp = extract_keypoints(source, **wb)
        ref = wholebody_rows(run, name)
        assert kp.keys() == [WHOLEBODY, *WHOLEBODY_PARTS] and len(kp) == len(ref) > 0
        assert kp[WHOLEBODY].dtype == np.float32 and kp[WHOLEBODY].shape == (len(ref), 133, 3)
        np.testing.assert_array_equal(kp[WHOLEBODY], ref, err_msg=str(source))
        for part, (a, b) in WHOLEBODY_PARTS.items():
            np.testing.assert_array_equal(kp[part], ref[:, a:b], err_msg=part)
    assert kp["left_hand"].shape[1:] == (21, 3) and kp["face"].shape[1:] == (68, 3)
    assert kp.fps == pytest.approx(float(NTSC))
    with pytest.raises(TypeError, match="pose_model=PATH.onnx"):
        extract_keypoints(video, estimator="wholebody", detector=models["detector"])
    with pytest.raises(TypeError, match="model_complexity"):
        extract_keypoints(video, model_complexity=1, **wb)
    with pytest.raises(RunRefused, match="--pose-model"):
        run_job(dataset=video, out=tmp_path / "refused", **{**wb, "pose_model": tmp_path / "no.onnx"})


def test_extract_keypoints_wholebody_to_pose_is_the_export(sample_root: Path, tmp_path: Path) -> None:
    """kp.to_pose() of a whole-body clip (was KeyError: 'wholebody') is the very .pose that
    `export --format pose` writes for the same frames: pose-format's COCO-WholeBody header."""
    pytest.importorskip("pose_format")
    import io

    models = tiny_models(tmp_path / "models")
    wb = ["--estimator", "wholebody", "--detector", models["detector"], "--pose-model", models["pose"]]
    folder = frames_of(sample_root)
    for cmd in (["run", "--dataset", folder, "--out", tmp_path / "run", *wb],
                ["export", "--out", tmp_path / "run", "--format", "pose", "--to", tmp_path / "poses"]):
        proc = run_cli(cmd)
        assert proc.returncode == 0, proc.stderr
    kp = extract_keypoints(folder, estimator="wholebody", detector=models["detector"],
                           pose_model=models["pose"])
    buf = io.BytesIO()
    kp.to_pose().write(buf)
    assert buf.getvalue() == next((tmp_path / "poses").rglob(f"{VIDEO}.pose")).read_bytes()


# --- run_job: the whole job from Python --------------------------------------------------------------
def job_script(sample_root: Path, out: Path) -> str:
    """A user's script, without an `if __name__ == "__main__":` guard."""
    return textwrap.dedent(f"""\
        from phoenix_keypoints import run_job
        print("SCRIPT BODY RAN")
        result = run_job(dataset={str(sample_root)!r}, out={str(out)!r}, workers=2,
                         videos=[{VIDEO!r}])
        print("RESULT", result.complete, result.exit_status, result.frames_not_ok)
        """)


def assert_job_ran_once(proc: subprocess.CompletedProcess, out: Path, clean_run: Path) -> None:
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("SCRIPT BODY RAN") == 1, proc.stdout
    assert "RESULT True 0 {}" in proc.stdout, proc.stdout
    assert_no_traceback(proc)
    np.testing.assert_array_equal(run_parts(out, VIDEO)["pose"], run_parts(clean_run, VIDEO)["pose"])


def test_run_job_from_a_script_without_a_main_guard(sample_root: Path, clean_run: Path,
                                                    tmp_path: Path) -> None:
    """Spawned workers used to re-run the script (and die: "workers die while starting")."""
    (tmp_path / "job.py").write_text(job_script(sample_root, tmp_path / "run"))
    assert_job_ran_once(python(["job.py"], tmp_path), tmp_path / "run", clean_run)


def test_the_command_line_from_a_script_without_a_main_guard(sample_root: Path, clean_run: Path,
                                                            tmp_path: Path) -> None:
    """The issue's own observation, with the call 75f384c had (jobs.cli.main): its workers re-ran
    the script and the run failed with "workers die while starting"."""
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""\
        from phoenix_keypoints.jobs.cli import main
        print("SCRIPT BODY RAN")
        code = main(["run", "--dataset", {str(sample_root)!r}, "--out", {str(tmp_path / 'run')!r},
                     "--videos", {VIDEO!r}])
        print("RESULT", code == 0, code, {{}})
        """))
    proc = python(["job.py"], tmp_path)
    assert proc.stdout.count("SCRIPT BODY RAN") == 1 and "RESULT True 0" in proc.stdout, proc.stderr
    np.testing.assert_array_equal(run_parts(tmp_path / "run", VIDEO)["pose"],
                                  run_parts(clean_run, VIDEO)["pose"])


def test_run_job_from_stdin(sample_root: Path, clean_run: Path, tmp_path: Path) -> None:
    """`python -` used to fail with FileNotFoundError '<stdin>' in every worker."""
    proc = python(["-"], tmp_path, stdin=job_script(sample_root, tmp_path / "run"))
    assert_job_ran_once(proc, tmp_path / "run", clean_run)


def test_a_worker_dying_while_starting_is_reported_with_its_cause(sample_root: Path,
                                                                  tmp_path: Path) -> None:
    """A worker that dies before its entry point runs (here a planted ImportError) is reported with
    its traceback's last line, and its log holds the traceback (it went to the terminal, and the
    message pointed at a RUN/logs/ that did not exist)."""
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--workers", "1"],
                   env={"PHOENIX_KEYPOINTS_FAULTS": "fail-worker-start"})
    assert proc.returncode == 1, proc.stderr
    assert "workers die while starting (exit status 1, ImportError: planted by" in proc.stderr, \
        proc.stderr
    assert "(python -c 'import mediapipe')" in proc.stderr, proc.stderr
    assert_no_traceback(proc)
    assert "Traceback" in (out / "logs" / "worker-0.log").read_text()


def test_workers_that_cannot_start_are_told_to_check_their_own_familys_library(
        sample_root: Path, wholebody_options: list[str], tmp_path: Path) -> None:
    """A whole-body run whose workers cannot start is told to check onnxruntime, the library its
    workers import; it was told to check mediapipe whatever the family (issue 38)."""
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run", "--workers", "1",
                    *wholebody_options], env={"PHOENIX_KEYPOINTS_FAULTS": "fail-worker-start"})
    assert proc.returncode == 1, proc.stderr
    assert "workers die while starting" in proc.stderr, proc.stderr
    assert "check that onnxruntime imports on this machine (python -c 'import onnxruntime')" \
        in proc.stderr and "mediapipe" not in proc.stderr, proc.stderr
    assert_no_traceback(proc)


def test_run_job_refuses_with_an_exception(tmp_path: Path) -> None:
    from phoenix_keypoints import RunRefused, run_job

    with pytest.raises(RunRefused, match="does not exist"):
        run_job(dataset=tmp_path / "nothing", out=tmp_path / "run")
    with pytest.raises(RunRefused, match="--workers"):
        run_job(dataset=tmp_path, out=tmp_path / "run", workers=0)
    assert not (tmp_path / "run").exists()


def test_run_job_names_a_wrong_keyword_and_value_as_python_does(tmp_path: Path) -> None:
    """run_job(bogus=1) said "phoenix-keypoints: error: unrecognized arguments: --bogus 1" and
    a wrong value the flag's words (issue 56 item 1): a keyword run has no option for is Python's
    TypeError with the closest keywords; a value run refuses is named by its keyword and value,
    the flag beside it; a keyword spelled as the flag is not (output_path: --output_path) is
    still given its flag. Nothing is written."""
    from phoenix_keypoints import RunRefused, run_job

    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus' \(its keywords"):
        run_job(dataset=tmp_path, out=tmp_path / "run", bogus=1)
    with pytest.raises(TypeError, match=r"'limit_video'; did you mean 'limit_videos'\?"):
        run_job(dataset=tmp_path, out=tmp_path / "run", limit_video=3)
    with pytest.raises(RunRefused, match=r"^limit_videos='x': must be a whole number, not 'x' "
                                         r"\(run's --limit-videos\)$"):
        run_job(dataset=tmp_path, out=tmp_path / "run", limit_videos="x")
    with pytest.raises(RunRefused, match=r"^estimator='nope': invalid choice"):
        run_job(dataset=tmp_path, out=tmp_path / "run", estimator="nope")
    with pytest.raises(RunRefused, match="does not exist"):  # --output_path reached run itself
        run_job(dataset=tmp_path / "nothing", output_path=tmp_path / "x.pkl")
    assert not (tmp_path / "run").exists()


def test_run_job_types_a_familys_own_negative_flag(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyword given False is typed as the `run` flag that stores False in it, read from the
    parser: a family's own --no-... flag too. run_job knew Holistic's --no-smooth-landmarks by
    name (issue 38), so another family's such flag was dropped: False typed no flag at all."""
    from phoenix_keypoints import RunRefused, run_job
    from phoenix_keypoints.extract.keypoints.estimator import FAMILIES

    (tmp_path / "negfamily.py").write_text(textwrap.dedent("""\
        from phoenix_keypoints.extract.families import Family
        from phoenix_keypoints.extract.keypoints.estimator import Declaration, OptionError
        DECLARATION = Declaration(name="negfamily", parts={"points": (4, 3)})
        class Neg(Family):
            def declaration(self, settings=None):
                return DECLARATION
            def add_run_options(self, p):
                p.add_argument("--no-neg-mirror", dest="neg_mirror", action="store_false",
                               default=None, help="negfamily: do not mirror")
            def asked_settings(self, args, estimator, fetched):
                if args.neg_mirror is False:  # what the flag reached: said back as a refusal
                    raise OptionError("negfamily was given --no-neg-mirror")
                return None
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FAMILIES, "negfamily", "negfamily:Neg")
    with pytest.raises(RunRefused, match="negfamily was given --no-neg-mirror"):
        run_job(dataset=tmp_path / "nothing", out=tmp_path / "run", estimator="negfamily",
                neg_mirror=False)
    with pytest.raises(RunRefused, match="does not exist"):  # and the tool's own, as before
        run_job(dataset=tmp_path / "nothing", out=tmp_path / "run", follow_links=False,
                smooth_landmarks=False)


def test_the_python_face_in_a_notebook(sample_root: Path, clean_run: Path, tmp_path: Path) -> None:
    """A real Jupyter kernel (ipykernel, this .venv's Python) runs both calls of docs/python.md,
    with the researcher's own `extract.py` and `jobs.py` beside the notebook (issue 40: common
    names, first on the kernel's sys.path): the tool's modules never reach for them, and the
    notebook's own `import extract` still gets the user's file."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    for name in ("extract", "jobs"):  # what a researcher's helper files might hold
        (tmp_path / f"{name}.py").write_text(
            f"MINE = {name!r}\n"
            "def __getattr__(name):\n"
            f"    raise RuntimeError('the tool reached the user' + \"'s {name}.py for \" + name)\n")
    few = [str(p) for p in sorted(frames_of(sample_root).glob("images*.png"))[:FIRST]]
    cells = [f"import sys; assert sys.executable == {sys.executable!r}, sys.executable",
             "from phoenix_keypoints import extract_keypoints\n"
             f"kp = extract_keypoints({str(frames_of(sample_root))!r})\nprint(len(kp), kp.fps)",
             f"kp = extract_keypoints({few!r}, progress=True)\nprint('ASKED', len(kp))",
             "from phoenix_keypoints import run_job\n"
             f"r = run_job(dataset={str(sample_root)!r}, out={str(tmp_path / 'run')!r}, workers=2, "
             f"videos=[{VIDEO!r}])\nprint('RESULT', r.complete)",
             "import extract, jobs\nprint('USERS', extract.MINE, jobs.MINE)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    where = {"metadata": {"path": str(tmp_path)}}
    # ipykernel copies fd 2 into the cell's output, except under pytest (PYTEST_CURRENT_TEST): the
    # kernel is started without it, as a user's is
    kernel_env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    NotebookClient(nb, timeout=300, kernel_name="python3", resources=where).execute(env=kernel_env)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "16 25.0" in text and "RESULT True" in text and "USERS extract jobs" in text, text
    # MediaPipe's log lines (glog, absl, TFLite on fd 2) stay out of every cell's output; without
    # ipywidgets tqdm.auto shows no bar (and no warning about it) unless progress=True asks
    assert not re.search(r"^[IWEF]\d{4} |TensorFlow Lite|absl::|feedback", text, re.M), text
    cell = "".join(o.get("text", "") for o in nb.cells[1].get("outputs", []))
    assert "extract_keypoints:" not in cell and "IProgress" not in cell, cell
    asked = "".join(o.get("text", "") for o in nb.cells[2].get("outputs", []))
    assert f"{FIRST}/{FIRST}" in asked and "ASKED 6" in asked, asked
    np.testing.assert_array_equal(run_parts(tmp_path / "run", VIDEO)["face"],
                                  run_parts(clean_run, VIDEO)["face"])


def on_a_terminal(code: str, cwd: Path) -> str:
    """What `python -c code` writes to a real terminal (a pseudo-terminal on stdout and stderr)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=follower, stdout=follower,
                            stderr=follower, cwd=cwd, env=cli_env())
    os.close(follower)
    out = b""
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    os.close(leader)
    assert proc.wait(timeout=300) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_extract_keypoints_shows_progress_on_a_terminal_and_no_mediapipe_logs(sample_root: Path,
                                                                            tmp_path: Path) -> None:
    """A long call shows a bar of frames on a terminal (tqdm.auto's choice), none when stderr is a
    pipe or progress=False; MediaPipe's ~8 log lines a Holistic call reach neither."""
    few = [str(p) for p in sorted(frames_of(sample_root).glob("images*.png"))[:FIRST]]
    call = (f"from phoenix_keypoints import extract_keypoints\nkp = extract_keypoints({few!r}{{}})\n"
            "print('N', len(kp))")
    noise = re.compile(r"^[IWEF]\d{4} |TensorFlow Lite|absl::|feedback", re.M)
    shown = on_a_terminal(call.format(""), tmp_path)
    assert "extract_keypoints: 100%" in shown and f"{FIRST}/{FIRST}" in shown, shown
    assert "N 6" in shown and not noise.search(shown), shown
    off = on_a_terminal(call.format(", progress=False"), tmp_path)
    assert "extract_keypoints:" not in off and "N 6" in off and not noise.search(off), off
    piped = python(["-c", call.format("")], tmp_path)
    assert piped.returncode == 0 and "N 6" in piped.stdout, piped.stderr
    assert "extract_keypoints:" not in piped.stderr and not noise.search(piped.stderr), piped.stderr


# --- status while a run goes -----------------------------------------------------------------------
@pytest.mark.parametrize("estimator", ["holistic", "wholebody"])
def test_status_beside_a_live_run_gives_one_count(sample_root: Path, tmp_path: Path,
                                                  estimator: str) -> None:
    """One count of frames committed (from the parts) and one of frames done in chunks in flight;
    it used to print "85/143 in committed parts" beside "73/143 frames incl. chunks in flight".
    The same beside a whole-body run, which status names with its models."""
    out = tmp_path / "run"
    models = tiny_models(tmp_path / "models")
    wb = ["--estimator", "wholebody", "--detector", models["detector"], "--pose-model",
          models["pose"]] if estimator == "wholebody" else []
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                      "--workers", "1", *wb], env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.2"})
    try:
        def mid_run() -> str | None:
            if not any((out / "parts").glob("chunk-*.parquet")) or not busy_workers(out):
                return None
            text = run_cli(["status", "--out", out]).stdout
            return text if "in flight" in text else None

        text = wait_for(mid_run, 120, "a chunk committed and one in flight", proc)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert "incl. chunks in flight" not in text, text
    chunks = re.search(r"chunks: +(\d+)/(\d+) committed, (\d+) in flight", text)
    frames = re.search(r"frames: +(\d+)/(\d+) committed, (\d+) more done", text)
    assert chunks and frames, text
    done, total, flying = map(int, frames.groups())
    assert int(chunks[1]) >= 1 and int(chunks[3]) == 1 and done + flying <= total, text
    assert ("estimator: wholebody (--detector tiny-yolox-end2end.onnx" in text) == bool(wb), text
