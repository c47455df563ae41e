"""pose-format's side of scripts/bench/run.py: the workload as lossless videos, and its keypoints
vs ours.

pose-format's `videos_to_poses` reads videos, not PNG folders. For a fair comparison it must see
exactly the pixels the job sees, so each source video is encoded once as FFV1 (pix_fmt bgr0, a
lossless codec PyAV writes and pose-format's reader, simple_video_utils over PyAV, decodes) and
decoded back with pose-format's own reader; the bytes must equal the job's PNG decode
(extract.keypoints.frames.read_frame) frame for frame, or the benchmark stops. Like the PNG workload's
symlinked frame folders, each benchmark video is a symlink to its source's one encoded file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.families.holistic.points import OFFSETS, PARTS
from phoenix_keypoints.extract.keypoints.frames import read_frame

CODEC, PIX_FMT, SUFFIX, FPS = "ffv1", "bgr0", ".mkv", 25
CODEC_TEXT = f"{CODEC} (pix_fmt {PIX_FMT}) in {SUFFIX}, {FPS} fps, written with PyAV"


def png_frames(folder: Path, files: tuple[str, ...]) -> list[np.ndarray]:
    """The RGB frames exactly as the job decodes them."""
    out = []
    for name in files:
        rgb, status, note, _ = read_frame(folder / name, digest=False)
        if rgb is None:
            raise SystemExit(f"{folder / name}: {status} ({note}); the workload must be readable")
        out.append(rgb)
    return out


def encode(frames: list[np.ndarray], path: Path) -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as box:
        stream = box.add_stream(CODEC, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = frames[0].shape[1], frames[0].shape[0], PIX_FMT
        for rgb in frames:
            box.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        box.mux(stream.encode())


def check_decode(frames: list[np.ndarray], path: Path) -> dict:
    """Decode with pose-format's reader and compare with the PNG pixels, bit for bit."""
    from simple_video_utils.frames import read_frames_exact

    back = list(read_frames_exact(str(path)))
    pairs = list(zip(back, frames, strict=True)) if len(back) == len(frames) else []
    same_shape = bool(pairs) and all(a.shape == b.shape for a, b in pairs)
    diff = max(int(np.abs(a.astype(np.int16) - b).max()) for a, b in pairs) if same_shape else None
    return {"frames_png": len(frames), "frames_decoded": len(back),
            "bit_exact": same_shape and diff == 0, "max_abs_pixel_diff": diff,
            "bytes": path.stat().st_size}


def encode_checked(folder: Path, files: tuple[str, ...], path: Path) -> dict:
    frames = png_frames(folder, files)
    encode(frames, path)
    check = {"source": folder.name, "video": str(path), **check_decode(frames, path)}
    if not check["bit_exact"]:
        raise SystemExit(f"{path} does not decode to the PNG pixels: {check}")
    return check


def build_videos(root: Path, out: Path, sources_dir: Path) -> dict:
    """One video file per dataset video in `out` (symlinks to one checked encoding per source)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    encoded: dict[Path, Path] = {}
    checks = []
    for v in discover(root).videos:
        src = (root / v.folder).resolve()
        if src not in encoded:
            encoded[src] = sources_dir / f"{src.name}{SUFFIX}"
            checks.append(encode_checked(src, v.files, encoded[src]))
        (out / f"{v.name}{SUFFIX}").symlink_to(encoded[src])
    return {"dir": str(out), "codec": CODEC_TEXT, "videos": len(list(out.iterdir())),
            "decode_checks": checks}


def ours(keypoints: Path, video: str) -> dict[str, np.ndarray]:
    """Each part of one video from keypoints.parquet: [frames, points, values], NaN where null."""
    import pyarrow.parquet as pq

    t = pq.read_table(keypoints, columns=["video", "frame", *PARTS], filters=[("video", "==", video)])
    t = t.sort_by("frame")
    out = {}
    for name, (n, k) in PARTS.items():
        rows = t.column(name).to_pylist()
        out[name] = np.array([np.full(n * k, np.nan) if r is None else r for r in rows],
                             np.float64).reshape(len(rows), n, k)
    return out


def theirs(pose_file: Path) -> dict[str, np.ndarray]:
    """The same parts from a .pose file, x and y back in image-normalised units, NaN where absent."""
    from pose_format import Pose

    pose = Pose.read(pose_file.read_bytes())
    data = np.asarray(pose.body.data.data, np.float64)[:, 0]
    conf = np.asarray(pose.body.confidence, np.float64)[:, 0]
    dims = pose.header.dimensions
    data[..., 0] /= dims.width
    data[..., 1] /= dims.height
    out = {}
    for name, (n, k) in PARTS.items():
        o = OFFSETS[name]
        part = data[:, o:o + n]
        if k == 4:  # pose: visibility is pose-format's confidence
            part = np.concatenate([part, conf[:, o:o + n, None]], axis=2)
        absent = ~np.any(data[:, o:o + n] != 0, axis=(1, 2))
        part[absent] = np.nan
        out[name] = part
    return out


def fresh_graph(folder: Path, files: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The same parts from mediapipe's own Holistic, fresh for this video: the arbiter."""
    import mediapipe as mp

    out: dict[str, list] = {name: [] for name in PARTS}
    with mp.solutions.holistic.Holistic(static_image_mode=False, model_complexity=1) as h:
        for rgb in png_frames(folder, files):
            r = h.process(rgb)
            for name, (n, k) in PARTS.items():
                found = getattr(r, f"{name}_landmarks")
                out[name].append(np.full((n, k), np.nan) if found is None else np.array(
                    [[p.x, p.y, p.z, p.visibility][:k] for p in found.landmark]))
    return {name: np.array(v, np.float64) for name, v in out.items()}


def differences(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict:
    """Max |a - b| of the coordinates (x, y, z) and of pose visibility, where both found a part."""
    per_part, same_presence = {}, True
    for name in PARTS:
        if a[name].shape != b[name].shape:
            return {"error": f"{name}: {a[name].shape} vs {b[name].shape}"}
        found_a, found_b = ~np.isnan(a[name][:, 0, 0]), ~np.isnan(b[name][:, 0, 0])
        same_presence &= bool(np.array_equal(found_a, found_b))
        both = found_a & found_b
        d = np.abs(a[name][both] - b[name][both])
        per_part[name] = {"frames_found": int(both.sum()),
                          "max_abs_diff": [float(x) for x in d.max(axis=(0, 1))] if both.any()
                          else None}
    found = [p["max_abs_diff"] for p in per_part.values() if p["max_abs_diff"] is not None]
    pose = per_part["pose"]["max_abs_diff"]
    return {"same_parts_found": same_presence,
            "coordinates_max_abs_diff": max((max(d[:3]) for d in found), default=None),
            "pose_visibility_max_abs_diff": pose[3] if pose else None, "per_part": per_part}


def compare(keypoints: Path, pose_file: Path, root: Path, video: str) -> dict:
    """One video three ways: ours, pose-format's, and a fresh mediapipe graph's."""
    v = next(v for v in discover(root).videos if v.name == video)
    a, b, f = ours(keypoints, video), theirs(pose_file), fresh_graph(root / v.folder, v.files)
    return {"video": video, "frames": len(a["pose"]),
            "ours_vs_pose_format": differences(a, b),
            "ours_vs_fresh_graph": differences(a, f),
            "pose_format_vs_fresh_graph": differences(b, f)}
