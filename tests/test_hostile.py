"""Hostile input costs nothing: files other people made, crafted small, each met by the real command.

Labels pickles that would allocate terabytes from 30 bytes, a 390 KB PNG of 20000 x 20000 pixels,
archives with names stored twice, named outside the archive, a zip that disagrees with itself or is
named as a tar.gz, and links that lead out of the dataset. Each gets a named refusal (exit 2) or a
recorded per-frame status and a named anomaly, never a traceback, and costs nothing else.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
import shutil
import struct
import tarfile
import zipfile
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import (
    PHX_FRAMES,
    SHARED_SAMPLE,
    VIDEOS,
    assert_no_traceback,
    build_csl,
    run_cli,
    tar_of,
    tree_members,
)
from kinds import clip, phoenix_t, videos

from phoenix_keypoints.extract.corpora import discover

SIGNER = "features/fullFrame-210x260px/train/signer_demo-1"
OPTIONS = ["--workers-per-gpu", "1"]


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (SHARED_SAMPLE / "annotations").is_dir() or not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


def run(args: list, code: int = 0, cwd: Path | None = None):
    proc = run_cli(["run", *map(str, args), *OPTIONS], cwd=cwd)
    assert_no_traceback(proc)
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def rows(out: Path, video: str = "signer_demo-1") -> dict[int, dict]:
    t = pq.read_table(out / "keypoints.parquet", columns=["video", "frame", "image", "status", "note",
                                                           "file_size", "file_sha256"]).to_pylist()
    return {r["frame"]: r for r in t if r["video"] == video}


# --- labels pickles ------------------------------------------------------------------------------
def _s(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _labels_with(gloss: bytes) -> bytes:
    """{"info": [{"name": <the first CSL video>, "label_gloss": <gloss, as opcodes>}]}."""
    return (b"\x80\x02}" + _s("info") + b"]}" + _s("name") + _s("S000001_P0000_T00") + b"s"
            + _s("label_gloss") + gloss + b"sas.")


def _tuple_dag(levels: int, first: int = 0) -> bytes:
    """A dict whose key is t_k = (t_k-1, t_k-1): 2**levels nodes to hash in a few bytes a level,
    the tuples kept in the memo from entry `first` on (entries 48-57 are ASCII digits)."""
    out = b"\x80\x02}" + b"".join(b"Nq" + bytes([k]) + b"0" for k in range(first))
    out += b")q" + bytes([first]) + b"0"
    for k in range(first, first + levels):
        out += b"h" + bytes([k]) + b"h" + bytes([k]) + b"\x86q" + bytes([k + 1]) + b"0"
    return out + b"h" + bytes([first + levels]) + b"Ns."


OBJECT_ARRAY = (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R"
                b"(K\x01J\x40\x42\x0f\x00\x85cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87R(K\x03X"
                b"\x01\x00\x00\x00|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tb\x89]K\x01atb.")

# (id, the pickle's bytes, what the refusal says); on 218bf0e each took gigabytes, crashed,
# hung or was called "could run code"
LABEL_BOMBS = [
    ("ndarray-1e12", b"\x80\x02cnumpy\nndarray\n(\x8a\x06\x00\x10\xa5\xd4\xe8\x00\x85tR.",
     r"refused: numpy\.ndarray of shape \(1000000000000,\)"),
    ("bytearray-3GiB", b"\x80\x02c__builtin__\nbytearray\n\x8a\x05\x00\x00\x00\xc0\x00\x85R.",
     r"refused: it asks for builtins\.bytearray of int"),
    ("memo-index-2**28", b"\x80\x02Nr" + struct.pack("<I", 2**28) + b".",
     r"refused: LONG_BINPUT 268435456 would take what it builds past 64 MiB"),
    ("3MB-of-lists", b"\x80\x02(" + b"]" * 3_000_000 + b"l.",
     r"refused: EMPTY_LIST would take what it builds past \d+ MiB; a labels pickle of 3000005"),
    ("tuple-nested-1e6-as-key", b"\x80\x02})" + b"\x85" * 10**6 + b"Ns.",
     r"refused: it nests tuples more than 1000 deep"),
    ("tuple-dag-2**60-as-key", _tuple_dag(60), r"refused: its dict keys .* visits more than"),
    ("tuple-dag-2**32-from-memo-48", _tuple_dag(32, 48), r"refused: its dict keys .* visits more"),
    ("object-array-short-state", OBJECT_ARRAY, r"an object array of 1000000 items whose state holds 1"),
    ("gloss-nested-1e5", _labels_with(b"]" * 100_000 + b"a" * 99_999),
     r"info\[0\] \(S000001_P0000_T00\): a list where a string or number belongs"),
    ("truncated", pickle.dumps({"info": [{"name": "S000001_P0000_T00"}]}, 2)[:-5],
     r"not a readable labels pickle: truncated: the data ends inside"),
]


@pytest.mark.parametrize(("data", "said"), [b[1:] for b in LABEL_BOMBS], ids=[b[0] for b in LABEL_BOMBS])
def test_labels_pickle_bombs_are_refused_by_name(data: bytes, said: str, tmp_path: Path):
    """Each crafted labels pickle is refused with its own words and the file named, exit 2 (what
    each costs in memory: scripts/bench/hostile.py)."""
    root = build_csl(tmp_path / "csl", frames=2)
    labels = root / "sentence_label" / "csl2020ct_v2.pkl"
    labels.write_bytes(data)
    proc = run(["--dataset", root, "--out", tmp_path / "R"], code=2)
    assert f"error: {labels}: " in proc.stderr
    assert re.search(said, proc.stderr), proc.stderr[-1500:]
    assert "could run code" not in proc.stderr or "asks for" in proc.stderr


def test_labels_that_are_fine_still_load(tmp_path: Path):
    """Every protocol, numpy arrays (object ones too), sets and bytearrays: read as before."""
    labels = {"info": [{"name": "S000001_P0000_T00", "length": 2, "label_gloss": ["你", "好"],
                        "label_char": ["你", "好"], "label_word": ["你好"], "signer": 3,
                        "emb": np.arange(4.0), "obj": np.array([1, "a"], dtype=object),
                        "tags": {"a", "b"}, "raw": bytearray(b"xy"), "f": np.float32(2)}]}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        root = build_csl(tmp_path / f"p{protocol}", frames=2, labels=labels)
        (root / "sentence_label" / "csl2020ct_v2.pkl").write_bytes(pickle.dumps(labels, protocol))
        v = next(v for v in discover(root).videos if v.name == "S000001_P0000_T00")
        assert (v.speaker, v.gloss, v.translation) == ("3", "你 好", "你好"), protocol


# --- pixel bombs ---------------------------------------------------------------------------------
def png_bomb(width: int = 20000, height: int = 20000) -> bytes:
    """A gray PNG of width x height zeros: 390 KB on disk, 1.2 GB as the RGB array a decode makes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    z, row, parts = zlib.compressobj(9), b"\0" * (width + 1), []
    for _ in range(height):
        parts.append(z.compress(row))
    parts.append(z.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + \
        chunk(b"IEND", b"")


def jpeg_bomb(width: int = 30000, height: int = 30000) -> bytes:
    """A JPEG header saying width x height (start of frame), then the end-of-image marker."""
    sof = b"\x08" + struct.pack(">HH", height, width) + b"\x03\x01\x11\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + \
        b"\xff\xc0" + struct.pack(">H", len(sof) + 2) + sof + b"\xff\xd9"


def test_a_pixel_bomb_is_too_large_and_never_decoded(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    bomb = png_bomb()
    assert len(bomb) < 500_000
    (root / SIGNER / "images0002.png").write_bytes(bomb)
    (root / SIGNER / "images0003.png").write_bytes(jpeg_bomb())  # a JPEG named .png: its header
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out])
    got = rows(out)
    assert got[1]["status"] == got[2]["status"] == "too_large"
    assert "20000x20000 = 400,000,000 pixels" in got[1]["note"] and "30000x30000" in got[2]["note"]
    assert got[1]["file_size"] == len(bomb)  # its bytes were read (and recorded), not decoded
    assert got[0]["status"] == got[3]["status"] == "ok"  # the others of its video are untouched
    assert "too_large" in json.loads((out / "run.json").read_text())["merge"]["statuses"]


