"""A tiny stand-in for RWTH-PHOENIX-Weather 2014 T, generated at call time.

The real dataset is large and cannot be shipped or downloaded in tests, so this module writes a
few short "videos" in exactly the release's on-disk layout. They are built only from photos that
ship inside installed packages (matplotlib, scikit-image), animated by small deterministic camera
moves so an estimator's video-mode tracking sees motion. One video shows no person at all, so the
null-keypoint path gets exercised. The same bytes are written on every call.

Usage: ``build_sample(out_dir)`` or ``python -m phoenix_keypoints.extract.sample OUT_DIR`` (prints
the root).
"""

from __future__ import annotations

import argparse
import csv
import pathlib
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

WIDTH, HEIGHT = 210, 260
"""Size of a PHOENIX-2014-T full frame (numpy shape (260, 210, 3))."""

SPLITS = ("train", "dev", "test")
HEADER = ["name", "video", "start", "end", "speaker", "orth", "translation"]
FRAMES_DIR = pathlib.Path("features") / "fullFrame-210x260px"
ANNOTATIONS_DIR = pathlib.Path("annotations") / "manual"

# PNG level is fixed so output bytes do not depend on OpenCV's default.
_PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 3]


def _grace_hopper() -> np.ndarray:
    import matplotlib

    path = pathlib.Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise FileNotFoundError(path)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _astronaut() -> np.ndarray:
    from skimage import data

    return data.astronaut()


def _camera() -> np.ndarray:
    from skimage import data

    return cv2.cvtColor(data.camera(), cv2.COLOR_GRAY2RGB)


def _coffee() -> np.ndarray:
    from skimage import data

    return data.coffee()


@dataclass(frozen=True)
class _Video:
    """One sample video: a photo animated by a linear pan and a geometric zoom."""

    name: str
    split: str
    load: Callable[[], np.ndarray]  # RGB uint8 photo
    frames: int
    center: tuple[float, float]  # (x, y) of the crop centre at frame 0, in photo pixels
    height: float  # crop height at frame 0, in photo pixels (width follows the 210:260 ratio)
    pan: tuple[float, float]  # centre shift per frame, in photo pixels
    zoom: float  # crop height factor per frame (<1 zooms in)
    speaker: str
    orth: str
    translation: str


# Crops keep head, shoulders and upper body in view, so an estimator finds body and face.
# fmt: off
VIDEOS: tuple[_Video, ...] = (
    _Video("hopper-1", "train", _grace_hopper, 20, (256, 330), 540, (1.5, -1.0), 0.995,
           "Signer01", "WETTER MORGEN SONNE", "morgen scheint die sonne"),
    _Video("astronaut-1", "train", _astronaut, 18, (200, 270), 480, (-1.0, 0.5), 0.996,
           "Signer02", "REGEN NORD KOMMEN", "im norden kommt regen auf"),
    _Video("cameraman-1", "dev", _camera, 16, (200, 250), 440, (1.0, 0.0), 0.995,
           "Signer03", "WIND STARK", "der wind weht stark"),
    _Video("hopper-2", "test", _grace_hopper, 16, (250, 310), 500, (-1.0, 1.0), 1.004,
           "Signer01", "TEMPERATUR STEIGEN", "die temperaturen steigen"),
    _Video("coffee-1", "test", _coffee, 12, (300, 200), 360, (2.0, 0.0), 0.99,
           "Signer04", "NACHT KLAR", "in der nacht ist es klar"),
)
# fmt: on


