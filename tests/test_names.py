"""Names are data: what a corpus names is a path and nothing else (issue 30).

Each test builds a small corpus whose names would be read as something else (a protocol for
FFmpeg, a device or /proc behind a link, bytes that are no UTF-8, terminal escapes, another
spelling of the same file) and meets it with the real command line. Planning-only commands
(`slurm` without --submit) are used where no keypoint is needed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REPO, VIDEOS, assert_no_traceback, popen_cli, run_cli
from kinds import clip, phoenix_t


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


class Listener:
    """A real TCP listener on 127.0.0.1 that accepts and never answers: what it hears is kept."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.heard: list[bytes] = []
        self.open: list[socket.socket] = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.open.append(conn)  # held open, never answered: a client would wait forever
            conn.settimeout(0.5)
            try:
                self.heard.append(conn.recv(300) or b"(connected)")
            except OSError:
                self.heard.append(b"(connected)")

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        for c in self.open:
            c.close()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    got = Listener()
    yield got
    got.close()


def plan(args: list, cwd: Path | None = None, code: int = 0) -> subprocess.CompletedProcess:
    """Plan only (`slurm` prints the scripts, submits nothing): no frame is extracted."""
    proc = run_cli(["slurm", "--num-shards", "1", *map(str, args)], cwd=cwd, timeout=120)
    assert_no_traceback(proc)
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def planned(out: Path) -> dict[str, dict]:
    return {r["video"]: r for r in pq.read_table(out / "plan.parquet").to_pylist()}


# --- 1. paths reach decoders as paths ----------------------------------------------------------
def protocol_names(port: int) -> list[str]:
    """Names FFmpeg would read as a URL or as another file, when given as a name."""
    return [f"http:127.0.0.1:{port}.mp4", f"tcp:127.0.0.1:{port}.mp4",
            "subfile,,start,0,end,0,,:good.mp4", "concat:good.mp4|good.mp4.mp4"]


def test_protocol_names_are_files_and_reach_no_host(listener: Listener, tmp_path: Path):
    """Run with `--dataset .` (no '/' before a name's ':'): every odd name is its own file, the
    listener hears nothing, and the real video's frames are extracted."""
    ds = tmp_path / "ds"
    clip(ds / "good.mp4", 0)
    for name in protocol_names(listener.port):
        (ds / name).write_bytes(b"not a video")
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", ".", "--out", out, "--workers-per-gpu", "1"], cwd=ds,
                   timeout=120)
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert listener.heard == []
    got = planned(out)
    assert got["good"]["num_frames"] == 4
    for name in protocol_names(listener.port):
        row = got[name[:-len(".mp4")]]
        assert row["num_frames"] == 0 and row["chunk"] == -1, row  # its own bytes: no video
        assert "cannot open as a video" in row["problem"], row
    # a video file that holds an ffconcat list is no way to another file either
    (ds / "list.mp4").write_text("ffconcat version 1.0\nfile good.mp4\n")
    plan(["--dataset", ".", "--out", tmp_path / "out2"], cwd=ds)
    assert planned(tmp_path / "out2")["list"]["num_frames"] == 0


def test_planning_never_waits_on_a_host_and_stops_on_sigterm(listener: Listener, tmp_path: Path):
    """A listener that never answers cannot hold the planner: it is never reached, and SIGTERM
    during planning ends the command (before: it waited forever, only SIGKILL stopped it)."""
    ds = tmp_path / "ds"
    clip(ds / "good.mp4", 0)
    for i in range(200):
        (ds / f"http:127.0.0.1:{listener.port}-{i:03d}.mp4").write_bytes(b"x" * 64)
    p = popen_cli(["slurm", "--num-shards", "1", "--dataset", ".", "--out", tmp_path / "out"], cwd=ds)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("SIGTERM did not stop the planner within 30 s")
    assert "Traceback" not in err, err
    assert p.returncode in (0, 143, -signal.SIGTERM), (p.returncode, err)
    assert listener.heard == []