@pytest.mark.parametrize("kind", ["frames", "video"])
def test_max_pixels_is_settable(kind: str, tmp_path: Path):
    """Below the frames' own size, every frame is too_large (a frame folder's PNGs, a video's
    stream size): the limit is read before decoding, and recorded with the run."""
    root = phoenix_t(tmp_path / "t") if kind == "frames" else videos(tmp_path / "v")
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out, "--max-pixels", "1000"])
    statuses = set(pq.read_table(out / "keypoints.parquet", columns=["status"])["status"].to_pylist())
    assert statuses == {"too_large"}
    assert json.loads((out / "run.json").read_text())["options"]["max_pixels"] == 1000
    again = run_cli(["run", "--dataset", root, "--out", out, *OPTIONS])  # the default is another run
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr
    other = run_cli(["run", "--dataset", root, "--out", out, "--max-pixels", "2000", *OPTIONS])
    assert other.returncode == 2 and "max_pixels" in other.stderr


# --- archives ------------------------------------------------------------------------------------
def test_a_name_stored_twice_uses_the_last_copy_and_says_so(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    members = tree_members(root)
    first = next(i for i, (n, _) in enumerate(members) if n.endswith("signer_demo-1/images0001.png"))
    other = (PHX_FRAMES / "train/fingerspelling_hand-1/images0001.png").read_bytes()
    members.append((members[first][0], other))  # the same name again, later, other bytes
    tgz = tar_of(tmp_path / "twice.tar.gz", members)
    out = tmp_path / "R"
    proc = run(["--dataset", tgz, "--out", out])
    assert rows(out)[0]["file_sha256"] == hashlib.sha256(other).hexdigest()  # the last copy
    said = "1 member name(s) stored more than once; the last copy in the archive is used"
    assert said in proc.stderr and members[first][0] in proc.stderr
    assert proc.stderr.count(said) == 1, "at the start of the run, once"
    assert "warning(s) about the input above, at the start" in proc.stderr  # the end points at it
    assert any(said in a for a in json.loads((out / "run.json").read_text())["dataset"]["anomalies"])


def test_names_outside_the_archive_are_left_out_and_named(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    frame = (root / SIGNER / "images0001.png").read_bytes()
    members = [*tree_members(root), ("/FD/images0004.png", frame),
               (f"PHOENIX-2014-T/{SIGNER}/../../../../../escape.png", frame),
               (f"/PHOENIX-2014-T/{SIGNER}/images0009.png", frame)]
    tar = tar_of(tmp_path / "abs.tar", members)
    out = tmp_path / "R"
    proc = run(["--dataset", tar, "--out", out])
    assert len(rows(out)) == 4, "an absolute name is no frame of the corpus"
    said = "3 member(s) named outside the archive (absolute or '..') are left out: /FD/images0004.png"
    assert said in proc.stderr, proc.stderr
    assert said in " ".join(json.loads((out / "run.json").read_text())["dataset"]["anomalies"])


def _zip(root: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zf:
        for name, data in tree_members(root):
            zf.writestr(name, data)
    return dest


def _patched(zpath: Path, change) -> None:
    data = bytearray(zpath.read_bytes())
    with zipfile.ZipFile(zpath) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    change(data, infos)
    zpath.write_bytes(bytes(data))


def _local_name_at(data: bytearray, offset: int) -> int:
    return offset + 30  # a local header's name follows its 30 fixed bytes


def _central_entry(data: bytearray, name: str) -> int:
    """Where the central directory's entry of `name` starts (its name follows 46 fixed bytes)."""
    return next(i for i in range(len(data)) if data[i:i + 4] == b"PK\x01\x02"
                and data[i + 46:i + 46 + len(name)] == name.encode())


ZIP_DAMAGE = {
    "local header names another file": (
        lambda d, infos: d.__setitem__(
            slice(_local_name_at(d, infos[f"PHOENIX-2014-T/{SIGNER}/images0002.png"].header_offset)
                  + len(f"PHOENIX-2014-T/{SIGNER}/images000"),
                  _local_name_at(d, infos[f"PHOENIX-2014-T/{SIGNER}/images0002.png"].header_offset)
                  + len(f"PHOENIX-2014-T/{SIGNER}/images0002")), b"9"),
        "its local header names"),
    "central directory points at another member": (
        lambda d, infos: d.__setitem__(
            slice(_central_entry(d, f"PHOENIX-2014-T/{SIGNER}/images0002.png") + 42,
                  _central_entry(d, f"PHOENIX-2014-T/{SIGNER}/images0002.png") + 46),
            struct.pack("<I", infos[f"PHOENIX-2014-T/{SIGNER}/images0003.png"].header_offset)),
        "points at the local header of another member"),
}


@pytest.mark.parametrize("change, words", ZIP_DAMAGE.values(), ids=list(ZIP_DAMAGE))
def test_a_zip_that_disagrees_with_itself_costs_one_frame(change, words: str, tmp_path: Path):
    zpath = _zip(phoenix_t(tmp_path / "t"), tmp_path / "z.zip")
    _patched(zpath, change)
    out = tmp_path / "R"
    run(["--dataset", zpath, "--out", out])
    got = rows(out)
    assert got[1]["status"] == "unreadable" and words in got[1]["note"], got[1]
    assert [got[i]["status"] for i in (0, 2, 3)] == ["ok"] * 3


@pytest.mark.parametrize("named, made", [("x.tar.gz", "zip"), ("x.zip", "tar.gz"),
                                         ("x.tar.gz", "tar")])
def test_a_misnamed_archive_is_named_for_what_it_is(named: str, made: str, tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    built = _zip(root, tmp_path / "a.zip") if made == "zip" else \
        tar_of(tmp_path / f"a.{made}", tree_members(root))
    shutil.move(built, tmp_path / named)
    proc = run(["--dataset", tmp_path / named, "--out", tmp_path / "R"], code=2)
    what = {"zip": "a zip file", "tar.gz": "a gzip file", "tar": "a tar file"}[made]
    rename = {"zip": "x.zip", "tar.gz": "x.tar.gz", "tar": "x.tar"}[made]
    assert f"is {what}" in proc.stderr and f"Rename it to {rename}" in proc.stderr, proc.stderr


def test_a_symlink_member_is_never_followed_to_the_host(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    host = tmp_path / "host.png"
    host.write_bytes((root / SIGNER / "images0001.png").read_bytes())
    tar = tmp_path / "links.tar"
    with tarfile.open(tar, "w") as tf:
        for name, data in tree_members(root):
            if name.endswith("signer_demo-1/images0002.png"):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, str(host)
                tf.addfile(info)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    out = tmp_path / "R"
    run(["--dataset", tar, "--out", out])
    row = rows(out)[1]
    assert row["status"] == "not_a_file" and row["file_size"] is None, row


# --- links on disk ---------------------------------------------------------------------------------
def _host(tmp_path: Path) -> Path:
    """A folder of this host outside the dataset: three frames and files that are no frames."""
    host = tmp_path / "host"
    host.mkdir()
    for png in sorted((PHX_FRAMES / "train/signer_demo-1").glob("images*.png"))[:3]:
        shutil.copyfile(png, host / png.name)
    for i in range(5):
        (host / f"secret-{i}.txt").write_text("private")
    return host


@pytest.mark.parametrize("follow", [True, False], ids=["followed", "no-follow-links"])
def test_a_link_out_of_a_manifests_folder(follow: bool, tmp_path: Path):
    host = _host(tmp_path)
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "linked").symlink_to(host)
    clip(listed / "own.mp4", 0)
    (listed / "list.csv").write_text("name,split,path\nown,train,own.mp4\nlinked,test,linked\n")
    out = tmp_path / "R"
    proc = run(["--manifest", listed / "list.csv", "--out", out,
                *([] if follow else ["--no-follow-links"])])
    info = json.loads((out / "run.json").read_text())
    plan = pq.read_table(out / "plan.parquet").to_pylist()
    assert "secret" not in (out / "run.json").read_text() + str(plan), "host file names listed"
    record = f"linked -> {host}"
    d = info["dataset"]
    assert d["links_outside"] == 1 and d["links_outside_examples"] == [record]
    assert "1 link(s) lead outside the dataset" in proc.stderr and record in proc.stderr
    linked = next(r for r in plan if r["video"] == "linked")
    assert linked["links"] == [record]
    if follow:
        assert linked["num_frames"] == 3 and linked["chunk"] >= 0
        assert "5 entries there that are no frames skipped, not named" in d["notes"]["linked"]
    else:
        assert linked["chunk"] == -1 and "not followed (--no-follow-links)" in linked["problem"]
        assert {r["video"] for r in rows_all(out)} == {"own"}


def rows_all(out: Path) -> list[dict]:
    return pq.read_table(out / "keypoints.parquet", columns=["video", "frame"]).to_pylist()


def test_a_frame_that_links_to_a_host_file_records_its_target(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    host = _host(tmp_path) / "images0002.png"
    (root / SIGNER / "images0002.png").unlink()
    (root / SIGNER / "images0002.png").symlink_to(host)
    inside = root / "features/fullFrame-210x260px/dev/25October_2010_Monday_tagesschau-17"
    shutil.move(inside, root / "elsewhere")
    inside.symlink_to(root / "elsewhere")  # a link that stays inside: counted, not named
    out = tmp_path / "R"
    proc = run(["--dataset", root, "--out", out])
    d = json.loads((out / "run.json").read_text())["dataset"]
    record = f"{SIGNER}/images0002.png -> {host}"
    assert d["links_outside_examples"] == [record] and d["links_inside"] == 1
    assert record in proc.stderr
    plan = {r["video"]: r["links"] for r in pq.read_table(out / "plan.parquet").to_pylist()}
    assert plan["signer_demo-1"] == [record]
    assert rows(out)[1]["file_size"] == host.stat().st_size  # followed: the target's bytes
    refused = run(["--dataset", root, "--out", tmp_path / "R2", "--no-follow-links"])
    assert "signer_demo-1" in refused.stderr and "not followed" in refused.stderr
    assert {r["video"] for r in rows_all(tmp_path / "R2")} == {"25October_2010_Monday_tagesschau-17"}


def test_a_folder_of_videos_walks_into_links(tmp_path: Path):
    root = videos(tmp_path / "v")
    away = tmp_path / "away" / "more"
    clip(away / "far.mp4", 10)
    (root / "train" / "more").symlink_to(away)
    (root / "train" / "loop").symlink_to(root)  # a loop of links ends
    out = tmp_path / "R"
    proc = run(["--dataset", root, "--out", out])
    assert {r["video"] for r in rows_all(out)} == {"signer_a", "signer_b", "far"}
    assert f"train/more/far.mp4 -> {away / 'far.mp4'}" in proc.stderr
    run(["--dataset", root, "--out", tmp_path / "R2", "--no-follow-links"])
    assert {r["video"] for r in rows_all(tmp_path / "R2")} == {"signer_a", "signer_b"}


@pytest.mark.parametrize("kind", ["phoenix", "csl-daily"])
def test_a_corpus_file_behind_a_link_out(kind: str, tmp_path: Path):
    """A corpus file (PHOENIX's csv, CSL-Daily's split list) that is a link leaving the dataset: read
    and named by default; --no-follow-links refuses the dataset, naming the file and its target."""
    if kind == "phoenix":
        root = phoenix_t(tmp_path / "t")
        rel = "annotations/manual/PHOENIX-2014-T.train.corpus.csv"
    else:
        root = build_csl(tmp_path / "csl", frames=2)
        rel = "sentence_label/split_1.txt"
    away = tmp_path / "elsewhere" / Path(rel).name
    away.parent.mkdir()
    shutil.move(root / rel, away)
    (root / rel).symlink_to(away)
    proc = run(["--dataset", root, "--out", tmp_path / "R"])
    record = f"{rel} -> {away}"
    assert record in proc.stderr
    assert json.loads((tmp_path / "R" / "run.json").read_text())["dataset"]["links_outside"] == 1
    refused = run(["--dataset", root, "--out", tmp_path / "R2", "--no-follow-links"], code=2)
    assert record in refused.stderr and "not followed (--no-follow-links)" in refused.stderr


@pytest.mark.parametrize("where", ["folder", "zip"])
def test_a_file_larger_than_any_frame_is_not_read(where: str, tmp_path: Path):
    """A frame file (or a deflated zip member: a zip bomb) of more bytes than a frame of
    --max-pixels can hold is too_large from its size alone: never read, never inflated."""
    root = phoenix_t(tmp_path / "t")
    big = 20 * 2**20  # above 8 x 1000 pixels + 16 MiB
    frame = root / SIGNER / "images0002.png"
    dataset = root
    if where == "folder":
        with open(frame, "r+b") as f:
            f.truncate(big)  # sparse: nothing is written, a read would take 20 MiB
    else:
        dataset = tmp_path / "bomb.zip"
        with zipfile.ZipFile(dataset, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in tree_members(root):
                zf.writestr(name, b"\0" * big if name.endswith("images0002.png") else data)
        assert dataset.stat().st_size < 2**20
    out = tmp_path / "R"
    run(["--dataset", dataset, "--out", out, "--max-pixels", "1000"])
    row = rows(out)[1]
    assert row["status"] == "too_large" and row["file_size"] == big and row["file_sha256"] is None
    assert f"a file of {big:,} bytes" in row["note"], row
    assert "pixels" in rows(out)[0]["note"]  # the others: refused by their header, as always


# --- round two: every frame bounded (issue 31) ------------------------------------------------------
def size_changing_mkv(dest: Path, sizes: list[tuple[int, int]], codec: str = "mjpeg") -> Path:
    """An mkv of MJPEG frames (or a .mov of PNG frames) whose size changes mid-stream (each packet
    its own picture): the stream declares the first frame's size, the decoder gives each its own."""
    import av

    pix = "yuvj420p" if codec == "mjpeg" else "rgb24"
    out = av.open(str(dest), "w", format="mov" if dest.suffix == ".mov" else "matroska")
    stream = out.add_stream(codec, rate=25)
    stream.width, stream.height, stream.pix_fmt = *sizes[0], pix
    for i, (w, h) in enumerate(sizes):
        cc = av.CodecContext.create(codec, "w")
        cc.width, cc.height, cc.pix_fmt, cc.time_base = w, h, pix, Fraction(1, 25)
        frame = av.VideoFrame.from_ndarray(np.full((h, w, 3), 90 + i, np.uint8), format="rgb24")
        frame = frame.reformat(format=pix)
        frame.pts = i
        for packet in [*cc.encode(frame), *cc.encode(None)]:
            packet.stream, packet.pts, packet.dts = stream, i, i
            out.mux(packet)
    out.close()
    return dest


def test_every_decoded_video_frame_is_checked_against_max_pixels(tmp_path: Path):
    """A frame larger than --max-pixels in a stream that declares a small size is too_large, refused
    by the decoder before it is allocated; the frames before and after it are ok."""
    folder = tmp_path / "m"
    folder.mkdir()
    size_changing_mkv(folder / "grows.mkv", [(64, 48), (64, 48), (400, 300), (64, 48)])
    (folder / "list.csv").write_text("name,split,path\ngrows,train,grows.mkv\n")
    out = tmp_path / "R"
    run(["--manifest", folder / "list.csv", "--out", out, "--max-pixels", "20000"])
    got = rows(out, "grows")
    assert [got[i]["status"] for i in range(4)] == ["ok", "ok", "too_large", "ok"], got
    assert "400x300 = 120,000 pixels, more than --max-pixels 20,000" in got[2]["note"]


def _append_rows(csv_path: Path, lines: str) -> None:
    with open(csv_path, "a", encoding="utf-8") as f:
        f.write(lines)


def test_a_corpus_csv_of_two_million_rows_is_refused_at_once(tmp_path: Path):
    """2,000,000 rows naming videos that do not exist (138 MB took 2.9 GB, minutes and a traceback):
    refused before a row is parsed, naming the file and the limit."""
    root = phoenix_t(tmp_path / "t")
    corpus = root / "annotations/manual/PHOENIX-2014-T.test.corpus.csv"
    _append_rows(corpus, "".join(f"v{i}|v{i}/1/*.png|-1|-1|Signer01|A|a\n" for i in range(2_000_000)))
    proc = run(["--dataset", root, "--out", tmp_path / "R"], code=2)
    assert f"error: {corpus}: 2,000,00" in proc.stderr, proc.stderr[-800:]
    assert "more than the 300,000 rows a corpus file may list" in proc.stderr
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("kind", ["phoenix", "manifest", "manifest-quoted"])
def test_a_100mb_field_is_refused_naming_its_line(kind: str, tmp_path: Path):
    """A 100 MB field in a corpus csv (a manifest: csv's field-limit traceback; PHOENIX: a refusal
    blaming plan.parquet) is refused naming the file, the line and the limit."""
    if kind == "phoenix":
        root = phoenix_t(tmp_path / "t")
        listed = root / "annotations/manual/PHOENIX-2014-T.train.corpus.csv"
        _append_rows(listed, "big|big/1/*.png|-1|-1|Signer01|A|" + "a" * 100 * 2**20 + "\n")
        args, line = ["--dataset", root], 3
    else:
        folder = tmp_path / "m"
        clip(folder / "a.mp4", 0)
        listed = folder / "list.csv"
        big = '"' + ("b" * 99 + "\n") * 2000 + '"' if kind == "manifest-quoted" else "b" * 100 * 2**20
        listed.write_text(f"name,split,path,text\na,train,a.mp4,ok\nb,train,a.mp4,{big}\n")
        args, line = ["--manifest", listed], 3
    proc = run([*args, "--out", tmp_path / "R"], code=2)
    if kind == "manifest-quoted":
        assert f"error: {listed}: cannot be read as csv after 1 row(s)" in proc.stderr, proc.stderr
        assert "at most 131,072 characters" in proc.stderr
    else:
        assert f"error: {listed}:{line}: a line of " in proc.stderr, proc.stderr[-800:]
        assert "more than the 131,072 a corpus line may hold" in proc.stderr


@pytest.mark.parametrize("header, suffix", [("pax", ".tar.gz"), ("gnu", ".tar")])
def test_a_member_whose_header_is_refused_is_skipped_and_the_archive_read_on(header: str, suffix: str,
                                                                             tmp_path: Path):
    """A member whose PAX header (or GNU long name) holds a 4 MiB path (512 MiB took 1.85 GB and a
    traceback) between two videos: the header is not read, that member is left out and named with
    the limit, and the archive is read on past it, as `tar -t` lists it: both videos whole (it hid
    every member after it and dropped the video before it as truncated)."""
    root = phoenix_t(tmp_path / "t")
    members = tree_members(root)
    after_dev = max(i for i, (n, _) in enumerate(members) if "/dev/" in n) + 1
    members.insert(after_dev, ("PHOENIX-2014-T/" + "p" * 4 * 2**20, b"x"))
    tar = tmp_path / f"huge{suffix}"
    fmt = tarfile.PAX_FORMAT if header == "pax" else tarfile.GNU_FORMAT
    with tarfile.open(tar, "w:gz" if suffix == ".tar.gz" else "w", format=fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tf.addfile(info, io.BytesIO(data))
    out = tmp_path / "R"
    proc = run(["--dataset", tar, "--out", out])
    what = "PAX header" if header == "pax" else "GNU long name"
    said = "1 member(s) whose header is refused are left out, the archive read on past them: "
    assert said in proc.stderr and f"(the {what} at byte " in proc.stderr, proc.stderr[-1500:]
    assert "more than the 1,048,576 a header may hold" in proc.stderr
    assert "not read past" not in proc.stderr
    got = pq.read_table(out / "keypoints.parquet", columns=["video", "status"]).to_pylist()
    assert len(got) == 6 and {r["status"] for r in got} == {"ok"}, got
    assert any(said in a for a in json.loads((out / "run.json").read_text())["dataset"]["anomalies"])


def png_with_surplus(width: int, height: int, surplus: int) -> bytes:
    """A gray PNG whose IDAT stream goes on `surplus` random bytes past the rows the image needs:
    libpng inflates it all (a 25 MB file of 100x100 cost 54 s of CPU and was ok)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = (b"\0" + b"\x80" * width) * height
    tail = np.random.default_rng(0).integers(0, 256, surplus, dtype=np.uint8).tobytes()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (PNG_MAGIC + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows + tail, 9))
            + chunk(b"IEND", b""))


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def progressive_jpeg(extra_scans: int = 0) -> bytes:
    """A 64x48 progressive JPEG (10 scans, as libjpeg's encoder writes), its last scan repeated
    `extra_scans` times more: libjpeg warns and decodes every one (12,000 scans of 6000x6000 cost
    39 s of CPU and were ok)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((48, 64, 3), 120, np.uint8)).save(buf, "JPEG", progressive=True)
    data = buf.getvalue()
    last = data.rfind(b"\xff\xda")
    return data[:-2] + data[last:-2] * extra_scans + b"\xff\xd9"


def test_a_frame_that_would_cost_the_decoder_more_than_its_pixels_is_over_budget(tmp_path: Path):
    """Compressed data beyond what the size needs (a small and a larger PNG) and a JPEG of 600
    scans are over_budget and never decoded; the frame of 10 scans is ok."""
    root = phoenix_t(tmp_path / "t")
    (root / SIGNER / "images0001.png").write_bytes(png_with_surplus(100, 100, 300_000))
    (root / SIGNER / "images0002.png").write_bytes(png_with_surplus(1000, 1000, 300_000))
    (root / SIGNER / "images0003.png").write_bytes(progressive_jpeg(590))
    (root / SIGNER / "images0004.png").write_bytes(progressive_jpeg())
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out])
    got = rows(out)
    assert [got[i]["status"] for i in range(4)] == ["over_budget"] * 3 + ["ok"], got
    assert "compressed, more than its pixels take raw (10,100)" in got[0]["note"]
    assert "inflates past the 1,001,000 bytes its pixels need" in got[1]["note"]
    assert "600 scans, more than --max-scans 500: not decoded" in got[2]["note"]
    assert all(r["status"] == "ok" for r in rows(out, "25October_2010_Monday_tagesschau-17").values())


def test_max_scans_is_settable_and_recorded(tmp_path: Path):
    root = phoenix_t(tmp_path / "t")
    (root / SIGNER / "images0002.png").write_bytes(progressive_jpeg())
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out, "--max-scans", "5"])
    got = rows(out)
    assert got[1]["status"] == "over_budget" and "10 scans, more than --max-scans 5" in got[1]["note"]
    assert [got[i]["status"] for i in (0, 2, 3)] == ["ok"] * 3
    assert json.loads((out / "run.json").read_text())["options"]["max_scans"] == 5
    again = run_cli(["run", "--dataset", root, "--out", out, *OPTIONS])  # the run's own limit
    assert again.returncode == 0 and "complete:" in again.stdout, again.stderr
    other = run_cli(["run", "--dataset", root, "--out", out, "--max-scans", "6", *OPTIONS])
    assert other.returncode == 2 and "max_scans" in other.stderr, other.stderr


def test_what_the_decoder_says_reaches_the_row(tmp_path: Path):
    """A JPEG whose data ends early (an end-of-image marker after a third of its data: libjpeg fills
    the rest with grey) is not ok, and a PNG with a bad CRC says so: the decoder's own words are in
    the note, not only in the worker's log."""
    from PIL import Image

    root = phoenix_t(tmp_path / "t")
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (600, 600, 3), np.uint8)).save(buf, "JPEG")
    jpeg = buf.getvalue()
    (root / SIGNER / "images0002.png").write_bytes(jpeg[:len(jpeg) // 3] + b"\xff\xd9")
    png = bytearray((root / SIGNER / "images0003.png").read_bytes())
    idat = png.find(b"IDAT")
    png[idat + 4 + int.from_bytes(png[idat - 4:idat], "big")] ^= 0xFF  # its CRC's first byte
    (root / SIGNER / "images0003.png").write_bytes(bytes(png))
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out])
    got = rows(out)
    assert got[1]["status"] == "corrupt_jpeg" and "premature end of data segment" in got[1]["note"]
    assert got[2]["status"] == "corrupt_png" and "IDAT: CRC error" in got[2]["note"], got[2]
    assert got[0]["status"] == got[3]["status"] == "ok" and not got[0]["note"] and not got[3]["note"]


def test_a_familys_own_log_lines_stay_out_of_the_decoders_note(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capfd: pytest.CaptureFixture):
    """What the decoder writes reaches the note, but lines a family's library writes meanwhile
    from its own threads (its LOG_LINES) go back to stderr: Holistic's (TensorFlow, absl,
    mediapipe) were a pattern of the generic module, and another family's were notes (issue 38)."""
    import os
    import tempfile

    from phoenix_keypoints.extract.keypoints import frames
    from phoenix_keypoints.extract.keypoints.estimator import FAMILIES

    (tmp_path / "loudfamily.py").write_text(
        "from phoenix_keypoints.extract.families import Family\n"
        "class Loud(Family):\n"
        "    LOG_LINES = r'^loudlib\\['\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FAMILIES, "loudfamily", "loudfamily:Loud")
    with tempfile.TemporaryFile() as f:
        os.write(f.fileno(), b"loudlib[7] warming up\nlibpng error: IDAT: CRC error\n"
                             b"W0000 00:00:1 absl::InitializeLog\nmediapipe/calculators: ok\n")
        said = frames._caught(f.fileno())
    assert said == "libpng error: IDAT: CRC error", said
    err = capfd.readouterr().err
    assert "loudlib[7] warming up" in err and "mediapipe/calculators: ok" in err, err


def test_many_missing_videos_make_one_line_and_a_few_examples(tmp_path: Path):
    """Listed videos that are not on disk are counted and a few named: run.json names the first 100
    (1,000,000 made a 30 MB run.json), the plan keeps each one's problem, the rest is extracted."""
    root = phoenix_t(tmp_path / "t")
    _append_rows(root / "annotations/manual/PHOENIX-2014-T.test.corpus.csv",
                 "".join(f"v{i}|v{i}/1/*.png|-1|-1|Signer01|A|a\n" for i in range(3000)))
    out = tmp_path / "R"
    proc = run(["--dataset", root, "--out", out])
    assert "warning: 3000 listed video(s) cannot be processed: v0 (no folder)" in proc.stderr
    d = json.loads((out / "run.json").read_text())["dataset"]
    assert d["problems_total"] == 3000 and len(d["problems"]) == 100
    assert (out / "run.json").stat().st_size < 20_000
    plan = pq.read_table(out / "plan.parquet", columns=["video", "problem"]).to_pylist()
    assert sum(1 for r in plan if r["problem"] == "no folder") == 3000
    assert {r["status"] for r in rows(out).values()} == {"ok"}
    status = run_cli(["status", "--out", str(out)])
    assert "missing:  3000 listed video(s)" in status.stdout, status.stdout


def test_exif_orientation_is_applied_and_noted(tmp_path: Path):
    """A JPEG with EXIF orientation 6 is turned upright before MediaPipe sees it, as a video's
    display rotation is, and its note says so; a frame without EXIF is as it was."""
    from PIL import Image

    root = phoenix_t(tmp_path / "t")
    frame = root / SIGNER / "images0002.png"
    upright = np.asarray(Image.open(frame).convert("RGB"))  # 210 wide, 260 high
    exif = Image.Exif()
    exif[0x0112] = 6  # stored turned a quarter counter-clockwise: shown turned back clockwise
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(np.rot90(upright, 1))).save(buf, "JPEG", exif=exif)
    frame.write_bytes(buf.getvalue())
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out])
    t = pq.read_table(out / "keypoints.parquet", columns=["video", "frame", "status", "note", "width",
                                                           "height"]).to_pylist()
    got = {r["frame"]: r for r in t if r["video"] == "signer_demo-1"}
    assert got[1]["status"] == "ok" and "EXIF orientation 6 applied" in got[1]["note"], got[1]
    assert (got[1]["width"], got[1]["height"]) == (got[0]["width"], got[0]["height"]) == (210, 260)
    assert not got[0]["note"] and [got[i]["status"] for i in (0, 2, 3)] == ["ok"] * 3


