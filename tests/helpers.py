"""Helpers for the tests: the real command line in a subprocess, polling a live run, finding its
processes, comparing outputs, damaging copies of a dataset. Nothing here mocks the job: signals go
to real processes found through the run's own heartbeat, damaged files are written to disk."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_SAMPLE = SHARED_DATA / "phoenix-sample" / "PHOENIX-2014-T"
SHARED_INDEX = SHARED_DATA / "phoenix-2014-T-index"
VIDEOS = SHARED_DATA / "video-sample"
PHX_FRAMES = SHARED_SAMPLE / "features" / "fullFrame-210x260px"


# --- the command line ----------------------------------------------------------------------------
def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PHOENIX_KEYPOINTS_FAULTS", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 300,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`phoenix-keypoints ARGS` in a subprocess, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "phoenix_keypoints", *map(str, args)], env=cli_env(env), cwd=cwd or REPO,
        capture_output=True, text=True, timeout=timeout,
    )


def run_with_file_size_limit(args: list, limit: int) -> subprocess.CompletedProcess:
    """`phoenix-keypoints ARGS` under a real refusal by the kernel: RLIMIT_FSIZE makes writes past
    `limit` bytes fail (EFBIG; Python ignores SIGXFSZ), in the coordinator and its workers."""
    import resource

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "phoenix_keypoints", *map(str, args)], env=cli_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          preexec_fn=limit_files)


def popen_cli(args: list[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
    """Start `phoenix-keypoints ARGS` in its own process group (so a test can signal all of it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "phoenix_keypoints", *map(str, args)], env=cli_env(env), cwd=cwd or REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def assert_no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


def cli_ok(args: list, env: dict[str, str] | None = None) -> str:
    """A command that must succeed without a traceback; its stdout."""
    proc = run_cli(args, env=env)
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{args[0]}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def family_env(site: Path, dist: str, entry: str, *paths: Path) -> dict[str, str]:
    """The environment in which a family module of tests/ (or of `paths`: an example's src/) is
    known as an installed package makes one known: an entry point (`entry`: "name = module:Class")
    of group phoenix_keypoints.families in a dist-info under `site`, on PYTHONPATH with tests/."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[phoenix_keypoints.families]\n{entry}\n")
    return {"PYTHONPATH": ":".join(map(str, (site, REPO / "tests", *paths)))}


def read_keypoints(run_dir: Path):
    return pq.read_table(Path(run_dir) / "keypoints.parquet")



# The older pipeline's 68 face-mesh indices, copied from ../shared/docs/legacy-format.md.
LEGACY_FACE_68 = [10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378,
                  400, 107, 55, 65, 52, 53, 336, 296, 334, 293, 300, 19, 1, 2, 5, 4, 6, 98, 97, 94,
                  33, 7, 163, 144, 145, 153, 362, 382, 381, 380, 374, 373, 61, 146, 91, 181, 84,
                  17, 314, 405, 320, 307, 375, 321, 78, 95, 88, 178, 87, 14, 317, 402]


# --- live runs and their outputs -----------------------------------------------------------------
RUN_ARGS = ["--chunk-frames", "20", "--workers-per-gpu", "2"]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def wait_for(pred: Callable[[], Any], timeout: float, what: str,
             proc: subprocess.Popen | None = None, interval: float = 0.05) -> Any:
    """Poll pred every `interval` s until it returns something truthy; fail with `what` (and the
    run's stderr). A pred that starts a process (scontrol) wants a longer interval."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"run ended (rc {proc.returncode}) before: {what}\n{err}")
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for: {what}")


def progress(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(run_dir) / "progress.json").read_text())
    except (OSError, ValueError):
        return {}


def busy_workers(run_dir: Path) -> list[dict[str, Any]]:
    """Workers the heartbeat shows inside a video (so a kill lands mid-chunk)."""
    p = progress(run_dir)
    if not p.get("running"):
        return []
    return [w for w in p.get("workers", []) if w.get("pid") and w.get("video")]