# --- 3. any byte string is a name; what is printed is escaped ------------------------------------
def test_names_that_are_no_utf8_or_steer_the_terminal(tmp_path: Path):
    """A stray file named with byte 0xff, or with ESC and CR, in a frame folder: skipped with its
    reason, the other frames extracted, every name printed escaped (before: a traceback)."""
    root = phoenix_t(tmp_path / "t")
    folder = root / "features/fullFrame-210x260px/train/signer_demo-1"
    Path(os.fsdecode(os.fsencode(folder) + b"/\xff.png")).write_bytes(b"x")
    (folder / "images0003\x1b[2J\r.png").write_bytes(b"x")
    out = tmp_path / "R"
    proc = run_cli(["run", "--dataset", root, "--out", out, "--workers-per-gpu", "1"], timeout=300)
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[2J" not in proc.stderr + proc.stdout
    assert "images0003\\x1b[2J\\x0d.png (not a frame name)" in proc.stderr
    assert "\\udcff.png (name not UTF-8)" in proc.stderr
    kept = pq.read_table(out / "keypoints.parquet", columns=["video"]).column("video").to_pylist()
    assert kept.count("signer_demo-1") == 4
    ignored = planned(out)["signer_demo-1"]["ignored"]
    assert {"name": "\\udcff.png", "reason": "name not UTF-8"} in ignored


def test_a_video_named_with_bytes_that_are_no_utf8(tmp_path: Path):
    """A folder of videos: the file that no output could name is skipped and named, the rest planned."""
    ds = tmp_path / "ds"
    clip(ds / "good.mp4", 0)
    Path(os.fsdecode(os.fsencode(ds) + b"/bad\xff\xfe.mp4")).write_bytes(b"x")
    out = tmp_path / "out"
    plan(["--dataset", ds, "--out", out])
    assert planned(out)["good"]["num_frames"] == 4 and len(planned(out)) == 1
    info = (out / "run.json").read_text()
    assert "bad\\\\udcff\\\\udcfe.mp4 (its name is not UTF-8" in info


# --- 2. links to devices, procfs and sockets ---------------------------------------------------
def test_links_to_devices_and_proc_are_named_and_never_opened(tmp_path: Path):
    """Manifest rows that are links to /proc/self/mem, /dev/zero and a FIFO are counted among the
    links leaving the dataset like a link to an ordinary file outside, and are never read; a frame
    file that links to /proc/self/mem is `not_a_file` (before: opened and not counted)."""
    listed = tmp_path / "listed"
    clip(listed / "own.mp4", 0)
    (listed / "mem.mp4").symlink_to("/proc/self/mem")
    (listed / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.mp4")
    (listed / "fifo.mp4").symlink_to(tmp_path / "fifo.mp4")
    (listed / "out.mp4").symlink_to(VIDEOS / "signer_demo.mp4")
    (listed / "list.csv").write_text("name,split,path\nown,train,own.mp4\nmem,train,mem.mp4\n"
                                     "zero,train,zero\nfifo,train,fifo.mp4\nout,train,out.mp4\n")
    out = tmp_path / "out"
    plan(["--manifest", listed / "list.csv", "--out", out])
    assert json.loads((out / "run.json").read_text())["dataset"]["links_outside"] == 4
    got = planned(out)
    assert got["own"]["num_frames"] == 4 and got["out"]["num_frames"] > 0
    for name, why in (("mem", "/proc"), ("zero", "a device"), ("fifo", "a FIFO")):
        assert why in got[name]["problem"] and "not opened" in got[name]["problem"], got[name]
        assert got[name]["links"] and got[name]["num_frames"] == 0


def test_a_frame_that_links_to_proc_is_not_read(tmp_path: Path):
    from phoenix_keypoints.extract.keypoints.frames import read_file

    (tmp_path / "images0001.png").symlink_to("/proc/self/mem")
    assert read_file(tmp_path / "images0001.png")[2:] == (
        "not_a_file", "a file of the kernel's /proc, /sys or /dev")


# --- 4. archive names as their makers meant them --------------------------------------------------
def _unflag_utf8(zpath: Path) -> None:
    """Clear the UTF-8 flag (bit 11) of every entry, local and central, as Info-ZIP's `zip` on
    Linux writes its UTF-8 names: the bytes stay UTF-8, the flag says nothing."""
    data = bytearray(zpath.read_bytes())
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(sig)
        while i >= 0:
            data[i + at] &= ~0x08 & 0xFF  # bit 11 is bit 3 of the flags' high byte
            data[i + at + 1] &= ~0x08 & 0xFF
            i = data.find(sig, i + 4)
    zpath.write_bytes(bytes(data))


def _zip_videos(tmp_path: Path, how: str) -> Path:
    src = tmp_path / "src"
    clip(src / "clips" / "train" / "München-1.mp4", 0)
    clip(src / "clips" / "test" / "plain.mp4", 30)
    zpath = tmp_path / "clips.zip"
    if how == "info-zip":
        deps = subprocess.run(["bash", str(REPO / "scripts" / "system-deps.sh"), "zip"],
                              capture_output=True, text=True, timeout=900)
        if deps.returncode == 3:
            pytest.skip(deps.stderr.strip())
        subprocess.run(["zip", "-q", "-r", "-0", str(zpath), "clips"], cwd=src, check=True)
    else:
        import zipfile

        with zipfile.ZipFile(zpath, "w") as z:
            for f in sorted((src / "clips").rglob("*")):
                z.write(f, f.relative_to(src).as_posix())
        _unflag_utf8(zpath)
    return zpath


@pytest.mark.parametrize("how", ["unflagged", "info-zip"])
def test_a_zip_name_in_utf8_without_the_flag_is_read_as_utf8(how: str, tmp_path: Path):
    """`zip -r` on Linux stores München-1 in UTF-8 without the UTF-8 flag: the video keeps its
    name and its frames (before: M├╝nchen-1, read as cp437)."""
    zpath = _zip_videos(tmp_path, how)
    out = tmp_path / "out"
    plan(["--dataset", zpath, "--out", out])
    got = planned(out)
    assert set(got) == {"München-1", "plain"}, set(got)
    assert got["München-1"]["num_frames"] == 4 and not got["München-1"]["problem"]


# --- 5. a path is compared by the file it names ----------------------------------------------------
def test_a_manifest_path_respelled_names_the_same_file(tmp_path: Path):
    """A manifest row respelled as the absolute path into its folder (through a link to it) and as
    `./videos//other.mp4`: verify finds nothing changed, and the run keeps every row and extracts
    nothing again (before: "removed", rows dropped with exit 0; verify exit 1 and re-extraction)."""
    listed = tmp_path / "listed"
    clip(listed / "videos" / "clip.mp4", 0, frames=2)
    clip(listed / "videos" / "other.mp4", 30, frames=2)
    (tmp_path / "via").symlink_to(listed)
    manifest = listed / "list.csv"
    manifest.write_text("name,split,path\nclip,train,videos/clip.mp4\nother,train,videos/other.mp4\n")
    out = tmp_path / "out"
    args = ["run", "--manifest", manifest, "--out", out, "--workers-per-gpu", "1"]
    first = run_cli(args)
    assert first.returncode == 0, first.stderr
    manifest.write_text(f"name,split,path\nclip,train,{tmp_path / 'via' / 'videos' / 'clip.mp4'}\n"
                        "other,train,./videos//other.mp4\n")
    verify = run_cli(["verify", "--out", out])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    again = run_cli(args)
    assert_no_traceback(again)
    assert again.returncode == 0, again.stderr
    assert "0 frame(s) in 0 chunk(s) left" in again.stderr, again.stderr
    videos = pq.read_table(out / "keypoints.parquet", columns=["video"]).column("video").to_pylist()
    assert sorted(videos) == ["clip"] * 2 + ["other"] * 2


def test_out_through_a_link_and_dotdot_is_the_folder_the_shell_means(tmp_path: Path):
    """`--out LINK/../NAME` is NAME beside LINK's target, as `mkdir LINK/../NAME` makes it (before:
    every try failed with a raw [Errno 2] on a temp file and said to run it again)."""
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "link").symlink_to(tmp_path / "elsewhere" / "deep")
    ds = tmp_path / "ds"
    clip(ds / "good.mp4", 0)
    plan(["--dataset", ds, "--out", "link/../NAME"], cwd=tmp_path / "here")
    assert (tmp_path / "elsewhere" / "NAME" / "plan.parquet").is_file()
    assert not (tmp_path / "here" / "NAME").exists()


# --- 6. a corpus that moves is followed --------------------------------------------------------------
def test_a_corpus_that_moved_is_followed(tmp_path: Path):
    """The corpus's link re-pointed to an identical `cp -a` copy: the same command goes on from
    the committed parts, says where the corpus is now and keeps the move in run.json; a copy that
    differs is refused naming both resolved places (before: refused with two equal strings)."""
    ds = tmp_path / "ds"
    clip(ds / "a.mp4", 0, frames=2)
    link = tmp_path / "link"
    link.symlink_to(ds)
    out = tmp_path / "out"
    args = ["run", "--dataset", "link", "--out", out, "--workers-per-gpu", "1"]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    subprocess.run(["cp", "-a", str(ds), str(tmp_path / "ds2")], check=True)
    link.unlink()
    link.symlink_to(tmp_path / "ds2")
    moved = run_cli(args, cwd=tmp_path)
    assert_no_traceback(moved)
    assert moved.returncode == 0, moved.stderr
    assert f"the corpus moved: {ds} -> {tmp_path / 'ds2'}" in moved.stderr
    assert "0 frame(s) in 0 chunk(s) left" in moved.stderr
    info = json.loads((out / "run.json").read_text())["dataset"]
    assert info["root"] == str(tmp_path / "ds2") and info["moves"] == [f"{ds} -> {tmp_path / 'ds2'}"]
    clip(tmp_path / "ds3" / "a.mp4", 0, frames=2)
    clip(tmp_path / "ds3" / "b.mp4", 30, frames=2)
    link.unlink()
    link.symlink_to(tmp_path / "ds3")
    other = run_cli(args, cwd=tmp_path)
    assert_no_traceback(other)
    assert other.returncode == 2
    assert f"dataset (link, at {tmp_path / 'ds2'} when planned, at {tmp_path / 'ds3'} now)" in \
        other.stderr, other.stderr


def test_a_tar_gz_with_bytes_after_its_gzip_stream_is_read_as_tar_reads_it(tmp_path: Path):
    """1000 zero bytes after the gzip stream (gzip -t and GNU tar accept it): planned, its video
    read through the index, the bytes named in run.json's anomalies (before: refused, "download
    it again?"). A file cut inside the stream is still refused."""
    import tarfile

    src = tmp_path / "src"
    clip(src / "clips" / "train" / "a.mp4", 0)
    tgz = tmp_path / "clips.tar.gz"
    with tarfile.open(tgz, "w:gz") as t:
        t.add(src / "clips", "clips")
    whole = tgz.read_bytes()
    tgz.write_bytes(whole + b"\0" * 1000)
    out = tmp_path / "out"
    plan(["--dataset", tgz, "--out", out])
    assert planned(out)["a"]["num_frames"] == 4
    notes = json.loads((out / "run.json").read_text())["dataset"]["anomalies"]
    assert f"1000 byte(s) after the gzip stream (from byte {len(whole)}) are ignored" in notes[0]
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    proc = run_cli(["slurm", "--num-shards", "1", "--dataset", cut, "--out", tmp_path / "o2"])
    assert_no_traceback(proc)
    assert proc.returncode == 2 and "download it again?" in proc.stderr, proc.stderr


# --- 7. smaller items ------------------------------------------------------------------------------
def test_device_and_fifo_members_are_named_for_what_they_are(tmp_path: Path):
    """A tar whose frame names are a character device and a FIFO: each frame is `not_a_file`
    saying which (before: "a folder or link in the archive" for both)."""
    import tarfile

    root = phoenix_t(tmp_path / "t")
    folder = "PHOENIX-2014-T/features/fullFrame-210x260px/train/signer_demo-1"
    tpath = tmp_path / "t.tar"
    with tarfile.open(tpath, "w") as t:
        for p in sorted(root.rglob("*")):
            rel = f"PHOENIX-2014-T/{p.relative_to(root).as_posix()}"
            if rel in (f"{folder}/images0002.png", f"{folder}/images0003.png"):
                info = tarfile.TarInfo(rel)
                info.type = tarfile.CHRTYPE if rel.endswith("2.png") else tarfile.FIFOTYPE
                t.addfile(info)
            else:
                t.add(p, rel, recursive=False)
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", tpath, "--out", out, "--workers-per-gpu", "1"])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in pq.read_table(out / "keypoints.parquet", columns=["video", "frame", "status",
                                                                        "note"]).to_pylist()
            if r["video"] == "signer_demo-1"]
    assert [(r["status"], r["note"]) for r in rows[1:3]] == [
        ("not_a_file", "a device in the archive"), ("not_a_file", "a FIFO in the archive")]
    assert rows[0]["status"] == rows[3]["status"] == "ok"


