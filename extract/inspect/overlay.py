"""One video's frames with its keypoints drawn on them: an MP4, a GIF, or a PNG contact sheet.

One output frame (or sheet tile) per row of keypoints.parquet, in frame order. MP4 is written by
OpenCV (MPEG-4 part 2, which every OpenCV build and common players read); OpenCV has no GIF
writer, so GIFs are written by Pillow (already installed with matplotlib). Files are written under
a temporary name and renamed, so an interrupted `show` leaves no half file under the asked name.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.inspect.declared import drawn_declared_frames
from phoenix_keypoints.extract.inspect.draw import draw_frame, load_frame
from phoenix_keypoints.extract.inspect.rows import ReportError, part_arrays
from phoenix_keypoints.extract.keypoints.estimator import declaration_of_columns, family

SUFFIXES = (".mp4", ".gif", ".png")
SHEET_COLUMNS = 10


def video_size(rows: pa.Table) -> tuple[int, int]:
    """(width, height) of the video: its first recorded frame size (PHOENIX: 210 x 260)."""
    for w, h in zip(rows["width"].to_pylist(), rows["height"].to_pylist(), strict=True):
        if w and h:
            return int(w), int(h)
    return 210, 260


def drawn_frames(rows: pa.Table, frames_root: Path | None, scale: int,
                 seen: list[int] | None = None) -> Iterator[np.ndarray]:
    """Each row's frame with its keypoints drawn (RGB); seen gets 1 per frame found on disk."""
    width, height = video_size(rows)
    found = declaration_of_columns(rows.column_names)
    own = family(found.name).drawn_frames(rows, frames_root, width, height, scale, seen) \
        if found else None
    if own is not None:  # a family that draws its own points
        yield from own
        return
    if found is None:
        raise ReportError("these rows hold no landmark columns of a family this version knows")
    if found.quality is None:  # points drawn by the declared presence rule
        yield from drawn_declared_frames(found, rows, frames_root, width, height, scale, seen)
        return
    arrays = part_arrays(rows)  # landmark lists, drawn where they exist
    images, frames = rows["image"].to_pylist(), rows["frame"].to_pylist()
    for i, (image, frame) in enumerate(zip(images, frames, strict=True)):
        rgb = load_frame(frames_root, image)
        if seen is not None:
            seen.append(rgb is not None)
        yield draw_frame(found, rgb, {p: a[i] for p, a in arrays.items()}, width, height, scale,
                         f"{frame}")


def contact_sheet(tiles: list[np.ndarray], columns: int = SHEET_COLUMNS) -> np.ndarray:
    """Tiles of one size in rows of `columns`, on a dark background."""
    cols = max(1, min(columns, len(tiles)))
    rows = math.ceil(len(tiles) / cols)
    th, tw = tiles[0].shape[:2]
    gap = 2
    sheet = np.full((rows * (th + gap) - gap, cols * (tw + gap) - gap, 3), 15, np.uint8)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, cols)
        sheet[r * (th + gap): r * (th + gap) + th, c * (tw + gap): c * (tw + gap) + tw] = tile
    return sheet


def _write_mp4(frames: Iterator[np.ndarray], tmp: Path, fps: float) -> int:
    writer: cv2.VideoWriter | None = None
    n = 0
    try:
        for rgb in frames:
            if writer is None:
                writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"mp4v"), fps,
                                         (rgb.shape[1], rgb.shape[0]))
                if not writer.isOpened():
                    raise ReportError(f"OpenCV cannot write MP4 here ({tmp.parent}); "
                                      "ask for a .gif or .png instead")
            writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
            n += 1
    finally:
        if writer is not None:
            writer.release()
    return n


def _write_gif(frames: Iterator[np.ndarray], tmp: Path, fps: float) -> int:
    from PIL import Image

    count = [0]

    def pictures() -> Iterator[Image.Image]:
        for rgb in frames:
            count[0] += 1
            yield Image.fromarray(rgb).quantize(256, Image.Quantize.FASTOCTREE)  # 1 byte a pixel

    it = pictures()
    first = next(it)
    first.save(tmp, format="GIF", save_all=True, append_images=it, loop=0,
               duration=round(1000 / fps), disposal=1)
    return count[0]


def write_overlay(rows: pa.Table, frames_root: Path | None, dest: Path, fps: float = 25.0,
                  scale: int | None = None) -> tuple[int, int]:
    """Write dest (.mp4, .gif or .png sheet); returns (frames written, frames found on disk).

    scale defaults to 2 for videos (PHOENIX's 210 x 260 frames are small) and 1 for sheets.
    """
    dest = Path(dest)
    suffix = dest.suffix.lower()
    if suffix not in SUFFIXES:
        raise ReportError(f"--to {dest}: give a file ending in {', '.join(SUFFIXES)}")
    if rows.num_rows == 0:
        raise ReportError("the video has no rows in keypoints.parquet")
    try:  # a folder not there yet is made, as export makes its --to
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ReportError(f"--to {dest}: cannot make the folder {dest.parent} "
                          f"({e.strerror or e})") from None
    scale = scale or (1 if suffix == ".png" else 2)
    seen: list[int] = []
    frames = drawn_frames(rows, frames_root, scale, seen)
    tmp = dest.with_name(f".{dest.stem}.tmp{suffix}")
    try:
        if suffix == ".mp4":
            n = _write_mp4(frames, tmp, fps)
        elif suffix == ".gif":
            n = _write_gif(frames, tmp, fps)
        else:
            tiles = list(frames)
            n = len(tiles)
            if not cv2.imwrite(str(tmp), cv2.cvtColor(contact_sheet(tiles), cv2.COLOR_RGB2BGR)):
                raise ReportError(f"cannot write {dest}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return n, int(sum(seen))