def alive(pid: int) -> bool:
    """True while pid runs (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def temps(run_dir: Path) -> list[Path]:
    parts = Path(run_dir) / "parts"
    return sorted(parts.glob(".*.tmp")) if parts.is_dir() else []


def frame_keys(table: pa.Table) -> list[tuple[str, int]]:
    return list(zip(table["video"].to_pylist(), table["frame"].to_pylist(), strict=True))


def assert_same_output(run_dir: Path, ref_dir: Path) -> None:
    """Merged keypoints byte-identical to the reference and the tensors equal too."""
    got = pq.read_table(Path(run_dir) / "keypoints.parquet")
    keys = frame_keys(got)
    assert len(keys) == len(set(keys)), "a frame appears twice"
    assert set(keys) == set(frame_keys(pq.read_table(Path(ref_dir) / "keypoints.parquet"))), \
        "frames missing or extra"
    assert sha256(Path(run_dir) / "keypoints.parquet") == sha256(Path(ref_dir) / "keypoints.parquet")
    for ref in sorted((Path(ref_dir) / "tensors").glob("*.npy")):
        np.testing.assert_array_equal(np.load(Path(run_dir) / "tensors" / ref.name), np.load(ref))


def video_rows(table: pa.Table, video: str) -> pa.Table:
    import pyarrow.compute as pc

    return table.filter(pc.equal(table["video"], video))


KEYPOINT_COLUMNS = ["frame", "status", "pose", "face", "left_hand", "right_hand"]
WHOLEBODY_COLUMNS = ["frame", "status", "wholebody", "persons"]  # a whole-body run's


def same_keypoints(a: pa.Table, b: pa.Table, video: str, columns: list[str] = KEYPOINT_COLUMNS
                   ) -> bool:
    """One video's rows, keypoints and statuses, equal in both tables (paths may differ)."""
    return video_rows(a, video).select(columns).equals(video_rows(b, video).select(columns))


def copy_dataset(src: Path, dest: Path, writable: bool = False) -> Path:
    """A private copy of a dataset tree that a test may damage (frames are copied, not linked).
    writable: also make every file and folder writable (the shared sample ships read-only)."""
    import shutil

    shutil.copytree(src, dest)
    for p in [dest, *dest.rglob("*")] if writable else []:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


def pad_png(png: bytes, size: int) -> bytes:
    """The same PNG (same pixels) grown to exactly `size` bytes by a tEXt chunk before IEND: a file
    of another frame's size whose decoded picture is this one's."""
    import struct
    import zlib

    pad = size - len(png) - 12  # a chunk is length (4) + type (4) + data + crc (4)
    assert pad >= 2, f"a PNG of {len(png)} bytes cannot be padded to {size}"
    data = b"c\0" + b"x" * (pad - 2)
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(
        ">I", zlib.crc32(b"tEXt" + data))
    iend = png.rindex(b"IEND") - 4
    out = png[:iend] + chunk + png[iend:]
    assert len(out) == size
    return out


def build_2014_layout(t_root: Path, dest: Path) -> Path:
    """The same frames in the original PHOENIX-2014 layout: `<split>.corpus.csv` with header
    id|folder|signer|annotation, frames in `<split>/<id>/1/<rec>.avi_pid0_fn000000-0.png`."""
    import csv
    import shutil

    from phoenix_keypoints.extract.corpora import discover
    from phoenix_keypoints.extract.corpora.base import SPLITS
    from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR

    ds = discover(t_root)
    manual = dest / "annotations" / "manual"
    manual.mkdir(parents=True)
    for split in SPLITS:
        with (manual / f"{split}.corpus.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, delimiter="|", lineterminator="\n")
            w.writerow(["id", "folder", "signer", "annotation"])
            for v in ds.videos:
                if v.split != split:
                    continue
                w.writerow([v.name, f"{v.name}/1/*.png", v.speaker, v.gloss])
                folder = dest / FRAMES_DIR / split / v.name / "1"
                folder.mkdir(parents=True)
                for i, name in enumerate(v.files):
                    shutil.copyfile(t_root / v.folder / name,
                                    folder / f"{v.name}-rec.avi_pid0_fn{i:06d}-0.png")
    return dest


def session_members(sid: int) -> list[str]:
    """Live processes of session sid (the run was started with start_new_session): after the
    coordinator is gone, any one left is an orphan still working."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmd = "?"
            out.append(f"{d.name} (ppid {fields[1]}, {fields[0]}): {cmd[:200]}")
    return out


# --- MediaPipe run directly: the reference a run must equal ---------------------------------------
def direct_holistic(root: Path, images: list[str], **options: Any) -> list[dict]:
    """A fresh Holistic built with exactly these keyword options, straight over one video's frames
    (read as the job reads them: cv2, BGR -> RGB); each frame's parts as the job stores them."""
    import cv2
    import mediapipe as mp

    from phoenix_keypoints.extract.families.holistic.points import layout
    from phoenix_keypoints.extract.families.holistic.runner import landmarks_to_arrays

    parts = layout(options.get("refine_face_landmarks", False))
    out = []
    with mp.solutions.holistic.Holistic(**options) as h:
        for rel in images:
            bgr = cv2.imread(str(Path(root) / rel))
            out.append(landmarks_to_arrays(h.process(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)), parts))
    return out


