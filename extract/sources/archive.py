"""Frames inside one archive file (.tar, .tar.gz/.tgz, .zip), read in place: nothing is unpacked.

PHOENIX-2014-T ships as one tar.gz of 947,756 PNG files; unpacking it costs time and about a
million inodes. The archive is read once, at planning, into an index kept in the run folder
(extract/sources/archive_index.py). A worker, after spawn, opens the archive itself with that
index and reads each frame's member by seeking to its offset (rapidgzip for a tar.gz; a zip's
member from its local header); one open reader per archive per process, parallelization 1 (one
core per worker), temp space none. A video's members are read in archive order, a chunk's videos
taken in archive order, so the reads run forward through the file whatever order `tar` stored.

The corpus inside is detected as from a folder: `ArchivePath` gives the corpus readers the
archive's tree (is_file, is_dir, iterdir, scandir, walk_tree, read_text) without touching the disk,
and `open_file` gives the video source a member as a seekable file. A dataset root inside an
archive is written `ARCHIVE/inner/folder`, so run.json's dataset root names both.

Rows: `image` is the frame's path under the corpus folder (as for a folder dataset) followed by
`#archive=<archive file name>`; file_size, file_mtime_ns and file_sha256 are the member's (size and
sha256 equal the unpacked file's; mtime is the tar header's, whole seconds, or a zip's local
date-time read as UTC). The rows whose member differs in a changed archive are found by comparing
the new index, so only their chunks are redone.

Damage: a member whose bytes cannot be read (a gzip error, a zip CRC mismatch, past the end) gets
status `unreadable` with the reason; a member that is not an image gets the folder source's
statuses (`not_png`, ...). Nothing else in the run is lost.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from phoenix_keypoints.extract.keypoints.frames import (
    STATUS_MISSING,
    STATUS_NOT_A_FILE,
    STATUS_TOO_LARGE,
    STATUS_UNREADABLE,
    decode_frame,
    frame_bytes,
    too_many_bytes,
)
from phoenix_keypoints.extract.sources.archive_index import (  # noqa: F401 (the index's names, used from here too)
    _INDEXES,
    _MEMBERS_SCHEMA,
    FORMATS,
    GZIP_CHUNK,
    INDEX_VERSION,
    KIND_DIR,
    KIND_FILE,
    KIND_OTHER,
    KIND_OVERLAP,
    KIND_SAID,
    OVERLAP_SAID,
    ArchiveError,
    ArchiveIndex,
    archive_format,
    build_index,
    clean_name,
    info_name,
    load_index,
    open_index,
    save_index,
    set_index_dir,
    sparse_offset,
    split_root,
    unreadable_archive,
    zip_name,
)
from phoenix_keypoints.extract.sources.base import Frame, Mismatch, Ref, image_ref, parse_image, shown
from phoenix_keypoints.extract.sources.files import FileView as _MemberView
from phoenix_keypoints.extract.sources.files import decoder_path, open_corpus_file

FRAGMENT = "archive"


# --- the archive as a folder tree for corpus readers --------------------------------------------
class _Entry:
    """What os.scandir yields, for one archive entry."""

    def __init__(self, name: str, is_dir: bool) -> None:
        self.name, self._dir = name, is_dir

    def is_dir(self) -> bool:
        return self._dir

    def is_symlink(self) -> bool:
        """A member is never followed as a link to a host file (a link member is no frame)."""
        return False


class ArchivePath:
    """A path inside an archive with the pathlib calls corpus readers make; str() names both."""

    def __init__(self, index: ArchiveIndex, rel: str = "") -> None:
        self.index, self.rel = index, rel.strip("/")

    def __truediv__(self, other: object) -> ArchivePath:
        parts = [p for p in (self.rel, *PurePosixPath(str(other)).parts) if p not in ("", ".", "/")]
        return ArchivePath(self.index, "/".join(parts))

    def __str__(self) -> str:
        return f"{self.index.path}/{self.rel}" if self.rel else str(self.index.path)

    def __repr__(self) -> str:
        return f"ArchivePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArchivePath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def name(self) -> str:
        return self.rel.rpartition("/")[2] or self.index.path.name

    @property
    def parent(self) -> ArchivePath:
        return ArchivePath(self.index, self.rel.rpartition("/")[0])

    def resolve(self) -> ArchivePath:
        return self

    def _member(self) -> int | None:
        return self.index.find(self.rel)

    def is_dir(self) -> bool:
        return self.rel in self.index.tree()

    def is_file(self) -> bool:
        i = self._member()
        return i is not None and self.index.kind[i] == KIND_FILE

    def exists(self) -> bool:
        return self.is_dir() or self._member() is not None

    def scandir(self) -> Iterator[_Entry]:
        entries = self.index.tree().get(self.rel)
        if entries is None:
            raise FileNotFoundError(str(self))
        tree = self.index.tree()
        prefix = f"{self.rel}/" if self.rel else ""
        return iter([_Entry(n, f"{prefix}{n}" in tree) for n in entries])

    def iterdir(self) -> Iterator[ArchivePath]:
        return (self / e.name for e in self.scandir())

    def walk_tree(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """As os.walk from here, top-down: (folder relative to this one, "" first; its subfolders,
        which the caller may prune in place; its files), names sorted."""
        tree = self.index.tree()
        stack = [self.rel]
        while stack:
            folder = stack.pop()
            prefix = f"{folder}/" if folder else ""
            entries = tree.get(folder, {})
            dirs = sorted(n for n in entries if f"{prefix}{n}" in tree)
            files = sorted(n for n in entries if f"{prefix}{n}" not in tree)
            yield folder[len(self.rel):].lstrip("/"), dirs, files
            stack.extend(f"{prefix}{d}" for d in reversed(dirs))

    def member(self) -> int:
        """The member index of this file, or FileNotFoundError / IsADirectoryError."""
        i = self._member()
        if i is None or self.index.kind[i] != KIND_FILE:
            raise (IsADirectoryError if self.is_dir() else FileNotFoundError)(str(self))
        return i

    def read_bytes(self) -> bytes:
        i = self._member()
        if i is None or self.index.kind[i] != KIND_FILE:
            raise FileNotFoundError(str(self))
        data, why = reader(self.index).read(i)
        if data is None:
            raise OSError(why)
        return data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)


# --- reading members ----------------------------------------------------------------------------
class _Reader:
    """One open archive in this process: members read by seeking (rapidgzip for tar.gz). A zip's
    members are read from their local headers, by the index's offsets: a worker never parses the
    central directory (949,555 entries: 8 s and ~90 MiB a process), only `zipfile` for a member
    whose compression is neither stored nor deflate, or that is encrypted."""

    def __init__(self, index: ArchiveIndex) -> None:
        self.index, self.f = index, None
        self.zf: zipfile.ZipFile | None = None

    def _open(self):
        ix = self.index
        if ix.fmt in ("zip", "tar"):
            return open(ix.path, "rb")  # noqa: SIM115 (closed by close())
        import rapidgzip

        f = rapidgzip.RapidgzipFile(decoder_path(ix.path, ix.gzip_end), parallelization=1,
                                    chunk_size=GZIP_CHUNK)
        if ix.gzip_file is not None:
            with open(ix.gzip_file, "rb") as fi:
                f.import_index(fi)
        else:
            f.import_index(io.BytesIO(ix.gzip_index))
        return f

    def _zip(self) -> zipfile.ZipFile:
        """zipfile's reader, its entries found by the names the index gives them (info_name)."""
        if self.zf is None:
            self.zf = zipfile.ZipFile(self.index.path)
            self.zf.NameToInfo = {clean_name(info_name(zi)): zi for zi in self.zf.infolist()}
        return self.zf

    def _local(self, i: int) -> _ZipLocal:
        """Member i's local header: where its data starts, how it is stored. A header that names
        another file than the central directory does is not read as this member (a zip edited by
        hand, or a central directory whose offset points at another member)."""
        offset = int(self.index.offset[i])
        self.f.seek(offset)
        head = self.f.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"the central directory points at offset {offset}, where no "
                                     "local file header is (a wrong offset, or the zip is cut)")
        flags, method = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
        name_len = int.from_bytes(head[26:28], "little")
        self._same_name(i, self.f.read(name_len), flags)
        start = offset + 30 + name_len + int.from_bytes(head[28:30], "little")
        crc = None if flags & 0x8 else int.from_bytes(head[14:18], "little")
        return _ZipLocal(start, method if not flags & 0x1 else -1, crc)

    def _same_name(self, i: int, raw: bytes, flags: int) -> None:
        local = zip_name(raw, flags)
        name = self.index.name(i)
        if clean_name(local) == name:
            return
        j = self.index.find(clean_name(local))
        if j is not None and j != i:
            raise zipfile.BadZipFile(f"the central directory's offset for {name!r} points at the "
                                     f"local header of another member, {local!r}")
        raise zipfile.BadZipFile(f"its local header names {local!r}, the central directory "
                                 f"{name!r}: the zip disagrees with itself")

    def _zip_read(self, i: int) -> bytes:
        size = int(self.index.length[i])
        loc = self._local(i)
        if loc.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            with self._zip().open(self.index.name(i)) as fh:
                return fh.read()
        self.f.seek(loc.start)
        if loc.method == zipfile.ZIP_STORED:
            data = self.f.read(size)
        else:
            d, parts, got = zlib.decompressobj(-15), [], 0
            while not d.eof and got < size and (block := self.f.read(1 << 20)):
                parts.append(d.decompress(block, size - got))
                got += len(parts[-1])
            data = b"".join(parts)
        if loc.crc is not None and len(data) == size and zlib.crc32(data) != loc.crc:
            raise zipfile.BadZipFile("the member's CRC-32 does not match its data")
        return data

    def read(self, i: int) -> tuple[bytes | None, str]:
        """(the member's bytes, "") or (None, why they cannot be read)."""
        ix = self.index
        try:
            if self.f is None:
                self.f = self._open()
            if ix.fmt == "zip":
                data = self._zip_read(i)
            elif (header := sparse_offset(int(ix.offset[i]))) is not None:
                data = self._sparse_read(header)
            else:
                self.f.seek(int(ix.offset[i]))
                data = self.f.read(int(ix.length[i]))
        except (OSError, ValueError, RuntimeError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            self.close()  # the reader's state is unknown after an error: reopen for the next one
            return None, f"cannot read it from the archive ({type(e).__name__}: {str(e)[:160]})"
        if len(data) != int(ix.length[i]):
            return None, (f"the archive ends inside it ({len(data)} of {int(ix.length[i])} bytes): "
                          "truncated")
        return data, ""

    def _sparse_read(self, header: int) -> bytes:
        """A GNU sparse member's bytes, its holes filled with zeros, as tarfile (and tar -x) restore
        them from its sparse map; `header` is where its first header starts."""
        f = self.f

        def read_at(pos: int, n: int) -> bytes:
            f.seek(header + pos)
            return f.read(n)

        with tarfile.open(fileobj=_MemberView(read_at, 1 << 62), mode="r:") as tf:
            m = tf.next()
            got = tf.extractfile(m) if m is not None else None
            if got is None:
                raise ValueError("its sparse header cannot be read again")
            return got.read()

    def open_member(self, i: int) -> io.BufferedReader:
        """Member i as a read-only, seekable binary file (a video for PyAV), nothing unpacked."""
        ix = self.index
        if self.f is None:
            self.f = self._open()
        size = int(ix.length[i])
        start = int(ix.offset[i])
        if sparse_offset(start) is not None:
            raise OSError("a GNU sparse member: a video is read in place, and this one is stored "
                          "without its holes; unpack the archive with tar -x")
        raw = self.f
        on_close = None
        if ix.fmt == "zip":
            try:
                loc = self._local(i)
            except (OSError, zipfile.BadZipFile) as e:
                raise OSError(f"cannot read it from the archive ({e})") from None
            if loc.method != zipfile.ZIP_STORED:  # zipfile's own seekable reader
                return io.BufferedReader(_ZipMember(self._zip().open(ix.name(i))), READ_BLOCK)
            start = loc.start
            raw = open(ix.path, "rb")  # noqa: SIM115 (the view closes it): its own position
            on_close = raw.close

        def read_at(pos: int, n: int) -> bytes:
            raw.seek(start + pos)
            return raw.read(n)

        return io.BufferedReader(_MemberView(read_at, size, on_close), READ_BLOCK)

    def close(self) -> None:
        f, zf, self.f, self.zf = self.f, self.zf, None, None
        try:
            if f is not None:
                f.close()
        finally:
            if zf is not None:
                zf.close()


@dataclass(frozen=True)
class _ZipLocal:
    start: int  # where the member's data begins
    method: int  # zipfile.ZIP_STORED, ZIP_DEFLATED, ...; -1: encrypted
    crc: int | None  # None: in a data descriptor after the data


READ_BLOCK = 1 << 20  # a member view's buffer


class _ZipMember(_MemberView):
    """A compressed zip member through zipfile's seekable reader."""

    def __init__(self, fh) -> None:
        super().__init__(None, fh._orig_file_size, fh.close)
        self.fh = fh

    def readinto(self, b) -> int:
        try:
            self.fh.seek(self.pos)
            data = self.fh.read(min(len(b), max(0, self.size - self.pos)))
        except (RuntimeError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise OSError(f"cannot read it from the archive ({type(e).__name__}: {e})") from None
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


def member_of(path: Path | ArchivePath) -> tuple[ArchiveIndex, int] | None:
    """(index, member) when path is a file inside an archive, else None (a path on disk).
    FileNotFoundError / IsADirectoryError when it is inside one but no such file is there."""
    if isinstance(path, ArchivePath):
        return path.index, path.member()
    found = split_root(path)
    if found is None or not found[1]:
        return None
    index = open_index(found[0])
    return index, ArchivePath(index, found[1]).member()


def open_file(path: Path | ArchivePath) -> tuple[BinaryIO, int, int]:
    """(binary file, size, mtime_ns) of a file on disk or inside an archive (OSError if not, or
    when it is no regular file): the one way a decoder is given a corpus file (files.py)."""
    inside = member_of(path)
    if inside is None:
        f = open_corpus_file(path)
        st = os.fstat(f.fileno())
        return f, st.st_size, st.st_mtime_ns
    index, i = inside
    return reader(index).open_member(i), int(index.length[i]), int(index.mtime[i])


def stat_file(path: Path | ArchivePath) -> tuple[int, int]:
    """(size, mtime_ns) of a file on disk or inside an archive (OSError if not there)."""
    inside = member_of(path)
    if inside is None:
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns
    index, i = inside
    return int(index.length[i]), int(index.mtime[i])


_READERS: dict[str, _Reader] = {}


def reader(index: ArchiveIndex) -> _Reader:
    key = str(index.path)
    r = _READERS.get(key)
    if r is None or r.index is not index:
        if r is not None:
            r.close()
        r = _READERS[key] = _Reader(index)
    return r


@atexit.register
def _close_readers() -> None:
    """rapidgzip aborts the interpreter when a reader's threads outlive it: close them first."""
    for r in _READERS.values():
        r.close()


# --- the frame source ---------------------------------------------------------------------------
def _member_name(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


GROUP_BYTES = 64 * 2**20  # member bytes read ahead for one video (a PHOENIX video: ~5 MB)


def _groups(index: ArchiveIndex, members: list[int | None]) -> Iterator[list[int]]:
    """Consecutive frames (positions in frame order) whose members hold up to GROUP_BYTES."""
    group: list[int] = []
    size = 0
    for k, i in enumerate(members):
        n = int(index.length[i]) if i is not None and index.kind[i] == KIND_FILE else 0
        if group and size + n > GROUP_BYTES:
            yield group
            group, size = [], 0
        group.append(k)
        size += n
    if group:
        yield group


def _at(offset: int) -> int:
    """Where a member lies in the archive, from its index offset (a sparse member's header's)."""
    header = sparse_offset(offset)
    return offset if header is None else header


def _read_forward(index: ArchiveIndex, members: list[int | None],
                  max_bytes: int) -> dict[int, tuple[bytes | None, str]]:
    """member -> (bytes, why not): the files among `members` read in order of their offsets (but
    those larger than any frame can be: a zip bomb's member is never inflated)."""
    files = sorted({i for i in members if i is not None and index.kind[i] == KIND_FILE
                    and int(index.length[i]) <= max_bytes},
                   key=lambda i: (_at(int(index.offset[i])), i))
    r = reader(index)
    return {i: r.read(i) for i in files}


def _frame(index: ArchiveIndex, i: int | None, got: dict[int, tuple[bytes | None, str]], rel: str,
           archive_name: str, max_pixels: int, max_scans: int) -> Frame:
    image = image_ref(rel, FRAGMENT, archive_name)
    if i is None:
        return Frame(None, STATUS_MISSING, "no such member in the archive", image)
    if index.kind[i] == KIND_OVERLAP:
        return Frame(None, STATUS_UNREADABLE, OVERLAP_SAID, image)
    if index.kind[i] != KIND_FILE:
        return Frame(None, STATUS_NOT_A_FILE, f"{KIND_SAID.get(int(index.kind[i]), 'no file')} in the "
                     "archive", image)
    if big := too_many_bytes(int(index.length[i]), max_pixels):
        return Frame(None, STATUS_TOO_LARGE, big, image, int(index.length[i]), int(index.mtime[i]))
    data, why = got[i]
    if data is None:
        return Frame(None, STATUS_UNREADABLE, why, image)
    rgb, status, note = decode_frame(data, rel, max_pixels, max_scans)
    return Frame(rgb, status, note, image, len(data), int(index.mtime[i]),
                 hashlib.sha256(data).hexdigest())


class ArchiveSource:
    """Frame files of a folder dataset that lies inside one archive file."""

    kind = "archive"
    fragment = FRAGMENT

    def frames(self, root: Path, ref: Ref) -> Iterator[Frame]:
        """The video's frames in frame order; their members are read in archive order, a group of
        up to GROUP_BYTES at a time, so the reads run forward through the archive whatever order
        `tar` stored the frames in (its own readdir order, often not the names')."""
        found = split_root(root)
        names = [f"{ref.locator}/{n}" for n in ref.files]
        if found is None:
            for rel in names:
                yield Frame(None, STATUS_MISSING, f"the archive {root} is gone", image_ref(rel))
            return
        archive, prefix = found
        tag = shown(archive.name)  # a name that is no UTF-8 as run.json writes it: a row holds text
        try:
            index = open_index(archive)
        except ArchiveError as e:
            for rel in names:
                yield Frame(None, STATUS_UNREADABLE, str(e)[:200], image_ref(rel, FRAGMENT, tag))
            return
        members = [index.find(_member_name(prefix, rel)) for rel in names]
        pa.default_memory_pool().release_unused()  # the lookup's Arrow temporaries (~1 ms)
        for group in _groups(index, members):
            got = _read_forward(index, [members[k] for k in group], frame_bytes(ref.max_pixels))
            for k in group:
                yield _frame(index, members[k], got, names[k], tag, ref.max_pixels, ref.max_scans)

    def read_order(self, root: Path, refs: list[Ref]) -> list[int]:
        """Positions of refs (one chunk's videos) in the order their frames lie in the archive,
        so a worker moves forward through the file; plan order where that is not known."""
        found = split_root(root)
        try:
            index = open_index(found[0]) if found is not None else None
        except ArchiveError:
            index = None
        if index is None:
            return list(range(len(refs)))
        prefix = found[1]
        first = []
        for ref in refs:
            hits = (index.find(_member_name(prefix, f"{ref.locator}/{n}")) for n in ref.files)
            first.append(min((_at(int(index.offset[i])) for i in hits if i is not None), default=-1))
        return sorted(range(len(refs)), key=lambda k: (first[k] < 0, first[k], k))

    def image(self, root: Path, image: str) -> np.ndarray | None:
        """One recorded row's frame again (for drawing), None when it cannot be read."""
        found = split_root(root)
        if found is None:
            return None
        archive, prefix = found
        try:
            index = open_index(archive)
        except ArchiveError:
            return None
        i = index.find(_member_name(prefix, parse_image(image).path))
        if i is None or index.kind[i] != KIND_FILE:
            return None
        data, _ = reader(index).read(i)
        rgb = decode_frame(data, image)[0] if data is not None else None
        return rgb

    def stale(self, root: Path, recorded: pa.Table, content: bool, threads: int) -> list[Mismatch]:
        """Rows whose member differs in the archive as indexed now (a changed archive is indexed
        again first); content=True also re-reads and hashes the members whose size and mtime match."""
        images = recorded["image"].to_pylist()
        found = split_root(root)
        if found is None:
            return [Mismatch(i, im, f"the archive {root} is gone") for i, im in enumerate(images)]
        archive, prefix = found
        index = open_index(archive)
        size = recorded["file_size"].to_pylist()
        mtime = recorded["file_mtime_ns"].to_pylist()
        sha = recorded["file_sha256"].to_pylist() if content else [None] * len(images)
        out = []
        for row, image in enumerate(images):
            why = self._why(index, _member_name(prefix, parse_image(image).path), size[row],
                            mtime[row], sha[row])
            if why:
                out.append(Mismatch(row, image, why))
        return out

    @staticmethod
    def _why(index: ArchiveIndex, member: str, size: int | None, mtime: int | None,
             sha: str | None) -> str:
        i = index.find(member)
        if i is None:
            return "missing" if size is not None else ""
        if index.kind[i] != KIND_FILE:
            return "not a file any more" if size is not None else ""
        if size is None:
            data, _ = reader(index).read(i)
            return f"was not readable, now a file of {len(data)} bytes" if data is not None else ""
        if int(index.length[i]) != size:
            return f"size {size} -> {int(index.length[i])}"
        if int(index.mtime[i]) != mtime:
            return "modified"
        if sha is not None:
            data, why = reader(index).read(i)
            if data is None:
                return why
            if hashlib.sha256(data).hexdigest() != sha:
                return "content differs"
        return ""

