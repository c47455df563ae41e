"""Keypoints from the user's ONNX files: a YOLOX person detector, then a top-down pose model on the
signer's box (an RTMPose / RTMW / DWPose SimCC head, or a ViTPose / HRNet heatmap head: heads.py;
COCO-WholeBody 133, COCO 17, Halpe 26 or hand 21 points: layouts.py), with rtmlib's pre- and
post-processing, so a user's files give the keypoints rtmlib gives (tests/test_wholebody.py,
tests/test_heads.py).

What rtmlib does, and so what this module does (rtmlib 0.0.16: YOLOX, RTMPose):
- rtmlib is fed frames as OpenCV reads them (BGR); our frames are RGB, so they are turned back.
- YOLOX: the frame resized (bilinear) by min(H/h, W/w) into the top-left of a 114-grey input of
  the model's size, raw pixel values. A model with NMS inside answers [1, N, 5] (x1, y1, x2, y2,
  score; boxes with score > 0.3 kept); a raw one answers one row per grid cell of strides 8, 16,
  32, decoded, scored objectness x class, and suppressed per class (score > 0.7, IoU 0.45).
- RTMPose (and ViTPose, the same crop): the box to centre and scale (x 1.25), widened to the
  model's aspect ratio, an affine warp to the model's input, (pixel - mean) / std; the head's
  outputs decoded and mapped back through centre and scale (heads.py). No box: the whole frame.
- The dtypes on the way are rtmlib's (float32 boxes from a model with NMS, float64 after rtmlib's
  own NMS), so the affine matrix, hence the warped pixels, are the same bits.

One signer per frame: the largest box (the first of equal ones). `persons` counts the boxes.
A hand model (hand21) with a detector is rtmlib's `Hand`: the detector read as its RTMDet
(rtmdet.py: normalised input, its cuts, class 0) and the pose model run on every box, up to
--max-persons a frame (the largest first); every hand is kept, and the two largest are the
signer's left and right (persons.py).
onnxruntime runs with one thread per session (workers = cores, as for Holistic), on the CPU or on
device 0 of the worker's own CUDA_VISIBLE_DEVICES (`--device`); it is imported only here, when a
whole-body run starts, and its telemetry is turned off when this module loads, before onnxruntime
does (extract.keypoints.environ): the tool never phones home, in a worker or in a notebook.

Batches (`--batch-size`): the frames of a batch go through the detector in one session call and
their crops through the pose model in another, where the model's batch axis is dynamic; a model
exported with a fixed batch of 1 is run once per frame. Pre- and post-processing stay per frame,
so a batch gives each frame what it gives alone (tests/test_wholebody.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from phoenix_keypoints.extract.families.wholebody import raw_grid
from phoenix_keypoints.extract.families.wholebody.declaration import declaration_of, layout_of
from phoenix_keypoints.extract.families.wholebody.gpu_memory import session_limits
from phoenix_keypoints.extract.families.wholebody.heads import (
    DECODERS,
    HEATMAP,
    SIMCC,
    answer_shapes,
    decode_heatmaps,
    decode_simcc,
    heatmap_problem,
    read_head,
)
from phoenix_keypoints.extract.families.wholebody.layouts import (
    DEFAULT_LAYOUT,
    EVERY_HAND,
    layout_for,
)
from phoenix_keypoints.extract.families.wholebody.onnx_outputs import (
    MODEL_ADVICE,
    STATUS_BAD_DETECTOR,
    STATUS_BAD_POSE,
    BadOutput,
    captured,
    check_answer,
    check_detector,
    detector_problem,
    escaped,
    pose_problem,
    quiet_run_options,
    run_model,
)
from phoenix_keypoints.extract.families.wholebody.persons import (
    MAX_PERSONS,
    Posed,
    areas,
    capped,
    hands_columns,
    person_row,
)
from phoenix_keypoints.extract.families.wholebody.rtmdet import (
    HAND_SOLUTION,
    RTMDET,
    RTMDET_KIND,
    YOLOX,
    DetectorKind,
    kind_for,
    kind_of,
)
from phoenix_keypoints.extract.families.wholebody.tracking import (
    Tracker,
    track_batch,
    track_lanes,
)
from phoenix_keypoints.extract.keypoints.cuda_libs import preload as preload_cuda
from phoenix_keypoints.extract.keypoints.environ import telemetry_off
from phoenix_keypoints.extract.keypoints.estimator import (
    DEFAULT_BATCH,
    RUNTIME,
    ModelFileError,
    batch_refused,
    runtime,
)
from phoenix_keypoints.extract.keypoints.execution import gpu_name, value_options
from phoenix_keypoints.extract.keypoints.model_calls import (
    bounded_load,
    input_refused,
    last_growth,
    limits,
)
from phoenix_keypoints.extract.keypoints.onnx_files import (
    as_given,
    check_model_file,
    external_problems,
    external_record,
    model_problem,
    sha256_of,
)
from phoenix_keypoints.extract.keypoints.onnx_graph import check_graph
from phoenix_keypoints.extract.keypoints.out_of_memory import note_gpu_session
from phoenix_keypoints.extract.keypoints.words import a

telemetry_off()  # before any `import onnxruntime` below: read once, when the library loads
preload_cuda()  # where a GPU is here: CUDA and cuDNN from the nvidia-* wheels, before onnxruntime

POINTS = 133
PAD = 1.25  # rtmlib's bbox padding
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
END2END_SCORE = 0.3  # boxes kept from a detector with NMS inside
# A pose model's crops a call, per frame of the batch: a crop of the largest published input
# (384x288), as float64 then float32, holds about 4 MiB; four are a 1920x1080 frame's share of
# --batch-size's memory rule (estimator.BATCH_FRAME_BYTES and the detector's input, ~16 MiB)
CROPS_PER_FRAME = 4
RAW_SCORE, RAW_NMS = 0.7, 0.45  # a raw detector's score cut and IoU threshold
GREY = 114
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
YOLOX_KIND = DetectorKind(YOLOX, None, None, RAW_SCORE, RAW_NMS, None)  # raw pixels, every class
KINDS = {YOLOX: YOLOX_KIND, RTMDET: RTMDET_KIND}  # rtmdet.py: why a run's layout picks one


class DeviceError(ModelFileError):
    """--device cuda where this onnxruntime has no CUDA provider or the worker no GPU (exit 2)."""


def cuda_provider() -> bool:
    """Whether this onnxruntime can run on a GPU (the onnxruntime-gpu package, not onnxruntime)."""
    import onnxruntime as ort

    return CUDA in ort.get_available_providers()


def gpu_given() -> bool:
    """Whether this process was given a GPU: a CUDA_VISIBLE_DEVICES naming at least one."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return bool(env) and not env.startswith("-")