def max_abs_diff(got: list[dict], ref: list[dict], where: str = "") -> float:
    """Largest |difference| over every part of every frame; a part found in one and not the other
    fails the assertion (with where, frame and part)."""
    worst = 0.0
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        assert set(g) == set(r), (where, i)
        for part, rv in r.items():
            gv = g[part]
            assert (gv is None) == (rv is None), (where, i, part, "found in one only")
            if rv is not None:
                gv = np.asarray(gv, np.float32)
                assert gv.shape == rv.shape, (where, i, part, gv.shape, rv.shape)
                worst = max(worst, float(np.abs(gv - rv).max()))
    return worst


# --- corpus trees built from the shared data (tests/test_corpora.py, tests/test_archive_corpora.py)
def build_csl(root: Path, frames: int = 4, labels: object | None = None) -> Path:
    """Two sentence videos of JPEG frames (PHOENIX sample frames re-encoded), split_1.txt, labels."""
    import cv2

    videos = {"S000001_P0000_T00": ("train", "train/signer_demo-1"), "S000002_P0001_T00":
              ("dev", "train/fingerspelling_hand-1")}
    for name, (_, src) in videos.items():
        folder = root / "sentence" / "frames_512x512" / name
        folder.mkdir(parents=True)
        for i, png in enumerate(sorted((PHX_FRAMES / src).glob("images*.png"))[:frames]):
            cv2.imwrite(str(folder / f"{i:06d}.jpg"), cv2.imread(str(png)))
    (root / "sentence_label").mkdir()
    (root / "sentence_label" / "split_1.txt").write_text(
        "name|split\n" + "".join(f"{n}|{s}\n" for n, (s, _) in videos.items()))
    if labels is None:
        labels = {"info": [
            {"name": "S000001_P0000_T00", "length": frames, "label_gloss": ["你", "好"],
             "label_char": ["你", "好", "。"], "label_word": ["你好", "。"], "signer": 3,
             "embedding": np.arange(4, dtype=np.float32)},
            {"name": "S000002_P0001_T00", "length": frames, "label_gloss": ["谢谢"],
             "label_char": ["谢", "谢"], "label_word": ["谢谢"], "signer": 7}],
            "gloss_map": ["你", "好", "谢谢"]}
    (root / "sentence_label" / "csl2020ct_v2.pkl").write_bytes(pickle.dumps(labels, protocol=2))
    return root


H2S_HEADER = "\t".join(["VIDEO_ID", "VIDEO_NAME", "SENTENCE_ID", "SENTENCE_NAME", "START_REALIGNED",
                        "END_REALIGNED", "SENTENCE"]) + "\n"


def build_how2sign(root: Path) -> Path:
    for split, name in (("train", "-fZc293MpJk_0-1-rgb_front"), ("val", "-d5dN54tH2E_1-1-rgb_front")):
        clips = root / "sentence_level" / split / "rgb_front" / "raw_videos"
        clips.mkdir(parents=True)
        shutil.copyfile(VIDEOS / "signer_demo.mp4", clips / f"{name}.mp4")
        vid = name.split("_")[0]
        (root / f"how2sign_realigned_{split}.csv").write_text(
            H2S_HEADER + f"{vid}\t{vid}-1-rgb_front\t{vid}_0\t{name}\t1.5\t3.2\tHi, I'm {split}.\n")
    shutil.copyfile(VIDEOS / "signer_demo.mp4",
                    root / "sentence_level/train/rgb_front/raw_videos/unlisted_0-1-rgb_front.mp4")
    return root


# --- the wheel installed into a fresh venv (tests/test_wheel.py, tests/test_py313.py) ------------
def outside_env() -> dict[str, str]:
    """The environment without this tree on the path and without the suite's venv: what a user's
    shell has, so that an installed tool finds only what it installed."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def sh(args: list, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Run a command that must succeed without a traceback; its stdout."""
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def build_wheel(dest: Path, project: Path = REPO) -> Path:
    """The wheel of this tree (or of another project in it: examples/openpose25), built without
    its dependencies into dest."""
    sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dest, project], dest.parent,
       outside_env())
    return next(dest.glob("phoenix_keypoints-*.whl" if project == REPO else "*.whl"))


# What pip says when PyPI cannot be reached (a test that needs it then skips, saying so)
OFFLINE = ("NewConnectionError", "Failed to establish a new connection", "Network is unreachable",
           "Temporary failure in name resolution", "ProxyError", "Max retries exceeded")


