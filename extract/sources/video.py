"""Video files (mp4, webm, mkv, mov, avi ...) as a frame source, decoded with PyAV.

- One decoder: PyAV's FFmpeg (its version is recorded in run.json), one thread per worker (the
  workers already fill the cores), every frame in presentation order, converted to RGB24 by PyAV
  (`to_ndarray(format="rgb24")`), the container's display rotation applied (np.rot90, the
  pixel permutation FFmpeg's autorotate does).
- Size: a stream declaring more than --max-pixels is `too_large` without decoding; and every frame
  is checked as the decoder meets it (FFmpeg's max_pixels, then its width x height), since a
  stream's frames can change size mid-stream. What FFmpeg says about a packet goes into its note.
- Frame count: the packets of the video stream, counted by demuxing (no decoding), at plan time.
  A container's own count (stream.frames) is not trusted: it is 0 in WebM and can be wrong. Each
  decoded frame is put at its place by its timestamp among the packets' ones, so a frame that does
  not decode costs its own row (`not_decoded`), not the numbering of those after it (a damaged
  stream can even give frames out of order: up to WINDOW are held back to wait for one); when the
  timestamps cannot place frames (missing or repeated), frames are taken in decode order.
- Times: each row's `time_s` is its frame's timestamp (pts x time_base) in seconds, so variable
  frame rates are kept; null where the file gives no usable (increasing) timestamp.
- A range (`start`, `count`) is frames start..start+count-1 (0-based) of the file; corpus readers
  turn 1-based inclusive frames or seconds into that at plan time (`frame_range`).
- Provenance: every row of a video records the video file's size, mtime and sha256 (hashed once, from
  the descriptor the decoder then reads), and its image is `<path>#frame=<0-based index in file>`.
  A changed video makes all its rows stale, so resume redoes its chunk and verify names it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.frames import MAX_PIXELS, STATUS_TOO_LARGE, too_large
from phoenix_keypoints.extract.sources.archive import open_file, stat_file
from phoenix_keypoints.extract.sources.base import Frame, Mismatch, Ref, Scan, image_ref, parse_image
from phoenix_keypoints.extract.sources.boxes import IndexTooLarge, check_index
from phoenix_keypoints.extract.sources.files import AV_OPTIONS, NotRegular

STATUS_NOT_DECODED = "not_decoded"
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ogv", ".flv")
FRAGMENT = "frame"
WINDOW = 16  # frames a damaged stream may give out of order before a missing one is given up


class Probe(NamedTuple):
    """What demuxing a video found: packet times (seconds, None when unusable) or why not."""

    times: list[float | None]
    problem: str = ""
    note: str = ""  # something the demux met that did not stop it (a truncated tail)


def _av():
    import av  # imported where used: the coordinator of a PHOENIX run never pays for it

    return av


def decoder_version() -> str:
    """PyAV's and its FFmpeg's versions, as recorded in run.json."""
    av = _av()
    codec = ".".join(map(str, av.library_versions.get("libavcodec", ())))
    return f"av {av.__version__} (FFmpeg {getattr(av, 'ffmpeg_version_info', '?')}, libavcodec {codec})"


def open_av(f: BinaryIO):
    """PyAV's container of an open corpus file (extract/sources/files.py): the file object, never a
    name, and no protocol, so nothing a video holds makes FFmpeg open a URL or another file; an MP4
    whose index would hold more than MAX_INDEX_ENTRIES is refused first (IndexTooLarge)."""
    check_index(f)
    return _av().open(f, options=AV_OPTIONS, metadata_errors="ignore")


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


def _stream(container):
    """The first video stream with a decoder, or raise ValueError saying why there is none."""
    if not container.streams.video:
        raise ValueError("no video stream in the file")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        raise ValueError("unknown codec: PyAV's FFmpeg has no decoder for this video's stream; "
                         "re-encode it (e.g. to H.264)")
    stream.thread_type = "NONE"  # one thread per worker; the workers fill the cores
    stream.codec_context.thread_count = 1
    return stream


def stream_fps(path: Path) -> float | None:
    """The video stream's average frame rate: what pose-format's videos_to_poses writes in a .pose
    header (simple_video_utils reads `stream.average_rate`); None when the file gives none."""
    av = _av()
    try:
        f = open_file(path)[0]  # the file itself (on disk, or inside an archive), never its name
    except OSError:
        return None
    with f:
        try:
            container = open_av(f)
        except (av.FFmpegError, OSError, UnicodeDecodeError):
            return None
        try:
            rate = container.streams.video[0].average_rate if container.streams.video else None
        finally:
            container.close()
    return float(rate) if rate else None


def probe(path: Path) -> Probe:
    """Demux (no decode) the video's packets: their presentation times, in order."""
    av = _av()
    try:
        f = open_file(path)[0]  # the file itself (on disk, or inside an archive), never its name
    except NotRegular as e:
        return Probe([], e.strerror)
    except OSError as e:
        return Probe([], f"cannot open as a video ({_error(e)})")
    with f:
        try:
            container = open_av(f)
        except IndexTooLarge as e:
            return Probe([], str(e))
        except (av.FFmpegError, OSError, UnicodeDecodeError) as e:
            return Probe([], f"cannot open as a video ({_error(e)})")
        try:
            stream = _stream(container)
            header = stream.frames
            times, note = _packet_times(container, stream)
        except ValueError as e:
            return Probe([], str(e))
        finally:
            container.close()
    if not times:
        return Probe([], "no frames" + (f": {note}" if note else ""))
    if header and header != len(times) and not note:
        note = (f"the container says {header} frames, its packets are {len(times)} (truncated or a "
                "wrong header): the packets are what is planned")
    return Probe(_presentation_order(times), "", note)