@pytest.mark.parametrize("fmt", [["--format=gnu"], ["--format=posix", "--sparse-version=1.0"],
                                 ["--format=posix", "--sparse-version=0.1"]],
                         ids=["gnu", "pax-1.0", "pax-0.1"])
def test_a_gnu_sparse_member_is_read_as_tar_restores_it(fmt: list[str], tmp_path: Path):
    """A frame stored by `tar --sparse` (a PNG holding 1 MiB of zeros in a private chunk, a hole on
    disk) reads as `tar -x` restores it: ok, its size and sha256 those of the whole file (it was
    `unreadable`, "the archive ends inside it")."""
    import subprocess

    if shutil.which("tar") is None:
        pytest.skip("no tar on this machine")
    root = phoenix_t(tmp_path / "t")
    frame = root / SIGNER / "images0002.png"
    png = frame.read_bytes()
    zeros = b"\0" * 2**20
    crc = struct.pack(">I", zlib.crc32(b"prVt" + zeros))
    private = struct.pack(">I", len(zeros)) + b"prVt" + zeros + crc
    whole = png[:-12] + private + png[-12:]
    with open(frame, "wb") as f:
        f.write(png[:-12] + private[:8])
        f.seek(len(zeros), io.SEEK_CUR)  # the zeros as a hole: what tar --sparse stores sparse
        f.write(private[-4:] + png[-12:])
    assert frame.read_bytes() == whole
    tar = tmp_path / "sparse.tar"
    subprocess.run(["tar", "--sparse", *fmt, "-cf", str(tar), "-C", str(root.parent), root.name],
                   check=True)
    with tarfile.open(tar) as tf:
        sparse = [m.name for m in tf.getmembers() if m.issparse()]
    assert sparse == [f"PHOENIX-2014-T/{SIGNER}/images0002.png"]
    out = tmp_path / "R"
    run(["--dataset", tar, "--out", out])
    got = rows(out)
    assert got[1]["status"] == "ok", got[1]
    assert got[1]["file_size"] == len(whole)
    assert got[1]["file_sha256"] == hashlib.sha256(whole).hexdigest()
    assert [got[i]["status"] for i in (0, 2, 3)] == ["ok"] * 3


