"""Broken video input, each case made for real from the shared sample's signer_demo.mp4/.webm: a
truncated file, bytes that do not decode, a file that is no video, a video of 0 frames, an unknown
codec, a frame range past the end, a container whose frame count is wrong. Each gets a clear
problem at plan time or a per-frame status, never a traceback, and never costs another video."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path

import av
import numpy as np
import pytest
from helpers import SHARED_DATA, assert_no_traceback, read_keypoints, run_cli, video_rows

from phoenix_keypoints.extract import sources
from phoenix_keypoints.extract.sources.base import Ref

VIDEOS = SHARED_DATA / "video-sample"


def make_broken(root: Path) -> Path:
    """One file per way a video can be broken, all made from the real sample."""
    mp4 = (VIDEOS / "signer_demo.mp4").read_bytes()
    webm = (VIDEOS / "signer_demo.webm").read_bytes()
    root.mkdir(parents=True)
    assert mp4.find(b"moov") < mp4.find(b"mdat"), "index first: a cut file still opens"
    (root / "truncated.mp4").write_bytes(mp4[: len(mp4) // 2])
    garbled = bytearray(mp4)
    start = mp4.find(b"mdat") + 20000
    for k in range(start, start + 40000, 7):  # damage inside the frames' data, not the index
        garbled[k] ^= 0x55
    (root / "garbled.mp4").write_bytes(bytes(garbled))
    (root / "notavideo.mp4").write_text("these are not the bytes of a video\n")
    assert webm.count(b"V_VP9") == 1
    (root / "unknowncodec.webm").write_bytes(webm.replace(b"V_VP9", b"V_QQQ"))
    # the WebM's header and tracks, then one cluster holding only its timecode: a video of 0 frames
    cluster = webm.find(bytes.fromhex("1F43B675"))
    (root / "empty.webm").write_bytes(webm[:cluster] + bytes.fromhex("1F43B675" "83" "E78100"))
    (root / "good.webm").write_bytes(webm)
    return root


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VIDEOS.is_dir():
        pytest.skip(f"shared video sample not found at {VIDEOS}")
    return make_broken(tmp_path_factory.mktemp("broken") / "vids")


def test_scan_says_what_is_wrong(broken: Path):
    src = sources.get("video")
    scans = {p.name: src.scan(broken, p.name) for p in sorted(broken.iterdir())}
    assert scans["notavideo.mp4"].problem.startswith("cannot open as a video (InvalidDataError")
    assert scans["unknowncodec.webm"].problem.startswith("unknown codec: PyAV's FFmpeg has no decoder")
    assert scans["empty.webm"].problem == "no frames"
    # the WebM's header says 0 frames; the demux count is what is planned
    with av.open(str(broken / "good.webm")) as c:
        assert c.streams.video[0].frames == 0
    assert scans["good.webm"].count == 58 and not scans["good.webm"].problem
    # the cut file's header still says 58 frames: its packets are planned, and the mismatch said
    cut = scans["truncated.mp4"]
    assert 0 < cut.count < 58 and not cut.problem
    assert cut.note == (f"the container says 58 frames, its packets are {cut.count} (truncated or "
                        "a wrong header): the packets are what is planned")
    past = src.scan(broken, "good.webm", start=50, end=70)
    assert past.problem == "range 50-70 is past the end: the video has 58 frames"


def test_frames_undecodable_keep_their_rows_and_places(broken: Path):
    """Every planned row comes out; a frame that does not decode is `not_decoded` at its own index,
    and the frames that decode are PyAV's own frames at the indices of their timestamps."""
    src = sources.get("video")
    for name in ("garbled.mp4", "truncated.mp4"):
        n = src.scan(broken, name).count
        got = list(src.frames(broken, Ref("video", name, (), 0, n)))
        assert [f.image for f in got] == [f"{name}#frame={i}" for i in range(n)]
        statuses = Counter(f.status for f in got)
        assert statuses["not_decoded"] >= 1 and statuses["ok"] >= 1, statuses
        with av.open(str(broken / name)) as c:
            s = c.streams.video[0]
            pts = sorted(p.pts for p in c.demux(s) if p.size)
        with av.open(str(broken / name)) as c:
            s = c.streams.video[0]
            s.thread_type = "NONE"  # as the workers decode: concealment of damage depends on it
            decoded = {}
            for packet in c.demux(s):
                with contextlib.suppress(av.FFmpegError):
                    for f in packet.decode():  # the first frame given with each timestamp
                        decoded.setdefault(f.pts, f.to_ndarray(format="rgb24"))
        for i, f in enumerate(got):
            if f.status == "ok":
                assert np.array_equal(f.rgb, decoded[pts[i]])
            else:
                assert f.rgb is None and pts[i] not in decoded


@pytest.mark.slow
def test_run_over_broken_videos_keeps_the_good_one(broken: Path, tmp_path: Path):
    """A run over all of them: problems listed, broken frames with statuses, the good video whole."""
    manifest = broken / "list.csv"
    manifest.write_text("name,split,path,start,end\n"
                        + "".join(f"{p.stem},test,{p.name},,\n" for p in sorted(broken.glob("*.*"))
                                  if p.suffix != ".csv" and p.stem != "good")
                        + "good,train,good.webm,1,8\npast,train,good.webm,50,70\n")
    out = tmp_path / "run"
    proc = run_cli(["run", "--manifest", manifest, "--out", out, "--allow-partial"])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    dataset = json.loads((out / "run.json").read_text())["dataset"]
    assert set(dataset["problems"]) == {"notavideo", "unknowncodec", "empty", "past"}
    assert set(dataset["notes"]) == {"truncated"} and "video(s) with a note: truncated" in proc.stderr
    table = read_keypoints(out)
    good = video_rows(table, "good")
    assert good.num_rows == 8 and set(good["status"].to_pylist()) == {"ok"}
    for name in ("garbled", "truncated"):
        rows = video_rows(table, name)
        assert rows.num_rows == sources.get("video").scan(broken, f"{name}.mp4").count
        assert "not_decoded" in rows["status"].to_pylist()
