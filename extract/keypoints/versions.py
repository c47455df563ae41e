"""The versions a run's keypoint values depend on: recorded in every part, compared on resume.

The same frames and models give other points under another OpenCV (rtmlib's affine crop and resize,
libjpeg and libpng inside it), another estimator library (mediapipe's graphs, onnxruntime's
kernels), another numpy, another PyAV/FFmpeg (a video's pixels) or another version of this tool.
So each part's footer records these versions as its worker had them, a resume under other ones is
refused before a frame is read (jobs.run.todo), and the merge writes into keypoints.parquet and
run.json the versions its parts were made with, saying so where they differ. Python, pyarrow and
the rest are recorded in run.json but decide no value.
"""

from __future__ import annotations

import shlex
from importlib.metadata import PackageNotFoundError, version

TOOL = "phoenix-keypoints"
OPENCV = "opencv-contrib-python"
DECODER = "av"  # key of the video decoder's version: PyAV with its FFmpeg (extract.sources.video)
NOT_INSTALLED = "not installed"
NOT_RECORDED = "not recorded"  # a key an older run.json lacks


def installed(*dists: str) -> str:
    """The version of the first of these distributions that is installed (as pip names it)."""
    for dist in dists:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return NOT_INSTALLED


def _library_of(estimator: str) -> tuple[str, ...]:
    """The distributions of a family's own library (its `LIBRARY`: the first is the key recorded,
    the others provide the same module), () for a family that declares none."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    try:
        return tuple(family(estimator).LIBRARY)
    except ValueError:  # a family this install does not know: nothing of its own to record
        return ()


def _library(estimator: str, dists: tuple[str, ...]) -> str:
    """A family library's version as its module says where the family tells it (onnxruntime and
    onnxruntime-gpu provide the same module; whichever was installed last is the one imported)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    try:
        said = family(estimator).library_version()
    except ImportError:
        return NOT_INSTALLED
    return installed(*dists) if said is None else said


def value_keys(estimator: str, videos: bool = False) -> tuple[str, ...]:
    """The version keys an estimator's values depend on (`videos`: frames decoded from video files)."""
    library = _library_of(estimator)[:1]
    return (TOOL, *library, OPENCV, "numpy", *((DECODER,) if videos else ()))


def value_versions(estimator: str, decoder: str = "") -> dict[str, str]:
    """This process's versions of what the estimator's values depend on; `decoder`: the video
    decoder's version (extract.sources.video.decoder_version) where frames come from videos."""
    dists = _library_of(estimator)
    out = {TOOL: installed(TOOL), **({dists[0]: _library(estimator, dists)} if dists else {}),
           OPENCV: installed(OPENCV), "numpy": installed("numpy")}
    if decoder:
        out[DECODER] = decoder
    return out


def differences(made: dict[str, str], now: dict[str, str]) -> dict[str, tuple[str, str]]:
    """{key: (made, now)} for each key of both whose versions differ."""
    return {k: (made[k], v) for k, v in now.items() if k in made and made[k] != v}


def pins(diffs: dict[str, tuple[str, str]]) -> list[str]:
    """`pip install` requirements that bring back the versions the parts were made with."""
    out = []
    for key, (made, _) in diffs.items():
        number = made.split()[1] if key == DECODER and made.startswith("av ") else made
        if number and " " not in number and number not in (NOT_INSTALLED, NOT_RECORDED):
            out.append(f"{key}=={number}")
    return out


def named(diffs: dict[str, tuple[str, str]], there: str = "there", here: str = "here") -> str:
    """Both versions of each key that differs, as a refusal names them."""
    return ", ".join(f"{k} {a} {there}, {b} {here}" for k, (a, b) in diffs.items())


def pip_hint(diffs: dict[str, tuple[str, str]]) -> str:
    """' (pip install PINS)' that brings back the first versions of diffs ('' where none can)."""
    back = " ".join(map(shlex.quote, pins(diffs)))
    return f" (pip install {back})" if back else ""


SHOWN_CHUNKS = 5  # chunks named for each version of a mixed file


def combined(per_part: dict[int, dict[str, str]]) -> tuple[dict[str, str], list[str]]:
    """(one version per key, the keys whose parts differ) for a file made of these parts (chunk
    -> versions). Where every part agrees, the version; else each version with its chunks
    ("4.11.0.86 (chunks 0, 1); 5.1.0.95 (chunk 2)"), so a mixed file says so in the one place a
    reader looks. A part without a key (a chunk of frame files has no decoder) is not counted."""
    out, mixed = {}, []
    for key in sorted({k for v in per_part.values() for k in v}):
        chunks: dict[str, list[int]] = {}
        for chunk, versions in sorted(per_part.items()):
            if key in versions:
                chunks.setdefault(versions[key], []).append(chunk)
        if len(chunks) == 1:
            out[key] = next(iter(chunks))
            continue
        mixed.append(key)
        out[key] = "; ".join(f"{v} ({_chunks(c)})" for v, c in chunks.items())
    return out, mixed


def _chunks(chunks: list[int]) -> str:
    shown = ", ".join(map(str, chunks[:SHOWN_CHUNKS]))
    more = f" and {len(chunks) - SHOWN_CHUNKS} more" if len(chunks) > SHOWN_CHUNKS else ""
    return f"chunk{'s' if len(chunks) > 1 else ''} {shown}{more}"