def _packet_times(container, stream) -> tuple[list[float | None], str]:
    """(time in seconds of each packet of the stream, in decode order; why the demux stopped early,
    "" when it did not). A truncated or damaged tail ends the list: the packets before it count."""
    av = _av()
    base = float(stream.time_base) if stream.time_base else None
    times: list[float | None] = []
    try:
        for p in container.demux(stream):
            if p.size:
                times.append(p.pts * base if p.pts is not None and base else None)
    except av.FFmpegError as e:
        return times, f"demux stopped after {len(times)} packets ({_error(e)})"
    return times, ""


def _presentation_order(times: list[float | None]) -> list[float | None]:
    """Packet times sorted (packets come in decode order); unusable ones (None, repeats) -> None."""
    if any(t is None for t in times) or len(set(times)) != len(times):
        return [None] * len(times)
    return sorted(times)  # type: ignore[arg-type]


def frame_range(times: list[float | None], start: int | None = None, end: int | None = None,
                start_s: float | None = None, end_s: float | None = None) -> tuple[int, int, str]:
    """(0-based first frame, count, problem) of a range: 1-based inclusive frames, or seconds
    (frames whose time is in [start_s, end_s)); the whole video when none is given."""
    n = len(times)
    if start_s is not None or end_s is not None:
        if any(t is None for t in times):
            return 0, 0, "a range in seconds, but the video's timestamps are missing or repeated"
        lo = start_s if start_s is not None else -np.inf
        hi = end_s if end_s is not None else np.inf
        picked = [i for i, t in enumerate(times) if lo <= t < hi]  # type: ignore[operator]
        if not picked:
            last = times[-1]
            return 0, 0, f"range {lo}-{hi} s holds no frame (the video's last frame is at {last:.3f} s)"
        return picked[0], len(picked), ""
    first = 1 if start is None else start
    last = n if end is None or end == -1 else end
    if first < 1 or last < first:
        return 0, 0, f"range {first}-{last}: frames are numbered from 1 and the end is inclusive"
    if last > n:
        return 0, 0, f"range {first}-{last} is past the end: the video has {n} frames"
    return first - 1, last - first + 1, ""