# The CUDA provider's options, made for batches of fixed shapes (docs/wholebody.md#batches-and-devices;
# onnxruntime's CUDA execution provider documents each):
# - cudnn_conv_algo_search HEURISTIC: cuDNN's heuristics pick each convolution's algorithm from
#   the shapes alone. The default, EXHAUSTIVE, times every algorithm for every new input shape
#   (slow on the first batch of each shape) and keeps the fastest it timed, so two workers, or a
#   run and its resume, could keep different algorithms, hence other values, by the timing's noise.
# - arena_extend_strategy kSameAsRequested: the memory arena grows by what is asked, not to the next
#   power of two (which took up to twice the memory a batch needs: 124.7 GB of a 141 GB card for 8
#   workers of the heavy pair at batch 32, issue 47).
# - gpu_mem_limit (bytes, per session): the worker's share of its card, split between its models
#   (jobs/schedule/devices.py decides the share before any worker starts).
# - do_copy_in_default_stream 1 (the default, said so it is recorded): copies and compute on one
#   stream; 0 may race (onnxruntime's docs).
# TF32 (use_tf32) and the rest stay onnxruntime's defaults, as rtmlib's CUDA sessions have them.
# At --batch-size 1 the search stays rtmlib's (EXHAUSTIVE, onnxruntime's default): one frame a
# call is rtmlib's own loop, whose keypoints that batch size gives (one shape a model, so the
# search runs once, at the start); the memory options change no value.
CUDA_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC", "arena_extend_strategy": "kSameAsRequested",
                "do_copy_in_default_stream": "1"}


def providers(device: str, memory: int | None = None, batch: int | None = None) -> list[Any]:
    """onnxruntime's providers for --device: CUDA on device 0 of this process's own
    CUDA_VISIBLE_DEVICES (the GPU its coordinator pinned it to) with CUDA_OPTIONS (at batch 1,
    rtmlib's search) and, where given, `memory` bytes for the session's arena; CPU for what CUDA
    cannot run."""
    if device == "cpu" or (device == "auto" and not (cuda_provider() and gpu_given())):
        return [CPU]
    if not cuda_provider():
        raise DeviceError("--device cuda: this onnxruntime has no CUDAExecutionProvider. Install "
                          "the GPU build (python scripts/gpu_install.py: the 'phoenix-keypoints[gpu]' "
                          "extra's onnxruntime-gpu in place of onnxruntime, docs/gpu.md), or pass "
                          "--device cpu.")
    if not gpu_given():
        raise DeviceError("--device cuda: this worker was given no GPU (CUDA_VISIBLE_DEVICES="
                          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}). Pass --num-gpus N, or "
                          "--device cpu.")
    options = {k: v for k, v in CUDA_OPTIONS.items()
               if batch != 1 or k != "cudnn_conv_algo_search"}
    limit = {"gpu_mem_limit": str(int(memory))} if memory else {}
    return [(CUDA, {"device_id": "0", **options, **limit}), CPU]


@dataclass(frozen=True)
class ModelFile:
    """A model file as recorded: where it was, its bytes' digest and size, its input (h, w), and
    its external data files (location, sha256, size; recorded only where it has some)."""

    path: str  # as given, absolute: what onnxruntime opens (external data beside it)
    sha256: str
    size: int
    input_hw: tuple[int, int]
    external_data: list[dict[str, Any]] = field(default_factory=list)
    resolved: str = ""  # where the path's links lead, where that is elsewhere

    def as_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "sha256": self.sha256, "size": self.size,
               "input_size": {"height": self.input_hw[0], "width": self.input_hw[1]}}
        if self.resolved and self.resolved != self.path:
            out["resolved"] = self.resolved
        return out | ({"external_data": self.external_data} if self.external_data else {})


