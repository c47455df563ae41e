"""A video's index, bounded before FFmpeg opens it: the sample tables of an ISO base media file
(MP4, MOV, M4V, 3GP) counted from their box headers.

FFmpeg's mov demuxer reads every track's sample tables into memory when it opens the file and
builds an index entry for each sample (about 65 bytes a sample in all, measured): an MP4 whose
`stsz` table holds 5x10^7 entries cost 2.26 GB in each process that opened it (the plan's probe,
each worker).
A table's entry count is in its header, so the file's boxes are walked here, reading headers only
(a seek and 8 to 20 bytes each), and a file whose tables list more than MAX_INDEX_ENTRIES entries
in all is refused before FFmpeg sees it. Other containers are not walked (Matroska's cues go
through FFmpeg's own index size limit).

What counts: each box walked; the entry counts of stts, ctts, stsc, stsz/stz2 (samples), stco/co64,
stss, stps, elst, sbgp, trun (a fragment's samples) and tfra. A track of constant-size samples has
no size table but is still indexed a sample at a time, so its sample count counts, except in an
audio track (PCM: FFmpeg indexes it by chunks, which stco counts).
"""

from __future__ import annotations

from typing import BinaryIO

# About 65 bytes an entry in FFmpeg (3,999,000 cost 263 MiB a process under a bound of 4,000,000:
# docs/results/hostile-round-three-mp4-2026-11-27.json), so 2,000,000 cost about 130 MiB. A video
# of 25 frames a second with AAC audio (47 samples a second) lists about 260,000 an hour: the bound
# passes 7 hours of it.
MAX_INDEX_ENTRIES = 2_000_000

_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"moof", b"traf", b"edts", b"mfra"}
_FIRST = {b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot", b"uuid", b"styp", b"sidx",
          b"moof", b"junk"}  # what an ISO media file (or a QuickTime movie) starts with
# table box -> where its 32-bit entry count lies after the box header (version 0 and 1 alike)
_COUNT_AT = {b"stts": 4, b"ctts": 4, b"stsc": 4, b"stco": 4, b"co64": 4, b"stss": 4, b"stps": 4,
             b"elst": 4, b"trun": 4, b"tfra": 12, b"stsz": 8, b"stz2": 8, b"sbgp": 8}


class IndexTooLarge(OSError):
    """A video whose container lists more index entries than MAX_INDEX_ENTRIES: not opened."""


class _Walk:
    """The running count of one file's walk, per track: its handler and constant-size samples."""

    def __init__(self, f: BinaryIO, limit: int) -> None:
        self.f, self.limit, self.entries = f, limit, 0
        self.handler, self.constant = b"", 0  # the current track's

    def header(self, at: int, end: int) -> tuple[bytes, int, int] | None:
        """(type, where its body starts, where it ends) of the box at `at`, None when none fits."""
        self.f.seek(at)
        head = self.f.read(16)
        if len(head) < 8:
            return None
        size, kind, body = int.from_bytes(head[:4], "big"), head[4:8], at + 8
        if size == 1 and len(head) == 16:
            size, body = int.from_bytes(head[8:16], "big"), at + 16
        elif size == 0:
            size = end - at
        if size < body - at or at + size > end:
            return None  # damaged: FFmpeg says what it makes of it
        return kind, body, at + size

    def table(self, kind: bytes, body: int) -> int:
        """A table box's entry count (a constant-size stsz's samples noted for its track)."""
        self.f.seek(body)
        head = self.f.read(20)
        if kind == b"hdlr":
            self.handler = head[8:12]
            return 0
        at = _COUNT_AT[kind] + (4 if kind == b"sbgp" and head[:1] == b"\x01" else 0)  # v1: a param
        count = int.from_bytes(head[at:at + 4], "big")
        if kind == b"stsz" and int.from_bytes(head[4:8], "big"):  # one size for every sample
            self.constant += count
            return 0
        return count

    def walk(self, start: int, end: int, depth: int = 0) -> None:
        at = start
        while at < end and self.entries <= self.limit:
            box = self.header(at, end)
            if box is None:
                return
            kind, body, at = box
            self.entries += 1
            if kind == b"trak":
                self.handler, self.constant = b"", 0
            if kind in _CONTAINERS and depth < 8:
                self.walk(body, at, depth + 1)
            elif kind in _COUNT_AT or kind == b"hdlr":
                self.entries += self.table(kind, body)
            if kind == b"trak" and self.handler != b"soun":
                self.entries += self.constant


def index_entries(f: BinaryIO, limit: int = MAX_INDEX_ENTRIES) -> int | None:
    """The index entries an ISO media file lists (counted up to just past limit), None when the file
    is no ISO media file; the file is left at its start."""
    try:
        f.seek(0)
        if f.read(8)[4:8] not in _FIRST:
            return None
        size = f.seek(0, 2)
        walk = _Walk(f, limit)
        walk.walk(0, size)
        return walk.entries
    finally:
        f.seek(0)


def check_index(f: BinaryIO, limit: int = MAX_INDEX_ENTRIES) -> None:
    """IndexTooLarge, saying what and why, when the file's container lists more than `limit` index
    entries; nothing otherwise (the file is left at its start)."""
    entries = index_entries(f, limit)
    if entries is not None and entries > limit:
        raise IndexTooLarge(f"its sample tables list more than {limit:,} index entries (FFmpeg "
                            "would hold about 65 bytes for each in every process that opens it; "
                            "a video of an hour lists about 260,000): not opened")