def test_what_ffmpeg_says_about_a_video_frame_reaches_its_row(tmp_path: Path):
    """A video frame whose packet is cut in half decodes (FFmpeg emulates the missing end), and
    its note says what FFmpeg said; the frames around it have no note."""
    import av

    folder = tmp_path / "m"
    folder.mkdir()
    out = av.open(str(folder / "cut.mkv"), "w", format="matroska")
    stream = out.add_stream("mjpeg", rate=25)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuvj420p"
    cc = av.CodecContext.create("mjpeg", "w")
    cc.width, cc.height, cc.pix_fmt, cc.time_base = 64, 48, "yuvj420p", Fraction(1, 25)
    rng = np.random.default_rng(0)
    for i in range(4):
        frame = av.VideoFrame.from_ndarray(rng.integers(0, 256, (48, 64, 3), np.uint8), format="rgb24")
        frame = frame.reformat(format="yuvj420p")
        frame.pts = i
        for packet in cc.encode(frame):
            if i == 1:
                packet = av.Packet(bytes(packet)[:packet.size // 2])
            packet.stream, packet.pts, packet.dts = stream, i, i
            out.mux(packet)
    out.close()
    (folder / "list.csv").write_text("name,split,path\ncut,train,cut.mkv\n")
    run(["--manifest", folder / "list.csv", "--out", tmp_path / "R"])
    got = rows(tmp_path / "R", "cut")
    assert "decoder: " in (got[1]["note"] or "") and "EOI missing" in got[1]["note"], got[1]
    assert [got[i]["status"] for i in range(4)] == ["ok"] * 4
    assert not any(got[i]["note"] for i in (0, 2, 3)), got


# --- round three: every decoder's input bounded (issue 37) -----------------------------------------
def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_with_chunks(png: bytes, chunks: list[tuple[bytes, bytes]]) -> bytes:
    """A PNG with ancillary chunks put right after its IHDR (which is 8 + 25 bytes in)."""
    return png[:33] + b"".join(png_chunk(k, d) for k, d in chunks) + png[33:]


def text_chunks(kind: str, count: int, inflated: int) -> list[tuple[bytes, bytes]]:
    """`count` compressed zTXt / iTXt / iCCP chunks, each inflating to `inflated` bytes."""
    z = zlib.compress(b"a" * inflated, 9)
    body = {"zTXt": b"Comment\0\0" + z, "iTXt": b"Comment\0\1\0en\0\0" + z,
            "iCCP": b"icc\0\0" + z}[kind]
    return [(kind.encode(), body)] * count


def test_png_text_and_icc_chunks_are_bounded_as_pil_bounds_them(tmp_path: Path):
    """A compressed text or ICC chunk inflating past 1 MiB, or 65 of 1 MiB each (past 64 MiB in
    all), is over_budget and never decoded (libpng inflates and keeps them all: 1000 iTXt chunks of
    7 MB cost 58 s and 6.7 GB, and the frame was ok); a frame with a small text chunk is ok."""
    root = phoenix_t(tmp_path / "t")
    frames = [root / SIGNER / f"images000{i}.png" for i in range(1, 5)]
    png = frames[0].read_bytes()
    frames[0].write_bytes(png_with_chunks(png, text_chunks("zTXt", 1, 2 * 2**20)))
    frames[1].write_bytes(png_with_chunks(png, text_chunks("iTXt", 65, 2**20)))
    frames[2].write_bytes(png_with_chunks(png, text_chunks("iCCP", 1, 3 * 2**20)))
    frames[3].write_bytes(png_with_chunks(png, [(b"tEXt", b"Software\0phoenix")]
                                          + text_chunks("zTXt", 2, 1000)))
    assert all(f.stat().st_size < 200_000 for f in frames)
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out])
    got = rows(out)
    assert [got[i]["status"] for i in range(4)] == ["over_budget"] * 3 + ["ok"], got
    assert "its zTXt chunk at byte 33 inflates past 1,048,576 bytes" in got[0]["note"]
    assert "its text and ICC chunks hold more than 67,108,864 bytes by the iTXt chunk" in got[1]["note"]
    assert "its iCCP chunk at byte 33 inflates past 1,048,576 bytes" in got[2]["note"]
    assert got[1]["file_sha256"] == hashlib.sha256(frames[1].read_bytes()).hexdigest()