def test_a_manifest_glob_over_folders_says_so(tmp_path: Path):
    """`*/*/*.png` in a manifest: the row's problem says a glob picks files in one folder (before:
    "no folder"); the other rows are planned."""
    listed = tmp_path / "listed"
    clip(listed / "own.mp4", 0)
    (listed / "a" / "b").mkdir(parents=True)
    (listed / "list.csv").write_text("name,split,path\nown,train,own.mp4\nmany,train,*/*/*.png\n")
    out = tmp_path / "out"
    plan(["--manifest", listed / "list.csv", "--out", out])
    got = planned(out)
    assert got["own"]["num_frames"] == 4
    assert "a glob picks frame files in one folder" in got["many"]["problem"], got["many"]


def test_status_and_run_agree_on_a_shuffled_corpus_file(tmp_path: Path):
    """A manifest whose rows are swapped lists the same videos, but its bytes differ, which `run`
    counts as a change: `status` says so too (before: "as planned")."""
    listed = tmp_path / "listed"
    clip(listed / "a.mp4", 0, frames=2)
    clip(listed / "b.mp4", 30, frames=2)
    rows = ["a,train,a.mp4", "b,train,b.mp4"]
    (listed / "list.csv").write_text("\n".join(["name,split,path", *rows]) + "\n")
    out = tmp_path / "out"
    plan(["--manifest", listed / "list.csv", "--out", out])
    assert "corpus:   as planned" in run_cli(["status", "--out", out]).stdout
    (listed / "list.csv").write_text("\n".join(["name,split,path", *rows[::-1]]) + "\n")
    status = run_cli(["status", "--out", out])
    assert_no_traceback(status)
    assert "corpus:   changed since planned: the same videos and frames" in status.stdout, status.stdout