def _not_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _session(path: Path, flag: str, device: str = "cpu", memory: int | None = None,
             batch: int | None = None) -> Any:
    """One session, one thread (a worker owns one core), on --device (`memory`: the GPU arena's
    bytes; `batch`: the frames a call, which picks the CUDA options); refused with what to do."""
    import onnxruntime as ort

    # before onnxruntime opens anything, whatever its version; then loops no published model needs
    external = check_model_file(path, flag, MODEL_ADVICE)
    check_graph(path, flag, MODEL_ADVICE)
    if not str(path).isascii() and _not_utf8(str(path)):  # onnxruntime takes a path as UTF-8 text
        shown = str(path).encode("utf-8", "backslashreplace").decode()
        raise ModelFileError(f"{flag} {shown}: its path is not UTF-8, which onnxruntime cannot "
                             "open: rename the file or its folder, or pass a link to it named "
                             "in UTF-8.")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    try:  # its warnings quote the model's names: written again escaped
        size = os.stat(path).st_size + sum(os.stat(f).st_size for _, f in external)
        session = bounded_load(lambda: captured(lambda: ort.InferenceSession(
            str(path), sess_options=so, providers=providers(device, memory, batch))),
            flag, path, size, MODEL_ADVICE)
    except ModelFileError:
        raise
    except Exception as e:  # onnxruntime raises its own classes for any unreadable model
        first = escaped(str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__)
        raise ModelFileError(f"{flag} {path}: not an ONNX model onnxruntime can load ({first}). "
                             "Pass the .onnx file itself (unzip rtmlib's downloads first).") from None
    if CUDA in session.get_providers():  # its memory running out is the card's (out_of_memory.py)
        note_gpu_session(flag, path, memory, batch)
    return session


def _input_hw(session: Any, path: Path, flag: str) -> tuple[int, int]:
    inputs = session.get_inputs()
    shape = inputs[0].shape if len(inputs) == 1 else []
    if len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]) or shape[1] not in (3, "3"):
        raise ModelFileError(f"{flag} {path}: expected one input [1, 3, H, W] with fixed H and W, "
                             f"found {escaped(str([i.shape for i in inputs]))}. Export the model "
                             "with a fixed input size (rtmlib's published files have one).")
    hw = int(shape[2]), int(shape[3])
    if why := input_refused(hw):  # before any frame or grey input is made that size
        raise ModelFileError(f"{flag} {path}: {why}. Pass a detector or pose model of the usual "
                             "input size (docs/wholebody.md).")
    return hw


def dynamic_batch(session: Any) -> bool:
    """Whether the model takes any number of frames per call (its input's batch axis has a name,
    not a fixed 1)."""
    return not isinstance(session.get_inputs()[0].shape[0], int)


def _run(session: Any, name: str, x: np.ndarray, dynamic: bool,
         pad: int | None = None) -> list[np.ndarray]:
    """The model's outputs for a batch x: one call where the batch axis is dynamic, else one
    call per item, stacked (the same arrays a dynamic model would answer).

    pad: every call takes exactly `pad` items (fixed shapes): x in calls of `pad`, the last one
    filled up with zeros whose answers are dropped. On a GPU the kernels are then chosen once, and
    an item's values, which depend on the shape of the call it is in (not on its neighbours or the
    zeros beside it: measured on an H200, issue 47), are the same wherever a batch was cut. The
    one place that pads: the detector, the pose model and the videos in lockstep all call here."""
    quiet = quiet_run_options()
    if not dynamic:
        if len(x) == 1:
            return session.run(None, {name: x}, quiet)
        each = [session.run(None, {name: x[i:i + 1]}, quiet) for i in range(len(x))]
        return [np.concatenate(outs) for outs in zip(*each, strict=True)]
    if not pad or len(x) == pad:
        return session.run(None, {name: x}, quiet)
    calls = []
    for start in range(0, len(x), pad):
        part = x[start:start + pad]
        n = len(part)
        if n < pad:
            part = np.concatenate([part, np.zeros((pad - n, *x.shape[1:]), x.dtype)])
        calls.append([out[:n] for out in session.run(None, {name: part}, quiet)])
    return calls[0] if len(calls) == 1 else [np.concatenate(o) for o in zip(*calls, strict=True)]


def describe(path: Path, flag: str) -> ModelFile:
    """The recorded facts of one model file, checked to load (no frame is run)."""
    path = Path(path)
    session = _session(path, flag)
    hw = _input_hw(session, path, flag)
    sha, size = sha256_of(path, flag)
    given, resolved = as_given(path)
    return ModelFile(given, sha, size, hw, external_record(path, flag, MODEL_ADVICE), resolved)


def onnxruntime_version() -> str:
    import onnxruntime as ort

    return str(ort.__version__)


def batch_axes(detector: Path | None, pose_model: Path) -> str:
    """How each model takes a batch, said once at start: in one call, or one frame at a time."""
    def one(path: Path, flag: str) -> str:
        dyn = dynamic_batch(_session(Path(path), flag))
        how = "in one call" if dyn else "one by one (its batch axis is fixed at 1)"
        return f"{flag[2:].replace('-', ' ')} {how}"
    det = one(detector, "--detector") if detector else "no detector (the whole frame)"
    return f"{det}, {one(pose_model, '--pose-model')}"