def jpeg_with_comment(comment: bytes, progressive: bool = False) -> bytes:
    """A 64x48 JPEG (10 scans when progressive) whose comment segment holds `comment`."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((48, 64, 3), 120, np.uint8)).save(buf, "JPEG", comment=comment,
                                                              progressive=progressive)
    return buf.getvalue()


def test_jpeg_scans_are_counted_from_the_markers(tmp_path: Path):
    """600 `FF DA` byte pairs inside a comment segment are no scans: the JPEG is ok (it was refused
    as 601 scans); the same bytes in a progressive JPEG leave its 10 scans counted; 590 scans more
    are still over_budget."""
    root = phoenix_t(tmp_path / "t")
    (root / SIGNER / "images0001.png").write_bytes(jpeg_with_comment(b"\xff\xda" * 600))
    (root / SIGNER / "images0002.png").write_bytes(jpeg_with_comment(b"\xff\xda" * 600, True))
    (root / SIGNER / "images0003.png").write_bytes(progressive_jpeg(590))
    out = tmp_path / "R"
    run(["--dataset", root, "--out", out, "--max-scans", "11"])
    got = rows(out)
    assert [got[i]["status"] for i in range(4)] == ["ok", "ok", "over_budget", "ok"], got
    assert "600 scans, more than --max-scans 11: not decoded" in got[2]["note"]


def _local(name: bytes, crc: int, csize: int, size: int, method: int) -> bytes:
    return struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, csize, size,
                       len(name), 0) + name


def _central(name: bytes, crc: int, csize: int, size: int, method: int, offset: int) -> bytes:
    return struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, csize, size,
                       len(name), 0, 0, 0, 0, 0, offset) + name


def overlapping_zip(dest: Path, plain: list[tuple[str, bytes]], shared: list[str],
                    kernel: bytes) -> Path:
    """A zip of `plain` members stored, then `shared` members overlapping as in a zip bomb: each one's
    deflate stream quotes the next one's local header in a stored block and goes on into the next
    one's stream, the last of which holds `kernel`. Every member is whole (names, sizes, CRCs agree)
    and unzip -t refuses it: "overlapped components (possible zip bomb)"."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream, content = c.compress(kernel) + c.flush(), kernel
    entries = []  # (name, crc, compressed size, size), last first
    for k, name in enumerate(reversed(shared)):
        raw = name.encode()
        entries.append((raw, zlib.crc32(content), len(stream), len(content)))
        if k < len(shared) - 1:  # quote this header in the member before it
            head = _local(raw, zlib.crc32(content), len(stream), len(content), 8)
            stream = struct.pack("<BHH", 0, len(head), len(head) ^ 0xFFFF) + head + stream
            content = head + content
    out, central = bytearray(), []
    for name, data in plain:
        raw = name.encode()
        central.append(_central(raw, zlib.crc32(data), len(data), len(data), 0, len(out)))
        out += _local(raw, zlib.crc32(data), len(data), len(data), 0) + data
    at = len(out)  # the first shared header; each next one lies 5 bytes (a stored block's) past it
    for raw, crc, csize, size in reversed(entries):
        central.append(_central(raw, crc, csize, size, 8, at))
        at += 30 + len(raw) + 5
    first = entries[-1]
    out += _local(first[0], first[1], first[2], first[3], 8) + stream
    cd = b"".join(central)
    out += cd + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(central), len(central), len(cd),
                            len(out), 0)
    dest.write_bytes(bytes(out))
    return dest