def _crop(photo: np.ndarray, video: _Video, t: int) -> np.ndarray:
    """Frame ``t`` of ``video``: the moved crop window, clamped to the photo, resized to 210x260."""
    ph, pw = photo.shape[:2]
    h = video.height * video.zoom**t
    w = h * WIDTH / HEIGHT
    h, w = min(h, ph), min(w, pw)
    cx = video.center[0] + video.pan[0] * t
    cy = video.center[1] + video.pan[1] * t
    x0 = int(round(min(max(cx - w / 2, 0), pw - w)))
    y0 = int(round(min(max(cy - h / 2, 0), ph - h)))
    window = photo[y0 : y0 + int(round(h)), x0 : x0 + int(round(w))]
    return cv2.resize(window, (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA)


def build_sample(out_dir: pathlib.Path) -> pathlib.Path:
    """Write a tiny dataset in the PHOENIX-2014-T layout; return its root.

    The root is ``out_dir / "PHOENIX-2014-T"`` (the folder holding annotations/ and features/).
    The camera moves are fixed, so output is identical byte for byte on every call, which is what
    the tests and caches rely on.
    """
    root = pathlib.Path(out_dir) / "PHOENIX-2014-T"
    (root / ANNOTATIONS_DIR).mkdir(parents=True, exist_ok=True)
    photos: dict[Callable[[], np.ndarray], np.ndarray] = {}
    for video in VIDEOS:
        photo = photos.setdefault(video.load, video.load())
        folder = root / FRAMES_DIR / video.split / video.name
        folder.mkdir(parents=True, exist_ok=True)
        for t in range(video.frames):
            bgr = cv2.cvtColor(_crop(photo, video, t), cv2.COLOR_RGB2BGR)
            path = folder / f"images{t + 1:04d}.png"
            if not cv2.imwrite(str(path), bgr, _PNG_PARAMS):
                raise OSError(f"could not write {path}")
    for split in SPLITS:
        path = root / ANNOTATIONS_DIR / f"PHOENIX-2014-T.{split}.corpus.csv"
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="|", lineterminator="\n")
            writer.writerow(HEADER)
            for v in VIDEOS:
                if v.split == split:
                    writer.writerow(
                        [v.name, f"{v.name}/1/*.png", -1, -1, v.speaker, v.orth, v.translation]
                    )
    (root / "README.txt").write_text(README, encoding="utf-8")
    return root


README = """\
Tiny synthetic sample in the RWTH-PHOENIX-Weather 2014 T layout
================================================================

Generated by extract/sample.py (phoenix-keypoints) for tests and demos. It is NOT part of the
PHOENIX dataset: no PHOENIX images are included. Each "video" is one still photo animated by a
small deterministic pan/zoom, resized to 210x260 like PHOENIX full frames. Glosses and
translations are made up.

Videos and sources (all photos ship inside installed Python packages):

- hopper-1 (train), hopper-2 (test): grace_hopper.jpg from matplotlib's mpl-data/sample_data.
  Matplotlib's sample_data/README.txt states no licence ("This is the sample data needed for
  some of matplotlib's examples and docs."). The photo is the official U.S. Navy portrait of
  Rear Admiral Grace M. Hopper, a work of the U.S. federal government, hence public domain.
- astronaut-1 (train): skimage.data.astronaut(), Eileen Collins, from NASA's Great Images
  database. scikit-image's docstring: "No known copyright restrictions, released into the
  public domain."
- cameraman-1 (dev): skimage.data.camera(), grayscale, turned into 3 equal channels.
  scikit-image's docstring: "No copyright restrictions. CC0 by the photographer (Lav Varshney)."
- coffee-1 (test): skimage.data.coffee(), a coffee cup, no person (exercises null keypoints).
  scikit-image's docstring: "No copyright restrictions. CC0 by the photographer
  (Rachel Michetti)."

scikit-image's skimage/data/README.txt itself only says it holds "sample data from
scikit-image"; the licence notes above are from the docstrings in skimage/data/_fetchers.py.
"""


def main(argv: list[str] | None = None) -> None:
    """CLI: ``python -m phoenix_keypoints.extract.sample OUT_DIR``: builds it, prints its root."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=pathlib.Path)
    args = parser.parse_args(argv)
    print(build_sample(args.out_dir))


if __name__ == "__main__":
    main()