class VideoSource:
    """Frames decoded from a video file with PyAV."""

    kind = "video"
    fragment = FRAGMENT

    def __init__(self) -> None:
        self._last: tuple[str, int, Iterator[Frame]] | None = None  # the video `image` reads on

    def scan(self, root: Path, locator: str, start: int | None = None, end: int | None = None,
             start_s: float | None = None, end_s: float | None = None) -> Scan:
        """The frames of the range, counted by demuxing, or why the video cannot be used."""
        path = root / locator
        if not path.is_file():
            return Scan(count=0, problem="no video file" if not path.exists() else "not a file",
                        locator=locator)
        found = probe(path)
        if found.problem:
            return Scan(count=0, problem=found.problem, locator=locator)
        first, count, problem = frame_range(found.times, start, end, start_s, end_s)
        return Scan(count=count, problem=problem, locator=locator, start=first, note=found.note)

    def frames(self, root: Path, ref: Ref) -> Iterator[Frame]:
        """Exactly ref.count frames from ref.start; what cannot be decoded is `not_decoded`."""
        yield from _Decode(root, ref)

    def stale(self, root: Path, recorded: pa.Table, content: bool, threads: int) -> list[Mismatch]:
        return stale_videos(root, recorded, content)

    def image(self, root: Path, image: str) -> np.ndarray | None:
        """One recorded row's frame again (for drawing): decoded from the start of the video, or
        onward from the last one asked for, so drawing a video in order decodes it once."""
        path, _, detail = parse_image(image)
        index = int(detail)
        key = (str(root / path), index)
        if self._last is None or self._last[0] != key[0] or self._last[1] >= index:
            ref = Ref(self.kind, path, (), 0, 1 << 31)
            self._last = (key[0], -1, iter(_Decode(root, ref)))
        _, at, frames = self._last
        for f in frames:
            at = int(parse_image(f.image).detail)
            if at >= index:
                self._last = (key[0], at, frames)
                return f.rgb if at == index else None
        self._last = None
        return None


def _hash(f: BinaryIO) -> str:
    """sha256 of an open file, read whole from its start; the file is left at its start."""
    h = hashlib.sha256()
    f.seek(0)
    while chunk := f.read(1 << 20):
        h.update(chunk)
    f.seek(0)
    return h.hexdigest()