def _inflate_members(zpath: Path, names: list[str]) -> list[bytes]:
    """The members `names` of a zip inflated by zlib from where its central directory says, each
    checked against its CRC: whole, whatever zipfile does with them (3.12.2+, 3.11.8+ and Debian 12's
    3.11.2 refuse overlapping entries, older patch levels read them)."""
    data, out = zpath.read_bytes(), []
    with zipfile.ZipFile(zpath) as zf:
        for zi in (zf.getinfo(n) for n in names):
            name_len, extra_len = struct.unpack_from("<2H", data, zi.header_offset + 26)
            at = zi.header_offset + 30 + name_len + extra_len
            inflated = zlib.decompressobj(-15).decompress(data[at:at + zi.compress_size])
            assert len(inflated) == zi.file_size and zlib.crc32(inflated) == zi.CRC, zi.filename
            out.append(inflated)
    return out


def test_overlapping_zip_members_are_refused_as_unzip_refuses_them(tmp_path: Path):
    """Frames 2 and 3 of a video are members whose data overlaps the next one's (one deflate stream
    shared, a zip bomb's trick: a 395 KB zip inflated 12 GB): never read, `unreadable` saying so,
    named at the start and the end; frame 4, the stream's own member, and the rest are ok. The tool
    finds the overlap itself (extract/sources/archive_index.py), whatever the Python's zipfile
    would do: the outcome asserted is the tool's on every patch level."""
    import subprocess

    root = phoenix_t(tmp_path / "t")
    members = tree_members(root)
    shared = [f"PHOENIX-2014-T/{SIGNER}/images000{i}.png" for i in (2, 3, 4)]
    kernel = dict(members)[shared[-1]]
    zpath = overlapping_zip(tmp_path / "overlap.zip", [m for m in members if m[0] not in shared],
                            shared, kernel)
    assert all(inflated[-len(kernel):] == kernel for inflated in _inflate_members(zpath, shared))
    if shutil.which("unzip"):
        said = subprocess.run(["unzip", "-t", str(zpath)], capture_output=True, text=True)
        assert "overlapped components" in said.stdout + said.stderr
    out = tmp_path / "R"
    proc = run(["--dataset", zpath, "--out", out])
    got = rows(out)
    assert [got[i]["status"] for i in range(4)] == ["ok", "unreadable", "unreadable", "ok"], got
    assert "its data overlaps the next member's" in got[1]["note"] and "unzip -t" in got[1]["note"]
    said = "2 member(s) whose data overlaps another member's are not read"
    assert proc.stderr.count(said) == 1 and shared[0] in proc.stderr, proc.stderr  # once a run
    assert {r["status"] for r in rows(out, "25October_2010_Monday_tagesschau-17").values()} == {"ok"}