def upgrade_pip(venv: Path) -> None:
    """The venv's pip at PyPI's newest, where PyPI can be reached (the install after it says so
    where it cannot)."""
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", "--upgrade", "pip"], env=outside_env(),
                   capture_output=True, text=True, timeout=300)


def install_wheel(python: str | Path, venv: Path, wheel: Path, constraints: Path | None,
                  more: tuple[str | Path, ...] = ()) -> subprocess.CompletedProcess:
    """A fresh venv of `python` with the wheel installed (not editable) under `constraints` (None:
    as a user's `pip install` does, with what pyproject.toml pins alone), and `more` beside it
    in the same pip call (other wheels, requirements).
    The venv's pip is upgraded first, as scripts/setup.sh does (a Python's bundled pip may be
    years old: 3.10's downloads whole wheels where a new one reads their published metadata).
    Returns pip's process for the caller to judge: a test may skip where PyPI cannot be reached."""
    sh([python, "-m", "venv", venv], venv.parent, outside_env())
    upgrade_pip(venv)
    pinned = ["-c", str(constraints)] if constraints is not None else []
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *pinned, str(wheel), *map(str, more)],
                          env=outside_env(), capture_output=True, text=True, timeout=900)


def install_over_suite(venv: Path, wanted: tuple[str | Path, ...]) -> None:
    """A fresh venv of the suite's Python whose dependencies are the suite's own (one .pth line
    to .venv's site-packages, which setup.sh installed under constraints.txt; the .pth files
    there, the editable install's among them, are not read from it), with `wanted` (wheels, or
    "WHEEL[extra]") installed into it, not editable: seconds instead of minutes. pip resolves
    every requirement of each, its extras' too, against what is installed, with no index and no
    configuration of this machine (PIP_CONFIG_FILE=/dev/null: no local wheel folder to fall back
    on), so a requirement the pinned set does not satisfy fails the install; it writes what it
    installed, with the extras asked for, to VENV/pip-report.json and what it said to
    VENV/pip.log. What a wheel's packaging decides (modules, templates, entry points, extras) is
    tested as installed; what `pip install` fetches from PyPI, tests/test_py313.py's fresh
    installs."""
    import sysconfig

    sh([sys.executable, "-m", "venv", "--without-pip", venv], venv.parent, outside_env())
    ours = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    ours.mkdir(parents=True, exist_ok=True)
    (ours / "zz-suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "install", "--disable-pip-version-check", "--no-index", "--report",
                           str(venv / "pip-report.json"), *map(str, wanted)], cwd=venv.parent,
                          env={**outside_env(), "PIP_CONFIG_FILE": os.devnull},
                          capture_output=True, text=True, timeout=300)
    (venv / "pip.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"pip install {wanted}: exit {proc.returncode}\n{proc.stderr}"


# --- code planted where a careless search path would find it ------------------------------------
PLANTED_LIB = "libpthread.so.0"  # numpy's OpenBLAS makes the dynamic loader look this name up


def system_deps(*groups: str) -> None:
    """Debian packages of scripts/system-deps.sh; a skip with its reason where they cannot be had."""
    import pytest

    deps = subprocess.run(["bash", str(REPO / "scripts" / "system-deps.sh"), *groups],
                          capture_output=True, text=True, timeout=900)
    if deps.returncode == 3:
        pytest.skip(deps.stderr.strip())
    assert deps.returncode == 0, deps.stderr


def plant_library(folder: Path, marker: Path) -> None:
    """A real shared library in `folder`, built with gcc, whose constructor appends a line (its pid
    and command line) to `marker` in whatever process loads it; checked to be loaded by a process
    whose library path holds the current folder (an empty entry), so a test that it is not loaded
    can fail."""
    system_deps("gcc")
    src = folder.parent / "planted.c"
    src.write_text(
        "#include <stdio.h>\n#include <unistd.h>\n"
        "__attribute__((constructor)) static void planted(void) {\n"
        '    char cmd[200] = {0};\n    FILE *c = fopen("/proc/self/cmdline", "r");\n'
        "    if (c) {\n        size_t n = fread(cmd, 1, sizeof cmd - 1, c);\n"
        "        for (size_t i = 0; i < n; i++) if (!cmd[i]) cmd[i] = ' ';\n        fclose(c);\n    }\n"
        f'    FILE *f = fopen("{marker}", "a");\n'
        '    if (f) { fprintf(f, "library in pid %d: %s\\n", (int)getpid(), cmd); fclose(f); }\n}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / PLANTED_LIB), str(src)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    subprocess.run([sys.executable, "-c", "import numpy"], cwd=folder, check=True,
                   env={**env, "LD_LIBRARY_PATH": ":"})
    assert "library in pid" in marker.read_text()
    marker.unlink()


def careful_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """cli_env as a careful user's shell has it: no search path entry that is the current folder
    (this test process's os.environ has one once anything here imported cv2, and what the tool's
    own process starts with is its caller's), and none of the variables the tool sets for its
    children (this process gets them once it loads the tool's code), so tests see the tool set them."""
    env = {k: v for k, v in cli_env().items()
           if k not in ("LD_LIBRARY_PATH", "ORT_DISABLE_TELEMETRY", "PYTHONSAFEPATH")}
    return {**env, "PYTHONPATH": str(REPO), **(extra or {})}


def find_python(minor: str) -> str | None:
    """A Python `minor` ("3.13") that runs: pythonX.Y on PATH, else the newest X.Y pyenv has
    installed, found in its versions folder ($PYENV_ROOT, or ~/.pyenv) as scripts/setup.sh finds
    it: its shim fails while another version is selected, and a machine's own PATH (a fresh
    Debian's, .ci/run's) has no pyenv at all."""
    want = tuple(int(p) for p in minor.split("."))
    check = ["-c", f"import sys; sys.exit(sys.version_info[:2] != {want})"]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    installed = sorted(root.glob(f"{minor}.*/bin/python{minor}"), reverse=True,
                       key=lambda p: [int(n) if n.isdigit() else -1
                                      for n in p.parent.parent.name.replace("-", ".").split(".")])
    for found in (shutil.which(f"python{minor}"), *map(str, installed)):
        if found and subprocess.run([found, *check], capture_output=True).returncode == 0:
            return found
    return None


def killed_and_resumed(args: list, tmp_path: Path) -> Path:
    """`run --out tmp_path/a ARGS` uninterrupted, and `run --out tmp_path/b ARGS` SIGKILLed (its
    process group) once a chunk is committed, then run again: b's output equals a's. Returns b."""
    import signal

    def ok(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
        assert_no_traceback(proc)
        assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    ok(run_cli(["run", "--out", tmp_path / "a", *args]), "uninterrupted")
    b = tmp_path / "b"
    proc = popen_cli(["run", "--out", b, *args], env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.05"})
    wait_for(lambda: any((b / "parts").glob("chunk-*.parquet")), 120, "a chunk committed", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (b / "keypoints.parquet").exists(), "killed after the end: nothing was interrupted"
    resumed = ok(run_cli(["run", "--out", b, *args]), "resume")
    assert "resuming:" in resumed.stderr, resumed.stderr
    assert_same_output(b, tmp_path / "a")
    return b


# --- crafted inputs, shared with scripts/bench/hostile*.py (which measure what each costs) --------
def tree_members(root: Path, prefix: str = "PHOENIX-2014-T") -> list[tuple[str, bytes]]:
    """Every file of a tree as (its archive member name under `prefix`, its bytes), by name."""
    return [(f"{prefix}/{p.relative_to(root).as_posix()}", p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()]


def tar_of(dest: Path, members: list[tuple[str, bytes]], fmt: int | None = None) -> Path:
    """`members` (name, bytes) as a tar, gzipped where dest's name ends in .gz, in tarfile's
    format `fmt` (its default where None: PAX), each with one fixed mtime."""
    import io
    import tarfile

    with tarfile.open(dest, "w:gz" if dest.name.endswith(".gz") else "w",
                      format=tarfile.DEFAULT_FORMAT if fmt is None else fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tf.addfile(info, io.BytesIO(data))
    return dest


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shipped_zip(onnx: bytes, stem: str, extra: dict[str, bytes] | None = None) -> bytes:
    """A zip laid out as OpenMMLab's onnx_sdk zips: <stem>/end2end.onnx beside its json files."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{stem}/deploy.json", b"{}")
        z.writestr(f"{stem}/end2end.onnx", onnx)
        z.writestr(f"{stem}/pipeline.json", b"{}")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


def interleaved_frames(sample_root: Path, folder: Path) -> Path:
    """One folder of frames (`--dataset FOLDER`): hopper-1's and astronaut-1's first 8 frames in
    turn, so frames a poisoned model answers nonsense on alternate with frames it answers well."""
    import shutil

    folder.mkdir(parents=True)
    a = sorted(sample_root.rglob("hopper-1/*.png"))[:8]
    b = sorted(sample_root.rglob("astronaut-1/*.png"))[:8]
    for i, png in enumerate(p for pair in zip(a, b, strict=True) for p in pair):
        shutil.copyfile(png, folder / f"{i:04d}.png")
    return folder