def test_a_folder_named_in_another_encoding_is_named_as_such(tmp_path: Path):
    """The csv lists München-1, the folder's name is that name in Latin-1 bytes (copied from a
    Windows disk): the video's problem names the folder and the encoding (before: "no folder");
    the other video is planned."""
    root = phoenix_t(tmp_path / "t")
    frames = root / "features/fullFrame-210x260px/train"
    os.rename(frames / "signer_demo-1", os.fsdecode(os.fsencode(frames) + b"/M\xfcnchen-1"))
    csv = root / "annotations/manual/PHOENIX-2014-T.train.corpus.csv"
    csv.write_text(csv.read_text(encoding="utf-8").replace("signer_demo-1|signer_demo-1/",
                                                           "München-1|München-1/"), encoding="utf-8")
    out = tmp_path / "out"
    plan(["--dataset", root, "--out", out])
    got = planned(out)
    assert "'M\\\\udcfcnchen-1' is that name read as cp1252" in got["München-1"]["problem"], got
    assert got["25October_2010_Monday_tagesschau-17"]["num_frames"] == 2


def test_the_start_line_counts_only_the_frames_that_will_be_read(tmp_path: Path):
    """A tar cut inside a video's frames: that video cannot be processed, and the start line says
    so and leaves its frames out of the count (before: "2 video(s), 6 frame(s)")."""
    import tarfile

    src = phoenix_t(tmp_path / "t")
    whole = tmp_path / "t.tar"
    with tarfile.open(whole, "w") as t:  # the corpus files first, the train video's frames last
        for p in sorted(src.rglob("*"), key=lambda p: ("features" in str(p), "train" in str(p),
                                                       str(p))):
            t.add(p, f"PHOENIX-2014-T/{p.relative_to(src).as_posix()}", recursive=False)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole.read_bytes()[:-30000])
    proc = run_cli(["run", "--dataset", cut, "--out", tmp_path / "out", "--workers-per-gpu", "1"])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert ": 2 video(s) (1 cannot be processed), 2 frame(s) (dev 2, train 0);" in proc.stderr, \
        proc.stderr