def _manifest_of(folder: Path, rows_: int, width: int) -> Path:
    clip(folder / "a.mp4", 0)
    listed = folder / "list.csv"
    with open(listed, "w", encoding="utf-8") as f:
        f.write("name,split,path,text\n")
        f.writelines(f"v{i},train,a.mp4,{'t' * width}\n" for i in range(rows_))
    return listed


def test_a_corpus_file_past_its_size_limit_is_refused(tmp_path: Path):
    """A manifest of 520 rows of 130,000 characters, each row and line within its limit, is 68 MB:
    refused naming the file and the 64 MiB limit, having held no more than that (a 1 GiB manifest
    was read whole, 2.25 GB, before its limits refused it)."""
    listed = _manifest_of(tmp_path / "m", 520, 130_000)
    assert listed.stat().st_size > 64 * 2**20
    proc = run(["--manifest", listed, "--out", tmp_path / "R"], code=2)
    assert f"error: {listed}: {listed.stat().st_size:,} bytes, more than the 67,108,864 a corpus " \
        "file may hold" in proc.stderr, proc.stderr[-800:]
    assert not (tmp_path / "R").exists()


def test_a_corpus_files_row_limit_holds_before_the_rest_is_read(tmp_path: Path):
    """A PHOENIX csv of 300,001 rows followed by bytes that are no UTF-8: refused for its rows
    (a line at a time, the rest never decoded), not for the bytes after the limit (it was read and
    decoded whole first: "not UTF-8")."""
    root = phoenix_t(tmp_path / "t")
    corpus = root / "annotations/manual/PHOENIX-2014-T.test.corpus.csv"
    _append_rows(corpus, "".join(f"v{i}|v{i}/1/*.png|-1|-1|Signer01|A|a\n" for i in range(300_001)))
    with open(corpus, "ab") as f:
        f.write(b"\xff\xfe not utf-8\n" * 10)
    proc = run(["--dataset", root, "--out", tmp_path / "R"], code=2)
    assert f"error: {corpus}: 300,01" in proc.stderr and "not UTF-8" not in proc.stderr, proc.stderr
    assert "more than the 300,000 rows a corpus file may list" in proc.stderr


