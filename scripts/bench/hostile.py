"""What hostile input costs in memory: a labels pickle bomb, a worker meeting a pixel bomb.

- Labels: `load_labels` on each crafted file (tests/test_hostile.py's bombs) in a fresh process,
  against the same process loading a small real-shaped labels file; and a labels file shaped like
  CSL-Daily's (20,654 videos), to show the bound holds for what the corpus really ships.
- Pixel bomb: the README's command (`phoenix-keypoints run --dataset D --out R`, default options)
  on a tiny PHOENIX tree, once as it is and once with one frame replaced by a 390 KB PNG of 20000 x
  20000 pixels; and once more with `--max-pixels` above the bomb, to show what decoding it would
  cost. Peak RSS is the kernel's high-water mark of the run's process tree (coordinator and workers).
- Round two (issue 31): the worst case of each kind, met by the same command with default options
  on a tiny PHOENIX tree (or a folder of one video): a .mov whose second frame is 16000 x 16000,
  a tar.gz whose PAX header holds a 512 MiB path, corpus csv files of 2,000,000 and 299,000 missing
  rows, PNGs whose IDAT inflates past their pixels (25 MB; at the size cap, 336 MB; 40 MP within
  the compressed bound), progressive JPEGs of 6000 x 6000 with 12,000 and 500 scans. Peak RSS
  (largest process) and CPU seconds of the whole process tree; wall time is noisy on a shared
  machine.
- Round three (issue 37, `--only round-three`): PNG text chunks (1000 iTXt of 7 MB; 64 zTXt of
  1 MiB, the most allowed), a zip of 40 members overlapping on one 300 MB stream, a tar.gz whose
  512 MiB GNU long name lies between two videos, a 1 GiB manifest, MP4s whose tables list 5x10^7
  and 1,999,000 (the most allowed) samples, and a 600-frame 540x720 video through the
  whole-body estimator (tiny models) at --batch-size 8 and 123 (the most allowed).
- Run folders (issue 52, `--only run-folders`): a finished run over the embedded sample, then each
  case on a copy of it, met by the command a user would type: a committed part replaced by a FIFO
  (`status`, then `run` to resume), run.json or progress.json a FIFO, run.json 200,000 levels deep
  (`status`, `verify`, `run`), `"format": "2"`, `--workers ' 5'` and `+1`, and `run --help` with a
  distribution installed whose name holds ESC[31m and a CR. Each command has 120 s: one that waits
  on a FIFO is killed and counted as hung.

    .venv/bin/python scripts/bench/hostile.py [--save hostile.json]
                     [--only round-two|round-three|run-folders]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "tests")]
from common import REPO, machine, measure, save_json, table  # noqa: E402

LOAD = """import sys, time
from pathlib import Path
from phoenix_keypoints.extract.corpora.csl_daily import load_labels
t = time.perf_counter()
try:
    load_labels(Path(sys.argv[1]))
except Exception as e:
    print(str(e)[:160])
print(f"took {time.perf_counter() - t:.2f} s")"""


def csl_like_labels(n: int = 20654) -> bytes:
    """A labels pickle of CSL-Daily's shape: per video its glosses, characters and words."""
    info = [{"name": f"S{i:06d}_P{i % 10:04d}_T00", "length": 100 + i % 200, "signer": i % 10,
             "label_gloss": ["你", "好", "谢谢", "再见"] * 3, "label_char": list("你好谢谢再见。" * 2),
             "label_word": ["你好", "谢谢", "再见", "。"] * 2} for i in range(n)]
    return pickle.dumps({"info": info, "gloss_map": ["你", "好", "谢谢", "再见"]}, protocol=4)