def record(detector: Path | None, pose_model: Path, point_set: str | None = None,
           decoder: str | None = None, detector_kind: str | None = None) -> dict[str, Any]:
    """What a whole-body run records of its models (run.json, part footers, file metadata): the
    files (no detector: none, the pose model takes the whole frame; RTMDet's record says its
    kind: --detector-kind, or the layout's rtmlib solution's), the pose model's head and decoder,
    the point layout (--point-set, or the one its number of points decides)."""
    pose = describe(pose_model, "--pose-model")
    det = {}
    if detector is not None:
        det = {"detector": describe(detector, "--detector").as_dict()}
        Detector(Path(detector)).probe()  # its output layout checked now, not in every worker
    model = PoseModel(Path(pose_model), decoder=decoder or DECODERS[0])
    model.probe()
    layout = layout_for(model.head.points, point_set)
    kind = kind_for(layout.solution, detector_kind)  # by default rtmlib's solution's detector
    if det and kind != YOLOX:
        det["detector"]["kind"] = kind
    read = {"point_set": layout.name, "head": model.head.record(model.decoder)}
    if model.head.kind == SIMCC and layout.name == DEFAULT_LAYOUT:
        read = {}  # rtmlib's own SimCC 133: recorded as before heads and point sets were
    if det and layout.solution == HAND_SOLUTION:  # every hand (HANDS_LAYOUT): runs before, one
        read["hands"] = EVERY_HAND
    return {**det, "pose_model": pose.as_dict(), "onnxruntime": onnxruntime_version(), **read}


def model_problems(settings: dict[str, Any]) -> list[str]:
    """What differs between a run's recorded model files and the files at those paths now."""
    out = []
    for key in ("detector", "pose_model"):
        if key not in settings:  # no detector: the pose model on the whole frame
            continue
        rec = settings[key]
        flag, path = f"--{key.replace('_', '-')}", Path(rec["path"])
        why = model_problem(path)
        if why:
            out.append(f"{flag} {path}: the model this run was made with is gone ({why}). Put it "
                       f"back, or pass {flag} with a copy of it (sha256 {rec['sha256']}).")
        elif path.stat().st_size != rec["size"] or sha256_of(path, flag)[0] != rec["sha256"]:
            out.append(f"{flag} {path}: not the model this run was made with (sha256 "
                       f"{rec['sha256']}). Put that file back, or start a new --out.")
        else:
            out += external_problems(path, rec.get("external_data", []), flag)
    return out


def check_record(settings: dict[str, Any]) -> None:
    """Refuse a run whose model files are no longer the bytes it recorded (size, sha256)."""
    problems = model_problems(settings)
    if problems:
        raise ModelFileError(" ".join(problems))