def mp4_with_stsz(mp4: bytes, entries: int) -> bytes:
    """The mp4 with its first track's sample tables made to list `entries` samples, all in its first
    chunk: a size table (stsz) really holding `entries` sizes (its own ones over and over), one
    stsc and one stts entry saying so; the boxes around them grow to hold them. FFmpeg indexes
    every sample of such a file when it opens it."""
    def find(start: int, end: int, kind: bytes, chain: list[int]) -> list[int] | None:
        at = start
        while at + 8 <= end:
            size = int.from_bytes(mp4[at:at + 4], "big")
            if mp4[at + 4:at + 8] == kind:
                return [*chain, at]
            if mp4[at + 4:at + 8] in (b"moov", b"trak", b"mdia", b"minf", b"stbl"):
                found = find(at + 8, at + size, kind, [*chain, at])
                if found:
                    return found
            at += size
        return None

    def replaced(kind: bytes, body: bytes) -> None:
        nonlocal mp4
        *parents, at = find(0, len(mp4), kind, [])
        size, box = int.from_bytes(mp4[at:at + 4], "big"), struct.pack(">I", 8 + len(body)) + kind + body
        out = bytearray(mp4[:at] + box + mp4[at + size:])
        for p in parents:
            out[p:p + 4] = struct.pack(">I", int.from_bytes(out[p:p + 4], "big") + len(box) - size)
        mp4 = bytes(out)

    stsz, stts = find(0, len(mp4), b"stsz", [])[-1], find(0, len(mp4), b"stts", [])[-1]
    own = np.frombuffer(mp4[stsz + 20:stsz + int.from_bytes(mp4[stsz:stsz + 4], "big")], ">u4")
    delta = int.from_bytes(mp4[stts + 20:stts + 24], "big")
    sizes = np.resize(own, entries).astype(">u4").tobytes()
    replaced(b"stsz", struct.pack(">III", 0, 0, entries) + sizes)
    replaced(b"stsc", struct.pack(">IIIII", 0, 1, 1, entries, 1))
    replaced(b"stts", struct.pack(">IIII", 0, 1, entries, delta))
    return mp4


def test_a_video_whose_index_would_be_too_large_is_refused_before_ffmpeg_opens_it(tmp_path: Path):
    """An mp4 whose sample tables list 2,100,000 samples (8 MB; 5x10^7 cost FFmpeg 2.26 GB in each
    process that opened it) is not opened, its problem named; the other video is extracted."""
    root = videos(tmp_path / "v")
    big = root / "train" / "signer_a.mp4"
    big.write_bytes(mp4_with_stsz(big.read_bytes(), 2_100_000))
    out = tmp_path / "R"
    proc = run(["--dataset", root, "--out", out])
    said = "signer_a (its sample tables list more than 2,000,000 index entries"
    assert said in proc.stderr, proc.stderr[-1500:]
    got = pq.read_table(out / "keypoints.parquet", columns=["video", "status"]).to_pylist()
    assert {r["video"] for r in got} == {"signer_b"} and {r["status"] for r in got} == {"ok"}


@pytest.mark.parametrize("size", ["1000000", "1000000000000000000000", "124"])
def test_batch_size_is_bounded_by_the_memory_a_batch_takes(size: str, wholebody_options: list[str],
                                                           tmp_path: Path):
    """--batch-size past what a batch may hold (2 GiB at 16.6 MiB a 1080p frame: 123) is refused
    before any work, exit 2, saying the bound and why (1,000,000 held a whole video: 3.4 GB)."""
    root = phoenix_t(tmp_path / "t")
    proc = run(["--dataset", root, "--out", tmp_path / "R", *wholebody_options, "--batch-size", size],
               code=2)
    assert f"argument --batch-size: must be at most 123, not {int(size):,}" in proc.stderr, proc.stderr
    assert "a batch holds each of its frames about three times" in proc.stderr
    assert not (tmp_path / "R").exists()
    run(["--dataset", root, "--out", tmp_path / "R", *wholebody_options, "--batch-size", "123"])


def test_the_batch_bound_counts_what_the_familys_declaration_says_a_frame_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The bound above is the declaration's: a family whose models take 64 MiB of each frame of a
    batch (its batch_input) bounds --batch-size at 2 GiB / (2 x 5.9 + 64 MiB) = 26, in its words
    and its docs; the 640x640 detector input was a constant of the generic module (issue 38)."""
    from phoenix_keypoints.extract.keypoints.estimator import FAMILIES, batch_refused

    (tmp_path / "bigframes.py").write_text(
        "from phoenix_keypoints.extract.families import Family\n"
        "from phoenix_keypoints.extract.keypoints.estimator import Declaration\n"
        "DECLARATION = Declaration(name='bigframes', parts={'points': (4, 3)}, batches=True,\n"
        "                          batch_input=(64 * 2**20, 'its 64 MiB volume'))\n"
        "class Big(Family):\n"
        "    DOCS = 'docs/bigframes.md'\n"
        "    def declaration(self, settings):\n"
        "        return DECLARATION\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FAMILIES, "bigframes", "bigframes:Big")
    assert batch_refused(26) == ""
    assert batch_refused(27) == (
        "must be at most 26, not 27: a batch holds each of its frames about three times (RGB read "
        "ahead, RGB in the batch, its 64 MiB volume), about 76 MiB a 1920x1080 frame, and may hold "
        "2 GiB (docs/bigframes.md)")


@pytest.mark.parametrize("args, said", [
    (["--workers", "1000000"], "argument --workers: must be at most 1,024, not 1,000,000"),
    (["--num-gpus", "64", "--workers-per-gpu", "64"],
     "--num-gpus 64 x --workers-per-gpu 64 is more than the 1,024 workers a run may start"),
    (["--max-pixels", "3000000000"],
     "argument --max-pixels: must be at most 2,147,483,647, not 3,000,000,000: FFmpeg's own"),
], ids=["workers", "gpus-x-workers", "max-pixels"])
def test_every_option_is_bounded(args: list[str], said: str, tmp_path: Path):
    """A worker count no machine runs (a million processes), or a --max-pixels past FFmpeg's own
    int (every video frame was `not_decoded`: avcodec_open2 refuses it), is refused before any
    work, exit 2, saying the bound."""
    root = videos(tmp_path / "v")
    proc = run_cli(["run", "--dataset", root, "--out", tmp_path / "R", *args])
    assert_no_traceback(proc)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-800:]
    assert not (tmp_path / "R").exists()