def _rgb(frame) -> np.ndarray:
    """The frame as RGB24 in display orientation (the container's rotation applied)."""
    rgb = frame.to_ndarray(format="rgb24")
    k = (getattr(frame, "rotation", 0) or 0) % 360
    if k and k % 90 == 0:
        rgb = np.ascontiguousarray(np.rot90(rgb, k // 90))
    return rgb


class _Decode:
    """One video's planned frames, streamed: decoded frames placed by timestamp, gaps filled."""

    def __init__(self, root: Path, ref: Ref) -> None:
        self.root, self.ref = root, ref
        self.size: int | None = None
        self.mtime: int | None = None
        self.sha: str | None = None

    def _row(self, i: int, rgb: np.ndarray | None = None, status: str = "ok", note: str = "",
             time_s: float | None = None) -> Frame:
        return Frame(rgb, status, note, image_ref(self.ref.locator, FRAGMENT, str(i)), self.size,
                     self.mtime, self.sha, time_s)

    def __iter__(self) -> Iterator[Frame]:
        ref = self.ref
        end = ref.start + ref.count
        f = None
        try:  # a file on disk, or a member of the archive the dataset lies in
            f, size, mtime = open_file(self.root / ref.locator)
            self.sha = _hash(f)  # the bytes the decoder then reads, from the same open file
            self.size, self.mtime = size, mtime
        except OSError as e:
            if f is not None:
                f.close()
            status = "missing" if isinstance(e, FileNotFoundError) else "unreadable"
            for i in range(ref.start, end):
                yield Frame(None, status, e.strerror or str(e)[:200] or type(e).__name__,
                            image_ref(ref.locator, FRAGMENT, str(i)))
            return
        with f:
            big = _too_large(f, ref.max_pixels)
            if big:
                for i in range(ref.start, end):
                    yield self._row(i, status=STATUS_TOO_LARGE, note=big)
                return
            yield from self._placed(f, end)

    def _placed(self, f, end: int) -> Iterator[Frame]:
        """Rows start..end-1 in order. A damaged stream can give frames out of order, so a frame
        that has not come is declared `not_decoded` only once WINDOW later ones are waiting."""
        nxt, pending = self.ref.start, {}
        why = "the video ended before this frame"
        av = _av()  # bound now: the except clause below must not import (a generator closed late)
        try:
            for got in _decoded(f, self.ref.max_pixels):
                if nxt <= got.index < end:  # a second frame with one timestamp (damage) is dropped
                    pending.setdefault(got.index, got)
                while pending:
                    if nxt in pending:
                        yield self._got(pending.pop(nxt))
                    elif len(pending) > WINDOW:
                        yield self._row(nxt, status=STATUS_NOT_DECODED, note="no frame decoded here")
                    else:
                        break
                    nxt += 1
                if nxt >= end or got.index >= end + WINDOW:
                    break
        except (ValueError, OSError, av.FFmpegError) as e:
            why = f"cannot decode: {_error(e)}"
        for i in range(nxt, end):
            if i in pending:
                yield self._got(pending.pop(i))
            else:
                yield self._row(i, status=STATUS_NOT_DECODED,
                                note="no frame decoded here" if pending else why)

    def _got(self, got: Decoded) -> Frame:
        return self._row(got.index, got.rgb, got.status, got.note, got.time_s)


def _too_large(f, max_pixels: int) -> str:
    """Why the video's frames are not decoded at all (its stream says more than max_pixels), or
    "" (also when the container cannot be read: decoding then says why)."""
    av = _av()
    try:
        with open_av(f) as container:
            cc = _stream(container).codec_context
            return too_large(cc.width or 0, cc.height or 0, max_pixels)
    except (ValueError, OSError, av.FFmpegError):
        return ""
    finally:
        f.seek(0)


class Decoded(NamedTuple):
    """One frame as the decoder gave it: its index in the file, pixels or why not, its time."""

    index: int
    rgb: np.ndarray | None
    time_s: float | None
    status: str = "ok"
    note: str = ""


# FFmpeg's own words when a frame is larger than the decoder's max_pixels (set to --max-pixels)
_OVER = re.compile(r"Picture size (\d+)x(\d+) exceeds specified max pixel count")
_SHOWN_LOGS = 2  # decoder messages a row's note quotes


def _said(logs: list) -> str:
    """What FFmpeg said (warnings and errors) while decoding one packet, for the row's note."""
    said = [m.strip() for level, _, m in logs if level <= _av().logging.WARNING and m.strip()]
    return "; ".join(f"decoder: {m[:150]}" for m in dict.fromkeys(said[:_SHOWN_LOGS]))


def _decode_packet(packet, max_pixels: int) -> tuple[list, str, str]:
    """(frames, too_large note, decoder note) of one packet. The decoder itself refuses a frame
    above max_pixels (FFmpeg's max_pixels option), before it allocates it."""
    av = _av()
    with av.logging.Capture(local=True) as logs:
        try:
            frames = packet.decode()
        except av.FFmpegError as e:
            over = _OVER.search(str(e)) or next((_OVER.search(m) for _, _, m in logs
                                                  if _OVER.search(m)), None)
            big = too_large(int(over[1]), int(over[2]), max_pixels) if over else ""
            return [], big or "", _said(logs)
    return frames, "", _said(logs)


def _times(f) -> dict[float, int]:
    """The index of each frame by its time, from one demux pass; empty when times are unusable."""
    with open_av(f) as container:
        times, _ = _packet_times(container, _stream(container))
    f.seek(0)
    return {t: i for i, t in enumerate(_presentation_order(times)) if t is not None}


def _decoded(f, max_pixels: int = MAX_PIXELS) -> Iterator[Decoded]:
    """Each frame that decodes, in presentation order, with what the decoder said about it.

    One demux pass first gives the packets' times, the index of each frame; a packet that does not
    decode is skipped (its frame becomes `not_decoded`), the ones after it still count. Every frame
    is checked against max_pixels whatever the stream declared: the decoder refuses a larger one
    before allocating it, and it is `too_large` (where its timestamp places it).
    """
    av = _av()
    place = _times(f)
    level = av.logging.get_level()
    av.logging.set_level(av.logging.WARNING)  # so that Capture hears the decoder
    try:
        with open_av(f) as container:
            stream = _stream(container)
            stream.codec_context.options = {"max_pixels": str(max_pixels)}
            base = float(stream.time_base) if stream.time_base else None
            seq, last = 0, None
            for packet in container.demux(stream):
                frames, big, said = _decode_packet(packet, max_pixels)
                if big:  # the frame the decoder refused: where its packet's time places it
                    frames = [_Refused(packet.pts, big)]
                for frame in frames:
                    t = frame.pts * base if frame.pts is not None and base else None
                    if place and t in place:  # timestamps place it (and are usable times)
                        index = place[t]
                    else:  # in decode order; a time only where it increases
                        index, t = seq, t if t is not None and (last is None or t > last) else None
                        last = t if t is not None else last
                    seq = index + 1
                    yield _checked(index, frame, t, said, max_pixels)
    finally:
        av.logging.set_level(level)


class _Refused(NamedTuple):
    """A frame the decoder refused for its size: its packet's time and why, placed as frames are."""

    pts: int | None
    big: str


def _checked(index: int, frame, t: float | None, said: str, max_pixels: int) -> Decoded:
    """A decoded frame as RGB, or `too_large` before conversion when it is above max_pixels."""
    if isinstance(frame, _Refused):
        return Decoded(index, None, t, STATUS_TOO_LARGE, frame.big)
    big = too_large(frame.width, frame.height, max_pixels)
    if big:
        return Decoded(index, None, t, STATUS_TOO_LARGE, big)
    return Decoded(index, _rgb(frame), t, note=said)


def stale_videos(root: Path, recorded: pa.Table, content: bool) -> list[Mismatch]:
    """Rows whose video file differs from what they were made from: one stat (and with content,
    one hash) per video, every row of a changed video named stale."""
    images = recorded["image"].to_pylist()
    size = recorded["file_size"].to_pylist()
    mtime = recorded["file_mtime_ns"].to_pylist()
    sha = recorded["file_sha256"].to_pylist() if content else [None] * len(images)
    verdict: dict[tuple, str] = {}
    out = []
    for i, image in enumerate(images):
        path = parse_image(image).path
        key = (path, size[i], mtime[i], sha[i])
        if key not in verdict:
            verdict[key] = _why(root / path, size[i], mtime[i], sha[i])
        if verdict[key]:
            out.append(Mismatch(i, image, verdict[key]))
    return out


def _why(path: Path, size: int | None, mtime: int | None, sha: str | None) -> str:
    """Why a video file is not what a row recorded ("" when it is)."""
    try:
        now_size, now_mtime = stat_file(path)
    except FileNotFoundError:
        return "video missing" if size is not None else ""
    except OSError as e:
        return f"cannot stat the video ({e.strerror or e})"
    if size is None:
        return f"video was not readable, now a file of {now_size} bytes"
    if now_size != size:
        return f"video size {size} -> {now_size}"
    if now_mtime != mtime:
        return "video modified"
    if sha is not None:
        try:
            f, _, _ = open_file(path)
            with f:
                if _hash(f) != sha:
                    return "video content differs"
        except OSError as e:
            return f"cannot read the video ({e})"
    return ""
