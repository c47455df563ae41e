"""Property: a name made of any bytes is a path and nothing else, in every source kind (issue 30).

Hypothesis makes file names from ':', ',', '|', '%', '#', a leading '-', control characters,
bytes that are no UTF-8, `http:` and `..`, puts them beside one real video (or frame folder) in a
frame folder, a folder of videos, a manifest, a tar and a zip, and plans the corpus with the real
command line in this process (`slurm` without --submit: nothing extracted, no MediaPipe). Each
plan must end with exit 0, 1 or 2 and no exception, reach no host (a real listener on 127.0.0.1
hears nothing), open or list nothing of the test's folders outside the dataset and the run folder
(an audit hook sees every open and listing), and plan the real video's frames as without the names.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import VIDEOS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kinds import clip, phoenix_t
from test_names import Listener

from phoenix_keypoints.jobs import cli

EXAMPLES = 25
PIECES = [b":", b",", b"|", b"%", b"#", b"-", b"\x1b[2J", b"\r", b"\n", b"\t", b"\x7f", b"\xff",
          b"\xc3", b"\xe2\x80\xae", b" ", b".", b"a", b"1", b"http:", b"subfile,,:", b"..", b"/",
          b"\\", b"*", b"?", b"[", b"\xc3\xbc", b"u\xcc\x88", b"../host/secret", b"/proc/self/mem"]


names = st.lists(st.one_of(st.sampled_from(PIECES), st.binary(min_size=1, max_size=2)),
                 min_size=1, max_size=6).map(b"".join).filter(lambda b: b"\0" not in b)
on_disk = names.map(lambda b: b.replace(b"/", b"_")).filter(lambda b: b not in (b".", b".."))


class Watch:
    """Every path this process opens or lists below `base` (a Python audit hook: os.open, open,
    os.scandir, os.listdir; PyAV is given open files, so its reads are seen here too)."""

    base = ""
    allowed: tuple[str, ...] = ()
    strays: list[str] = []

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if not cls.base or event not in ("open", "os.scandir", "os.listdir"):
            return
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        for seen in {os.path.abspath(path), os.path.realpath(path)}:  # through links too
            if seen.startswith(cls.base) and not seen.startswith(cls.allowed):
                cls.strays.append(f"{event} {path}")


sys.addaudithook(Watch.hook)


@pytest.fixture(scope="module")
def listener():
    got = Listener()
    yield got
    got.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")
    b = tmp_path_factory.mktemp("names")
    clip(b / "good.mp4", 0)
    phoenix_t(b / "t")
    (b / "host").mkdir()
    (b / "host" / "secret.mp4").write_bytes((b / "good.mp4").read_bytes())
    return b


def _plan(ds: Path, out: Path, manifest: bool = False) -> tuple[int, str]:
    """The real command line in this process: exit status and what it printed."""
    err = io.StringIO()
    watched = (str(ds) if not manifest else str(ds.parent), str(out))
    Watch.base, Watch.allowed, Watch.strays = str(out.parent.parent), watched, []  # every example
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(["slurm", "--num-shards", "1", "--manifest" if manifest else "--dataset",
                             str(ds), "--out", str(out)])
        finally:
            Watch.base = ""
    return code, err.getvalue()


def _fresh(base: Path) -> Path:
    i = len(list(base.glob("ex-*")))
    return base / f"ex-{i:04d}"


def _check(code: int, err: str, out: Path, listener: Listener, video: str, frames: int) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "\x1b[2J" not in err, err
    assert listener.heard == [], listener.heard
    assert Watch.strays == [], Watch.strays
    if code == 0:
        plan = {r["video"]: r for r in pq.read_table(out / "plan.parquet").to_pylist()}
        assert plan[video]["num_frames"] == frames and not plan[video]["problem"], plan[video]


settings_ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _with_port(name: bytes, port: int) -> bytes:
    return name.replace(b"http:", f"http:127.0.0.1:{port}:".encode())


def _junk(folder: Path, name: bytes) -> None:
    """A file of a few bytes that are no image or video, named by the bytes given."""
    Path(os.fsdecode(os.fsencode(folder) + b"/" + name)).write_bytes(b"junk")


@settings_
@given(odd=st.lists(on_disk, min_size=1, max_size=3, unique=True))
def test_frame_folder(odd: list[bytes], base: Path, listener: Listener):
    ex = _fresh(base)
    root = ex / "PHOENIX-2014-T"
    shutil.copytree(base / "t" / "PHOENIX-2014-T", root)
    for name in odd:
        _junk(root / "features/fullFrame-210x260px/train/signer_demo-1",
              _with_port(name, listener.port))
    code, err = _plan(root, ex / "out")
    _check(code, err, ex / "out", listener, "signer_demo-1", 4)


@settings_
@given(odd=st.lists(on_disk, min_size=1, max_size=3, unique=True))
def test_video_folder(odd: list[bytes], base: Path, listener: Listener):
    ex = _fresh(base)
    ds = ex / "ds"
    (ds / "train").mkdir(parents=True)
    shutil.copyfile(base / "good.mp4", ds / "train" / "good.mp4")
    (ds / "test").mkdir()
    for name in odd:
        _junk(ds / "test", _with_port(name, listener.port) + b".mp4")
    code, err = _plan(ds, ex / "out")
    _check(code, err, ex / "out", listener, "good", 4)


@settings_
@given(odd=st.lists(names, min_size=1, max_size=3, unique=True))
def test_manifest(odd: list[bytes], base: Path, listener: Listener):
    ex = _fresh(base)
    ds = ex / "listed"
    ds.mkdir(parents=True)
    shutil.copyfile(base / "good.mp4", ds / "good.mp4")
    rows = [["name", "split", "path"], ["good", "train", "good.mp4"]]
    for i, name in enumerate(odd):
        name = _with_port(name, listener.port)
        if b"/" not in name and name not in (b".", b".."):
            _junk(ds, name)
        rows.append([f"odd{i}", "test", name.decode("utf-8", "surrogateescape")])
    with open(ds / "list.csv", "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
        csv.writer(f).writerows(rows)
    code, err = _plan(ds / "list.csv", ex / "out", manifest=True)
    _check(code, err, ex / "out", listener, "good", 4)


def _archive(base: Path, odd: list[bytes], port: int, kind: str) -> Path:
    """clips/train/good.mp4 and the odd names as clips/test/NAME.mp4, in a tar or a zip."""
    members = [("clips/train/good.mp4", (base / "good.mp4").read_bytes()),
               *((f"clips/test/{os.fsdecode(_with_port(n, port))}.mp4", b"junk") for n in odd)]
    ex = _fresh(base)
    ex.mkdir()
    path = ex / f"clips.{kind}"
    if kind == "tar":  # the names' bytes as they are (PAX headers carry any byte string)
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT, encoding="utf-8",
                          errors="surrogateescape") as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    else:  # zipfile stores text names: bytes that are no UTF-8 become U+FFFD
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members:
                z.writestr(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), data)
    return path


@pytest.mark.parametrize("kind", ["tar", "zip"])
@settings_
@given(odd=st.lists(names, min_size=1, max_size=3, unique=True))
def test_archive(kind: str, odd: list[bytes], base: Path, listener: Listener):
    path = _archive(base, odd, listener.port, kind)
    code, err = _plan(path, path.parent / "out")
    _check(code, err, path.parent / "out", listener, "good", 4)