def labels_rows(work: Path) -> list[dict]:
    from test_hostile import LABEL_BOMBS

    files = {"small real-shaped (baseline)": pickle.dumps({"info": [{"name": "a"}]}, protocol=2),
             "CSL-Daily-shaped, 20,654 videos": csl_like_labels(),
             **{name: data for name, data, _ in LABEL_BOMBS}}
    out = []
    for name, data in files.items():
        path = work / "labels.pkl"
        path.write_bytes(data)
        m = measure([sys.executable, "-c", LOAD, str(path)])
        out.append({"file": name, "bytes": len(data), "peak_rss_mib": m["peak_rss_mib_kernel"],
                    "said": " ".join(m["output"])[:160]})
    base = out[0]["peak_rss_mib"]
    for r in out:
        r["above_baseline_mib"] = round(r["peak_rss_mib"] - base, 1)
        r["bound_mib"] = round((10 * r["bytes"]) / 2**20 + 100, 1)  # the target: 10 x size + 100 MB
    return out


def pixel_rows(work: Path) -> list[dict]:
    from kinds import phoenix_t
    from test_hostile import SIGNER, png_bomb

    out = []
    for name, bomb, extra in (("as shipped", False, []), ("one frame a 20000x20000 PNG", True, []),
                              ("the same, --max-pixels 500000000 (decoded)", True,
                               ["--max-pixels", "500000000"])):
        root = phoenix_t(work / f"t{len(out)}")
        if bomb:
            (root / SIGNER / "images0002.png").write_bytes(png_bomb())
        cmd = [sys.executable, "-m", "phoenix_keypoints", "run", "--dataset", str(root), "--out",
               str(work / f"r{len(out)}"), *extra]
        m = measure(cmd, tree=True)
        out.append({"input": name, "command": "phoenix-keypoints run --dataset D --out R "
                    + " ".join(extra), "peak_rss_mib": m["peak_rss_mib_kernel"],
                    "wall_s": m["wall_s"]})
    return out


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def inflating_png(width: int, height: int, compressed: int) -> bytes:
    """A gray PNG whose IDAT is `compressed` bytes of one zlib stream of zeros: it inflates to about
    1000x that, far past the rows its size needs (made by repeating one fully flushed block)."""
    z = zlib.compressobj(9)
    head = z.compress(b"\0" * 2**20) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(b"\0" * 2**20) + z.flush(zlib.Z_FULL_FLUSH)
    n = max(1, (compressed - len(head)) // len(block))
    adler = ((n + 1) * 2**20 % 65521) << 16 | 1  # zeros: a stays 1, b counts the bytes
    tail = z.flush(zlib.Z_FINISH)[:-4] + struct.pack(">I", adler)
    return _png(width, height, head + block * n + tail)


def progressive_jpeg(size: int, scans: int) -> bytes:
    """A size x size progressive JPEG whose last scan is repeated until it has `scans` scans."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((size, size, 3), 120, np.uint8)).save(buf, "JPEG", progressive=True)
    data = buf.getvalue()
    last, have = data.rfind(b"\xff\xda"), data.count(b"\xff\xda")
    return data[:-2] + data[last:-2] * (scans - have) + b"\xff\xd9"


def _with_frame(root: Path, data: bytes) -> Path:
    from test_hostile import SIGNER

    (root / SIGNER / "images0002.png").write_bytes(data)
    return root


def _pax_archive(root: Path, dest: Path) -> Path:
    from helpers import tar_of, tree_members

    return tar_of(dest, [*tree_members(root), ("PHOENIX-2014-T/notes/readme.txt", b"x"),
                         ("PHOENIX-2014-T/" + "p" * 512 * 2**20, b"x")], tarfile.PAX_FORMAT)


def _missing_rows(root: Path, n: int) -> Path:
    with open(root / "annotations/manual/PHOENIX-2014-T.test.corpus.csv", "a") as f:
        f.write("".join(f"v{i}|v{i}/1/*.png|-1|-1|Signer01|A|a\n" for i in range(n)))
    return root


def _video_folder(folder: Path, sizes: list[tuple[int, int]]) -> Path:
    from test_hostile import size_changing_mkv

    folder.mkdir(parents=True)
    size_changing_mkv(folder / "v.mov", sizes, "png")  # FFmpeg's MJPEG encoder stops below 16000
    (folder / "list.csv").write_text("name,split,path\nv,train,v.mov\n")
    return folder / "list.csv"


def round_two_cases() -> list[tuple[str, str, object]]:
    """(kind, input, how to build it in a scratch folder: path -> the --dataset/--manifest)."""
    from kinds import phoenix_t

    small, big = [(320, 240)] * 3, [(320, 240), (16000, 16000), (320, 240)]
    return [
        ("baseline", "tiny PHOENIX tree as shipped (6 frames)", lambda w: phoenix_t(w)),
        ("video", "mov (PNG frames) of 3 frames of 320x240", lambda w: _video_folder(w, small)),
        ("video", "mov (PNG frames) whose 2nd frame is 16000x16000",
         lambda w: _video_folder(w, big)),
        ("pax", "tar.gz whose PAX header holds a 512 MiB path",
         lambda w: _pax_archive(phoenix_t(w / "t"), w / "a.tar.gz")),
        ("csv", "test csv of 2,000,000 missing rows", lambda w: _missing_rows(phoenix_t(w), 2_000_000)),
        ("csv", "test csv of 299,000 missing rows (the most accepted)",
         lambda w: _missing_rows(phoenix_t(w), 299_000)),
        ("idat", "100x100 PNG, IDAT of 25 MB inflating ~24 GiB",
         lambda w: _with_frame(phoenix_t(w), inflating_png(100, 100, 25 * 2**20))),
        ("idat", "100x100 PNG, IDAT at the size cap (336 MB)",
         lambda w: _with_frame(phoenix_t(w), inflating_png(100, 100, 8 * 40_000_000 + 15 * 2**20))),
        ("idat", "6324x6324 PNG (40 MP), IDAT within the compressed bound, inflating past its pixels",
         lambda w: _with_frame(phoenix_t(w), inflating_png(6324, 6324, 40 * 2**20))),
        ("jpeg", "6000x6000 progressive JPEG, 12,000 scans",
         lambda w: _with_frame(phoenix_t(w), progressive_jpeg(6000, 12_000))),
        ("jpeg", "6000x6000 progressive JPEG, 500 scans (the most --max-scans allows)",
         lambda w: _with_frame(phoenix_t(w), progressive_jpeg(6000, 500))),
    ]


def _overlap_bomb(root: Path, dest: Path, members: int = 40, each: int = 300 * 2**20) -> Path:
    """The tiny tree as a zip whose signer_demo-1 frames are `members` overlapping members sharing
    one deflate stream of `each` zeros (a 0.4 MB zip inflating members x each)."""
    from helpers import tree_members
    from test_hostile import SIGNER, overlapping_zip

    tree = [m for m in tree_members(root) if f"{SIGNER}/" not in m[0]]
    shared = [f"PHOENIX-2014-T/{SIGNER}/images{i:04d}.png" for i in range(1, members + 1)]
    return overlapping_zip(dest, tree, shared, b"\0" * each)


def _text_png(root: Path, kind: str, count: int, inflated: int) -> Path:
    from test_hostile import SIGNER, png_with_chunks, text_chunks

    frame = root / SIGNER / "images0002.png"
    frame.write_bytes(png_with_chunks(frame.read_bytes(), text_chunks(kind, count, inflated)))
    return root


def _long_name_tar(root: Path, dest: Path, size: int = 512 * 2**20) -> Path:
    """The tiny tree as a GNU tar.gz with a member whose long name holds `size` bytes between its
    two videos (it hid every member after it)."""
    from helpers import tar_of, tree_members

    members = tree_members(root)
    after_dev = max(i for i, (n, _) in enumerate(members) if "/dev/" in n) + 1
    members.insert(after_dev, ("PHOENIX-2014-T/" + "p" * size, b"x"))
    return tar_of(dest, members, tarfile.GNU_FORMAT)


def _big_manifest(folder: Path, size: int = 2**30, width: int = 100_000) -> Path:
    """A manifest of `size` bytes whose rows each hold `width` characters (within the line limit)."""
    from kinds import clip

    clip(folder / "a.mp4", 0)
    listed = folder / "list.csv"
    row = 0
    with open(listed, "w") as f:
        f.write("name,split,path,text\n")
        while f.tell() < size:
            f.write(f"v{row},train,a.mp4,{'t' * width}\n")
            row += 1
    return listed


def _stsz_video(folder: Path, entries: int) -> Path:
    """A folder of one mp4 whose sample-size table holds `entries` entries (stored)."""
    from kinds import clip
    from test_hostile import mp4_with_stsz

    made = clip(folder / "v.mp4", 0)
    made.write_bytes(mp4_with_stsz(made.read_bytes(), entries))
    return folder


def _long_video(folder: Path, frames: int = 600) -> Path:
    """A folder of one 540x720 mp4 of `frames` frames (signer_demo.mp4's, over and over)."""
    import av
    from helpers import VIDEOS

    folder.mkdir(parents=True)
    with av.open(str(VIDEOS / "signer_demo.mp4")) as src:
        rgbs = [f.to_ndarray(format="rgb24") for f in src.decode(video=0)]
    with av.open(str(folder / "long.mp4"), "w") as out:
        s = out.add_stream("mpeg4", rate=25)
        s.height, s.width = rgbs[0].shape[:2]
        for i in range(frames):
            out.mux(s.encode(av.VideoFrame.from_ndarray(rgbs[i % len(rgbs)], format="rgb24")))
        out.mux(s.encode(None))
    return folder


def _tiny_models(folder: Path) -> list[str]:
    from tiny_onnx import tiny_models

    m = tiny_models(folder, dynamic=True)
    return ["--estimator", "wholebody", "--detector", str(m["detector"]), "--pose-model",
            str(m["pose"])]


def round_three_cases() -> list[tuple]:
    """(kind, input, builder, extra arguments): issue 37's content cases, and the most each limit
    allows."""
    from kinds import phoenix_t

    def batch(n: int):
        return lambda w: (_long_video(w / "v"), ["--workers", "1", "--batch-size", str(n),
                                                 *_tiny_models(w / "m")])

    return [
        ("baseline", "tiny PHOENIX tree as shipped (6 frames)", lambda w: phoenix_t(w)),
        ("png-text", "PNG with 1000 iTXt chunks inflating 7 MB each (6.9 MB)",
         lambda w: _text_png(phoenix_t(w), "iTXt", 1000, 7 * 10**6)),
        ("png-text", "PNG with 64 zTXt chunks of 1 MiB (the most allowed)",
         lambda w: _text_png(phoenix_t(w), "zTXt", 64, 2**20)),
        ("zip", "zip of 40 overlapping members sharing one stream, 300 MB each (12 GB)",
         lambda w: _overlap_bomb(phoenix_t(w / "t"), w / "bomb.zip")),
        ("tar", "tar.gz with a 512 MiB GNU long name between its two videos",
         lambda w: _long_name_tar(phoenix_t(w / "t"), w / "long.tar.gz")),
        ("manifest", "manifest of 1 GiB, rows of 100,000 characters", lambda w: _big_manifest(w)),
        ("mp4", "mp4 whose tables list 5x10^7 samples in one chunk (200 MB)",
         lambda w: _stsz_video(w, 50_000_000)),
        ("mp4", "mp4 whose tables list 1,999,000 samples in one chunk (the most allowed)",
         lambda w: _stsz_video(w, 1_999_000)),
        ("batch", "600-frame 540x720 mp4, whole-body, --batch-size 8 (default)", batch(8)),
        ("batch", "the same, --batch-size 123 (the most allowed)", batch(123)),
    ]


_CASES = {"round-two": round_two_cases, "round-three": round_three_cases}


def build_case(group: str, k: int, dest: Path) -> None:
    """Build case k of a group under dest and print what to pass, then its extra arguments (run in
    its own process: a child forked from a process that built a 512 MiB header reports that
    process's peak as its own)."""
    made = _CASES[group]()[k][2](dest)
    path, extra = made if isinstance(made, tuple) else (made, [])
    print("\n".join([str(path), *extra]))


def case_rows(group: str, work: Path, pick: set[int] | None = None) -> list[dict]:
    out = []
    for k, (kind, name, *_) in enumerate(_CASES[group]()):
        if pick is not None and k not in pick:
            continue
        made, *extra = subprocess.run([sys.executable, __file__, "--build", group, str(k),
                                       str(work / f"in{k}")], check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()
        made = Path(made)
        size = sum(p.stat().st_size for p in made.parent.rglob("*") if p.is_file()) \
            if made.is_file() else sum(p.stat().st_size for p in made.rglob("*") if p.is_file())
        flag = "--manifest" if made.suffix == ".csv" else "--dataset"
        m = measure([sys.executable, "-m", "phoenix_keypoints", "run", flag, str(made), "--out",
                     str(work / f"r{k}"), *extra], tree=True, codes=(0, 1, 2))
        said = [line for line in m["output"] if line.startswith(("error", "warning: 1 of",
                                                               "warning: the", "warning: 299000",
                                                               "warning: 1 listed", "warning: 1 member",
                                                               "warning: 39 member"))
                or "not read past" in line or "not ok" in line]
        out.append({"kind": kind, "input": name, "input_mib": round(size / 2**20, 1),
                    "exit": m["exit"], "peak_rss_mib": m["peak_rss_mib_kernel"], "cpu_s": m["cpu_s"],
                    "wall_s": m["wall_s"], "said": " | ".join(said)[:300]})
        shutil.rmtree(work / f"in{k}", ignore_errors=True)
        shutil.rmtree(work / f"r{k}", ignore_errors=True)
        print(out[-1], flush=True)
    return out


def round_three(save: str | None, pick: set[int] | None = None) -> None:
    """Issue 37's cases only (or those picked by position): each met by `run` with default options
    (whole-body where a batch is measured)."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = case_rows("round-three", Path(tmp), pick)
    print(table([[r["kind"], r["input"][:70], r["input_mib"], r["exit"], r["peak_rss_mib"], r["cpu_s"]]
                 for r in rows], ["kind", "input", "MiB", "exit", "peak RSS MiB", "CPU s"]))
    if save:
        print(save_json(save, {"machine": machine(), "round_three": rows, "repo": str(REPO.name)}))


def _folder_cases(run: Path) -> list[tuple[str, list[str], object]]:
    """(case, the command's arguments after phoenix-keypoints, what it does to the run copy; None:
    the command meets the folder the case before left)."""
    def fifo(name: str):  # noqa: ANN202
        return lambda r: ((r / name).unlink(missing_ok=True), os.mkfifo(r / name))

    def unmerged(r: Path) -> None:
        (r / "keypoints.parquet").unlink()
        shutil.rmtree(r / "tensors")
        fifo("parts/chunk-000002.parquet")(r)

    def deep(r: Path) -> None:
        (r / "run.json").write_text('{"format": 2, "x": ' + "[" * 200_000 + "]" * 200_000 + "}")

    def string_format(r: Path) -> None:
        (r / "run.json").write_text(json.dumps({**json.loads((r / "run.json").read_text()),
                                                "format": "2"}))

    def same(r: Path) -> None:
        return None

    out = [("the finished run as it is (baseline)", ["status"], same),
           ("a committed part a FIFO", ["status"], unmerged),
           ("the same, resumed", ["run"], None),
           ("run.json a FIFO", ["status"], fifo("run.json")),
           ("progress.json a FIFO", ["status"], fifo("progress.json")),
           *((f"run.json 200,000 levels deep ({c})", [c], deep) for c in ("status", "verify", "run")),
           ('run.json "format": "2"', ["status"], string_format),
           *((f"--workers {v!r}", ["run", "--workers", v], same) for v in (" 5", "+1")),
           ("a distribution named ESC[31m...CR (run --help)", ["run", "--help"], same)]
    return [(name, [*args[:1], *(["--out", str(run)] if args != ["run", "--help"] else []),
                    *args[1:]], make) for name, args, make in out]


def _evil_dist(site: Path) -> None:
    """A dist-info whose Name holds ESC[31m and a CR (folded), advertising a family."""
    info = site / "evil_dist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\x1b[31mred\r x\n"
                                   "Version: 1.0\n", newline="")
    (info / "entry_points.txt").write_text("[phoenix_keypoints.families]\nredfam = redfam_family\n")


def _timed(args: list[str], env: dict[str, str], limit: float = 120) -> dict:
    """One command: its exit (None: killed after `limit` s, hung), wall s, what it said."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "phoenix_keypoints", *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"exit": None, "wall_s": limit, "said": f"hung: killed after {limit:.0f} s"}
    said = [x for x in p.stderr.splitlines() + p.stdout.splitlines()
            if x.startswith(("heartbeat:", "untrusted", "part of chunk", "Traceback",
                             "RecursionError")) or "error:" in x or "installed: evil" in x]
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1),
            "said": " | ".join(said)[:300], "raw_escape": "\x1b" in p.stdout + p.stderr}


def run_folder_rows(work: Path) -> list[dict]:
    """Issue 52's run-folder cases, each on a copy of one finished run over the embedded sample."""
    sample = subprocess.run([sys.executable, "-m", "phoenix_keypoints", "sample", "--out",
                             str(work / "sample")], check=True, capture_output=True, text=True)
    run = work / "done"
    subprocess.run([sys.executable, "-m", "phoenix_keypoints", "run", "--dataset",
                    sample.stdout.strip(), "--out", str(run), "--chunk-frames", "20"], check=True,
                   capture_output=True)
    _evil_dist(work / "site")
    env = {**os.environ, "PYTHONPATH": str(work / "site")}
    out, copy = [], work / "copy"
    for name, args, make in _folder_cases(copy):
        if make is not None:
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(run, copy)
            make(copy)
        out.append({"case": name, "command": "phoenix-keypoints " + shlex.join(
            a if a != str(copy) else "R" for a in args), **_timed(args, env)})
        print(out[-1], flush=True)
    return out


def run_folders(save: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_folder_rows(Path(tmp))
    print(table([[r["case"], r["command"], r["exit"], r["wall_s"], r["said"][:90]] for r in rows],
                ["case", "command", "exit", "wall s", "said"]))
    if save:
        print(save_json(save, {"machine": machine(), "run_folders": rows, "repo": str(REPO.name),
                               "note": "a host shared with other jobs: wall times are loaded ones"}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--save", help="results file name under docs/results/")
    p.add_argument("--only", choices=[*_CASES, "run-folders"],
                   help="only the round-two, round-three or run-folder cases")
    p.add_argument("--pick", help="round three: only the cases at these positions (0-based: 6,7)")
    p.add_argument("--build", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.build:
        return build_case(args.build[0], int(args.build[1]), Path(args.build[2]))
    if args.only == "run-folders":
        return run_folders(args.save)
    if args.only == "round-three":
        return round_three(args.save, {int(k) for k in args.pick.split(",")} if args.pick else None)
    with tempfile.TemporaryDirectory() as tmp:
        second = case_rows("round-two", Path(tmp))
        labels = [] if args.only else labels_rows(Path(tmp))
        pixels = [] if args.only else pixel_rows(Path(tmp))
    print(table([[r["kind"], r["input"][:60], r["input_mib"], r["exit"], r["peak_rss_mib"], r["cpu_s"]]
                 for r in second], ["kind", "input", "MiB", "exit", "peak RSS MiB", "CPU s"]))
    print()
    print(table([[r["file"], r["bytes"], r["peak_rss_mib"], r["above_baseline_mib"], r["bound_mib"],
                  r["said"][:70]] for r in labels],
                ["labels file", "bytes", "peak RSS MiB", "above baseline", "10x size + 100 MB",
                 "said"]))
    print()
    print(table([[r["input"], r["peak_rss_mib"], r["wall_s"]] for r in pixels],
                ["run on", "peak RSS MiB (largest process)", "wall s"]))
    if args.save:
        print(save_json(args.save, {"machine": machine(), "labels": labels, "pixel_bomb": pixels,
                                    "round_two": second, "repo": str(REPO.name)}))


if __name__ == "__main__":
    main()