class Detector:
    """A YOLOX person detector (or rtmlib's RTMDet, kind="rtmdet": rtmdet.py): frame (BGR) ->
    boxes [N, 4] in frame pixels, as rtmlib's YOLOX (RTMDet) gives them."""

    pad: int | None = None  # every call this many frames (fixed shapes: _run), None: as given

    def __init__(self, path: Path, device: str = "cpu", kind: str = YOLOX,
                 memory: int | None = None, batch: int | None = None) -> None:
        self.path = Path(path)
        self.kind = KINDS[kind]
        self.session = _session(Path(path), "--detector", device, memory, batch)
        self.hw = _input_hw(self.session, Path(path), "--detector")
        self.input = self.session.get_inputs()[0].name
        self.dynamic = dynamic_batch(self.session)
        self.layout = check_detector(self.session, self.hw, "--detector", self.path, POINTS)

    def probe(self) -> None:
        """One grey input through the model: its answer must have its layout's shape."""
        x = np.full((1, 3, *self.hw), GREY, np.float32)
        out = run_model(lambda: _run(self.session, self.input, x, False), "--detector", self.path)
        want = (1, None, 5) if self.layout == "end2end" else (1, len(raw_grid.grid(self.hw)[1]),
                                                               None)
        check_answer(out, [want], "--detector", self.path)

    def _letterbox(self, bgr: np.ndarray) -> tuple[np.ndarray, float]:
        h, w = self.hw
        if bgr.shape[:2] == (h, w):
            return bgr.copy(), 1.0
        ratio = min(h / bgr.shape[0], w / bgr.shape[1])
        rh, rw = int(bgr.shape[0] * ratio), int(bgr.shape[1] * ratio)
        if not (rh and rw):  # cv2.resize asserts (rtmlib's too): this frame alone fails
            raise ValueError(f"{a(bgr.shape[1])}x{bgr.shape[0]} px frame is too thin for the "
                             f"detector's {w}x{h} input (it would be {rw}x{rh} px there); "
                             "crop, pad or remove it")
        canvas = np.full((h, w, 3), GREY, np.uint8)
        canvas[:rh, :rw] = cv2.resize(bgr, (rw, rh), interpolation=cv2.INTER_LINEAR)
        return canvas, ratio

    def __call__(self, bgr: np.ndarray) -> np.ndarray:
        return self.batch([bgr])[0]

    def batch(self, bgrs: list[np.ndarray]) -> list[np.ndarray]:
        """Each frame's boxes; the frames' letterboxed inputs in one call (dynamic batch)."""
        out, ratios = self.outputs(bgrs)
        return [self._boxes(out[i:i + 1], r) for i, r in enumerate(ratios)]

    def outputs(self, bgrs: list[np.ndarray]) -> tuple[np.ndarray, tuple[float, ...]]:
        """The model's answer for the frames, and each frame's letterbox ratio."""
        canvases, ratios = zip(*(self._letterbox(b) for b in bgrs), strict=True)
        x = self.kind.model_input(np.stack(canvases))
        out = run_model(lambda: _run(self.session, self.input, x, self.dynamic, self.pad),
                        "--detector", self.path, len(x))[0]
        return out, ratios

    def found(self, bgrs: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The model's answer for the frames and each frame's scored boxes ([N, 5]), decoded
        inside the call's bounds: its deadline and memory watch count the decode and NMS too."""
        canvases, ratios = zip(*(self._letterbox(b) for b in bgrs), strict=True)
        x = self.kind.model_input(np.stack(canvases))

        def decoded(outs: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
            return outs[0], [self.scored(outs[0][i:i + 1], r) for i, r in enumerate(ratios)]

        return run_model(lambda: _run(self.session, self.input, x, self.dynamic, self.pad),
                         "--detector", self.path, len(x), then=decoded)

    def _boxes(self, out: np.ndarray, ratio: float) -> np.ndarray:
        """[N, 4]: the boxes rtmlib's detector gives, in its dtype and order."""
        return self.scored(out, ratio)[:, :4]

    def scored(self, out: np.ndarray, ratio: float) -> np.ndarray:
        """[N, 5]: each box as rtmlib's detector gives it, and its score (rtmlib drops it)."""
        if out.shape[-1] == 5:
            keep = out[0, :, 4] > END2END_SCORE
            return np.hstack([out[0, keep, :4] / ratio, out[0, keep, 4:5]])
        return self._decode_raw(out, ratio)

    def _decode_raw(self, out: np.ndarray, ratio: float) -> np.ndarray:
        """Grid decode, objectness x class, per-class NMS (the classes the kind keeps) on at
        most raw_grid.MAX_CANDIDATES boxes; float64 boxes as rtmlib's, each with its score."""
        return raw_grid.decode(out, self.hw, ratio, self.kind)


def _third(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = a - b
    return b + np.r_[-d[1], d[0]]


class PoseModel:
    """A top-down pose model on one box, its head read from its outputs (heads.py: a SimCC pair
    or heatmaps): ([K, 2] x, y in frame pixels, [K] scores)."""

    pad: int | None = None  # every call this many crops (fixed shapes: _run), None: as given
    per_crop: int | None = None  # the most a call grew this process by a crop (bytes), once run
    widest: int = 0  # the most crops a call took so far

    def __init__(self, path: Path, device: str = "cpu", decoder: str = DECODERS[0],
                 memory: int | None = None, batch: int | None = None) -> None:
        self.path = Path(path)
        self.session = _session(Path(path), "--pose-model", device, memory, batch)
        h, w = _input_hw(self.session, Path(path), "--pose-model")
        self.wh = (w, h)
        self.input = self.session.get_inputs()[0].name
        self.dynamic = dynamic_batch(self.session)
        self.head = read_head(self.session, self.wh, "--pose-model", self.path)
        if decoder not in DECODERS or (decoder != DECODERS[0] and self.head.kind != HEATMAP):
            raise ModelFileError(f"--decoder {decoder}: {self.head.said(DECODERS[0])} of "
                                 f"--pose-model {self.path} takes {DECODERS[0]} (mmpose-dark "
                                 "decodes heatmaps).")
        self.decoder = decoder

    def probe(self) -> None:
        """One grey input through the model: its answer must have its head's shapes."""
        x = np.zeros((1, 3, self.wh[1], self.wh[0]), np.float32)
        out = run_model(lambda: _run(self.session, self.input, x, False), "--pose-model", self.path)
        check_answer(out, answer_shapes(self.head, self.wh), "--pose-model", self.path)

    def _crop(self, bgr: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The warped, normalised crop, and the box's centre and (aspect-fixed) scale."""
        b = np.asarray(box)
        centre = (b[:2] + b[2:]) * 0.5  # in the box's dtype, as rtmlib computes it
        scale = (b[2:] - b[:2]) * PAD
        w, h = self.wh
        aspect = w / h
        bw, bh = scale[:1], scale[1:]
        scale = np.where(bw > bh * aspect, np.hstack([bw, bw / aspect]), np.hstack([bh * aspect, bh]))
        src = np.zeros((3, 2), np.float32)
        src[0] = centre
        src[1] = centre + np.array([0.0, scale[0] * -0.5])
        src[2] = _third(src[0], src[1])
        dst = np.zeros((3, 2), np.float32)
        dst[0] = [w * 0.5, h * 0.5]
        dst[1] = np.array([w * 0.5, h * 0.5]) + np.array([0.0, w * -0.5])
        dst[2] = _third(dst[0], dst[1])
        warp = cv2.getAffineTransform(src, dst)
        crop = cv2.warpAffine(bgr, warp, (int(w), int(h)), flags=cv2.INTER_LINEAR)
        crop = (crop - np.array(MEAN)) / np.array(STD)
        return crop, centre, scale

    def __call__(self, bgr: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.batch([bgr], [box])[0]

    def batch(self, bgrs: list[np.ndarray], boxes: list[np.ndarray]
              ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each frame's points on its box; the crops in one call (dynamic batch)."""
        outs, crops = self.outputs(bgrs, boxes)
        return [self.decode(outs, i, c) for i, c in enumerate(crops)]

    def outputs(self, bgrs: list[np.ndarray], boxes: list[np.ndarray]
                ) -> tuple[list[np.ndarray], list[tuple[np.ndarray, ...]]]:
        """The head's outputs for the frames' crops (SimCC x and y, or heatmaps), and each crop
        with its centre and scale."""
        crops = [self._crop(b, box) for b, box in zip(bgrs, boxes, strict=True)]
        x = np.ascontiguousarray(np.stack([c[0] for c in crops]).transpose(0, 3, 1, 2), np.float32)
        outs = run_model(lambda: _run(self.session, self.input, x, self.dynamic, self.pad),
                         "--pose-model", self.path, len(x))
        return outs[:1 if self.head.kind == HEATMAP else 2], crops

    def posed(self, bgrs: list[np.ndarray], boxes: list[np.ndarray], frames: int | None = None
              ) -> list[tuple[np.ndarray, np.ndarray] | BadOutput]:
        """Each crop's (xy in frame pixels, scores), or BadOutput where the answer is nonsense:
        outputs' call with the head's checks and decoding (a heatmap's DARK: linear in its maps)
        inside its bounds, so its deadline and memory watch count them too."""
        crops = [self._crop(b, box) for b, box in zip(bgrs, boxes, strict=True)]
        x = np.ascontiguousarray(np.stack([c[0] for c in crops]).transpose(0, 3, 1, 2), np.float32)

        def decoded(outs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray] | BadOutput]:
            outs = outs[:1 if self.head.kind == HEATMAP else 2]
            return [BadOutput(STATUS_BAD_POSE, why) if (why := self.problem(outs, k)) else
                    self.decode(outs, k, c) for k, c in enumerate(crops)]

        out = run_model(lambda: _run(self.session, self.input, x, self.dynamic, self.pad),
                        "--pose-model", self.path, len(x), then=decoded, frames=frames)
        self.per_crop = max(self.per_crop or 0, last_growth() // len(x))
        self.widest = max(self.widest, len(x))
        return out

    def crops_a_call(self, most: int) -> int:
        """How many crops the next call may take: as many as half one frame's --model-memory
        holds at the most a crop grew this process by so far (before any call: one; half, as
        onnxruntime's arena keeps what an earlier call took beside what this one takes), at most
        twice the widest call so far (memory freed earlier and reused hides a crop's cost: each
        step at most doubles what is in use) and at most `most` (on fixed shapes a multiple of
        pad, the fewest a call takes)."""
        room = limits().memory_mib * 2**19  # half a frame's limit, in bytes
        n = 1 if self.per_crop is None else room // max(1, self.per_crop)
        n = max(1, min(most, n, 2 * self.widest or 1))
        return max(self.pad, n // self.pad * self.pad) if self.pad else n

    def problem(self, outs: list[np.ndarray], i: int) -> str:
        """Why item i's outputs are nonsense ("" when they are not)."""
        if self.head.kind == HEATMAP:
            return heatmap_problem(outs[0][i])
        return pose_problem(outs[0][i], outs[1][i])

    def decode(self, outs: list[np.ndarray], i: int, crop: tuple[np.ndarray, ...]
               ) -> tuple[np.ndarray, np.ndarray]:
        """Item i's outputs -> frame pixels and scores, as the head's decoder gives them."""
        if self.head.kind == HEATMAP:
            return decode_heatmaps(outs[0][i], crop[1], crop[2], self.wh, self.decoder)
        return decode_simcc(outs[0][i], outs[1][i], crop[1], crop[2], self.wh)


def largest(boxes: np.ndarray) -> np.ndarray:
    """The signer's box: the largest by area, the first of equal ones."""
    return boxes[largest_index(boxes)]


def largest_index(boxes: np.ndarray) -> int:
    return int(np.argmax(areas(boxes)))


def fix_shapes(models: Any, batch: int | None, fixed: bool | None) -> None:
    """Every call of the models' sessions takes `batch` items (Detector.pad, PoseModel.pad) where
    `fixed`, by default where they run on CUDA, whose kernels and values depend on the shape of a
    call. On the CPU an item's values are the same bytes in a call of any size (tests/
    test_gpu_node.py), so frames are not padded there: padding would only cost CPU."""
    if fixed is None:
        fixed = CUDA in models.providers()
    for model in (models.detector, models.pose):
        if model is not None and model.dynamic and fixed and batch:
            model.pad = int(batch)


def batch_shape(models: Any) -> dict[str, int] | None:
    """How many items each model's every call takes (None: as many as given, on the CPU): part of
    what the values depend on on a GPU, recorded in each part (execution_record)."""
    shapes = {key: (m.pad or 1) if m.pad or not m.dynamic else None
              for key, m in (("detector", models.detector), ("pose_model", models.pose))
              if m is not None}
    return None if any(v is None for v in shapes.values()) else shapes


class WholebodyModels:
    """Detector and pose model of one process: RGB frames -> Posed (persons.py) each.
    every_box: the pose model runs on every box, as rtmlib's Hand does, up to max_persons (the
    largest first: persons.py); otherwise on the largest box alone. Crops go through the pose
    model in calls of at most CROPS_PER_FRAME x batch_size, so frames of many boxes hold no more
    at once than --batch-size's memory rule allows a batch."""

    def __init__(self, detector: Path | None, pose_model: Path, device: str = "cpu",
                 decoder: str = DECODERS[0], detector_kind: str = YOLOX,
                 every_box: bool = False, max_persons: int = MAX_PERSONS,
                 batch: int | None = None, memory: dict[str, int] | None = None,
                 fixed: bool | None = None) -> None:
        memory = memory or {}
        self.detector = (Detector(Path(detector), device, detector_kind, memory.get("detector"),
                                  batch) if detector else None)
        self.pose = PoseModel(Path(pose_model), device, decoder, memory.get("pose_model"), batch)
        self.every_box = every_box
        self.max_persons = max_persons
        self.crops_per_call = CROPS_PER_FRAME * max(1, batch or DEFAULT_BATCH)
        fix_shapes(self, batch, fixed)
        if device == "cuda" and CUDA not in self.providers():
            # onnxruntime falls back to the CPU, with a warning only, when CUDA cannot start
            raise DeviceError("--device cuda: onnxruntime-gpu is installed but could not start CUDA "
                              "on this worker's GPU (the CUDA and cuDNN libraries it was built for "
                              "must be found: `python scripts/gpu_install.py --check` says which; "
                              "the worker's log has onnxruntime's warning). Fix that, or pass "
                              "--device auto or cpu.")

    def providers(self) -> list[str]:
        """The providers the sessions run on (what onnxruntime accepted, not what was asked)."""
        det = self.detector.session.get_providers() if self.detector else []
        return list(dict.fromkeys(det + self.pose.session.get_providers()))

    def __call__(self, rgb: np.ndarray) -> Posed | BadOutput:
        return self.batch([rgb])[0]

    def batch(self, rgbs: list[np.ndarray]) -> list[Posed | BadOutput]:
        """Each frame's keypoints: the detector on all frames, then the pose model on the crops
        of the frames whose boxes are sane; a frame whose outputs are nonsense gets BadOutput."""
        bgrs = [cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) for rgb in rgbs]
        found = self.detect(bgrs)
        out: list[Any] = [f if isinstance(f, BadOutput) else None for f in found]
        keep = [i for i, f in enumerate(found) if not isinstance(f, BadOutput)]
        if not keep:
            return out
        if self.every_box:
            posed = self.frames_on_boxes([bgrs[i] for i in keep], [list(found[i]) for i in keep])
            for i, one in zip(keep, posed, strict=True):
                out[i] = one
            return out
        boxes = [largest(found[i])[:4] if len(found[i]) else whole(bgrs[i]) for i in keep]
        for i, pose in zip(keep, self.poses([bgrs[i] for i in keep], boxes), strict=True):
            out[i] = pose if isinstance(pose, BadOutput) else Posed(person_row(*pose),
                                                                    len(found[i]))
        return out

    def detect(self, bgrs: list[np.ndarray]) -> list[np.ndarray | BadOutput]:
        """Each frame's boxes (rtmlib's YOLOX, or its RTMDet) with their scores, [N, 5], the
        frames in one call; BadOutput where the detector's answer is nonsense. No detector: no
        boxes."""
        if self.detector is None:  # no detector: no boxes, the pose model takes the whole frame
            return [np.zeros((0, 5))] * len(bgrs)
        raw, found = self.detector.found(bgrs)
        return [BadOutput(STATUS_BAD_DETECTOR, why) if (why := detector_problem(
            raw[i:i + 1], b[:, :4], bgr.shape)) else b
                for i, (b, bgr) in enumerate(zip(found, bgrs, strict=True))]

    def poses(self, bgrs: list[np.ndarray], boxes: list[np.ndarray],
              frames: list[int] | None = None) -> list[tuple[np.ndarray, np.ndarray] | BadOutput]:
        """Each crop's (xy in frame pixels as rtmlib computes them, scores), the crops in calls
        of at most crops_per_call and at most what one frame's memory limit holds
        (PoseModel.crops_a_call); `frames`: the frame each crop is cut from (None: each its own);
        BadOutput where the pose model's answer is nonsense."""
        frames = list(range(len(boxes))) if frames is None else frames
        out: list[tuple[np.ndarray, np.ndarray] | BadOutput] = []
        s = 0
        while s < len(boxes):
            e = s + self.pose.crops_a_call(self.crops_per_call)
            out += self.pose.posed(bgrs[s:e], boxes[s:e], len(set(frames[s:e])))
            s = e
        return out

    def frames_on_boxes(self, bgrs: list[np.ndarray], boxes: list[list[np.ndarray]]
                        ) -> list[Posed | BadOutput]:
        """Several frames (of different videos, or a batch's), each posed on every one of its
        boxes (rows x1, y1, x2, y2 and, where the detector gave it, the score) up to
        max_persons, the largest first (persons.py), or on the whole frame where it has none:
        its row is its largest box's person, and it keeps every person posed (tracking follows
        them, a hand run writes them); a frame any of whose crops the pose model answers with
        nonsense gets that BadOutput."""
        plan = [self._posed_boxes(bgr, mine) for bgr, mine in zip(bgrs, boxes, strict=True)]
        poses = self.poses([bgr for bgr, (posed, _) in zip(bgrs, plan, strict=True) for _ in posed],
                           [box for posed, _ in plan for box, _ in posed],
                           [f for f, (posed, _) in enumerate(plan) for _ in posed])
        out: list[Posed | BadOutput] = []
        for bgr, mine, (posed, cut) in zip(bgrs, boxes, plan, strict=True):
            frame, poses = poses[:len(posed)], poses[len(posed):]
            bad = next((p for p in frame if isinstance(p, BadOutput)), None)
            if bad is not None:
                out.append(bad)
                continue
            rows = np.array([[*box[:4], score] for box, score in posed], np.float64)
            signer = frame[largest_index(np.asarray([box for box, _ in posed]))] if mine else \
                frame[0]
            out.append(Posed(person_row(*signer), len(mine), frame, rows, cut, self.max_persons,
                             bgr.shape[1]))
        return out

    def _posed_boxes(self, bgr: np.ndarray, mine: list[np.ndarray]
                     ) -> tuple[list[tuple[np.ndarray, float]], int]:
        """The boxes one frame is posed on, each (box as given, the detector's score or NaN),
        and how many the cap leaves out: the whole frame where there are none."""
        if not mine:
            return [(whole(bgr), np.nan)], 0
        kept = capped(np.asarray(mine), self.max_persons)
        return [(mine[j][:4], float(mine[j][4]) if len(mine[j]) > 4 else np.nan)
                for j in kept], len(mine) - len(kept)


def check_batch(batch_size: int, detector: Detector | None, pose: PoseModel) -> None:
    """Refuse --batch-size where a batch of the loaded models' inputs (float32, each frame's
    detector input and crop) is past what a batch may hold (estimator.batch_refused), before any
    frame: the declaration counts a published detector's 640x640."""
    inputs = [(f"--detector {detector.path}", detector.hw)] if detector else []
    inputs.append((f"--pose-model {pose.path}", (pose.wh[1], pose.wh[0])))
    take = sum(h * w * 3 * 4 for _, (h, w) in inputs)
    words = " and ".join(f"{flag}'s {h}x{w} input" for flag, (h, w) in inputs)
    if why := batch_refused(batch_size, (take, words)):
        raise ModelFileError(f"--batch-size {batch_size}: {why}. Pass a smaller --batch-size.")


def execution_record(models: Any) -> dict[str, Any]:
    """What the models' values are computed under besides the versions (extract/keypoints/
    execution.py): the device and GPU, the provider the pose model runs on and its options that
    decide kernels, and each model's call shape on a GPU."""
    session = models.pose.session
    provider = session.get_providers()[0]
    options = session.get_provider_options().get(provider, {}) if provider == CUDA else {}
    return {"device": "cuda" if provider == CUDA else "cpu",
            "gpu": gpu_name() if provider == CUDA else "", "provider": provider,
            "provider_options": value_options(options), "batch_shape": batch_shape(models)}


def whole(bgr: np.ndarray) -> np.ndarray:
    """rtmlib's box when nobody is found: the whole frame."""
    return np.array([0, 0, bgr.shape[1], bgr.shape[0]])


class WholebodyEstimator:
    """rtmlib's YOLOX + RTMPose on the signer: no state between frames (frames go through the
    models in batches), or with --det-every K rtmlib's PoseTracker, reset at each video."""

    def __init__(self, settings: dict[str, Any]) -> None:
        run = runtime() | settings.get(RUNTIME, {})
        self.settings = {k: v for k, v in settings.items() if k != RUNTIME}
        self.declaration = declaration_of(settings)
        self.layout = layout_of(settings)
        self.batch_size = int(run["batch_size"])
        self._models = WholebodyModels((settings.get("detector") or {}).get("path"),
                                       settings["pose_model"]["path"],
                                       run["device"], (settings.get("head") or {}).get("decoder",
                                                                                      DECODERS[0]),
                                       kind_of(settings.get("detector")),
                                       self.layout.solution == HAND_SOLUTION,
                                       int(settings.get("max_persons", MAX_PERSONS)),
                                       self.batch_size, session_limits(settings, run))
        self.providers = self._models.providers()
        check_batch(self.batch_size, self._models.detector, self._models.pose)
        self.execution = execution_record(self._models)
        self.tracker = Tracker(int(settings.get("det_every", 1)))
        # tracked, a video's frames wait on each other: batch_size videos go in lockstep instead
        self.lanes = self.batch_size if self.tracker.every > 1 else 1
        self._lanes: dict[int, Tracker] = {}

    def start_video(self) -> None:
        self.tracker.reset()

    def start_lane(self, lane: int) -> None:
        """A new video in lane `lane` (extract_videos): its own tracker, from the start."""
        self._lanes[lane] = Tracker(self.tracker.every)

    def process(self, rgb: np.ndarray) -> dict[str, Any]:
        return self.process_batch([rgb])[0]

    def process_batch(self, rgbs: list[np.ndarray]) -> list[dict[str, Any]]:
        """Each frame's result, as `process` gives it alone (a frame whose model outputs are
        nonsense: its status and note, no keypoints)."""
        return [self._result(r) for r in (self._models.batch(rgbs) if self.tracker.every == 1 else
                                          track_batch(self._models, self.tracker, rgbs))]

    def process_lanes(self, windows: list[tuple[int, list[np.ndarray]]]) -> list[list[dict]]:
        """Each lane's next frames' results, as each lane's video alone gives them."""
        found = track_lanes(self._models, [(self._lanes[lane], rgbs) for lane, rgbs in windows])
        return [[self._result(r) for r in each] for each in found]

    def _result(self, r: Posed | BadOutput) -> dict[str, Any]:
        """A frame's columns: its layout's points (the two hands, every hand and its box; or
        the signer's row), persons, and a note where the cap left boxes out."""
        if isinstance(r, BadOutput):
            return r.as_result()
        lay = self.layout
        points = hands_columns(r, lay.sides, lay.lists) if lay.sides else {lay.column: r.row}
        note = r.note()
        return {**points, "persons": r.persons, **({"note": note} if note else {})}

    def blame(self, status: str) -> str:
        """The model file a frame status says is at fault (KeepsFailing's message)."""
        det = (self.settings.get("detector") or {}).get("path")
        pose = self.settings["pose_model"]["path"]
        if status == "bad_detector_output":
            return f"--detector {det}"
        if status == "bad_pose_output":
            return f"--pose-model {pose}"
        return f"--detector {det} or --pose-model {pose}"

    def close(self) -> None:
        self._models = None
