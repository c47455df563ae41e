"""The index of one archive file (.tar, .tar.gz/.tgz, .zip): read once, at planning, kept in the run
folder (`archive/`), so that nothing reads the whole archive again unless it changed.

- `members.parquet`: every member's name, data offset, size, mtime and kind, plus its folder and
  its position in the archive; sorted by (folder, position) in row groups of ROW_GROUP, so that a
  worker (lazy) reads only the row groups of the folders it looks up, never the release's 947,756
  names; the coordinator (plan, resume, verify) loads the whole table as stored.
- `gzip.index`: the gzip stream's seek points, rapidgzip's own export in gztool's format (sparse,
  compressed windows); rapidgzip does the seeking, no gzip index of our own making.
- `archive.json`, written last: the archive's size and mtime when indexed and a digest of the
  index (which needs no second read of the archive), and `problem` when the walk stopped early (a
  truncated or damaged archive is indexed as far as it can be read).

A changed archive (size or mtime) is indexed again when a run resumes; a worker never indexes,
it refuses an outdated index (the coordinator indexes it again). Reading members and the frame
source are extract/sources/archive.py.
"""

from __future__ import annotations

import calendar
import hashlib
import io
import json
import os
import tarfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.words import a
from phoenix_keypoints.extract.sources.base import is_utf8, shown
from phoenix_keypoints.extract.sources.files import decoder_path, gzip_end

FORMATS = {".tar.gz": "tar.gz", ".tgz": "tar.gz", ".tar": "tar", ".zip": "zip"}
INDEX_VERSION = 6  # 2: members sorted by folder, with `folder` and `pos`; 3: names outside the
# archive left out, anomalies noted; 4: a zip's unflagged UTF-8 names read as UTF-8, devices and
# FIFOs told from links; 5: GNU sparse members; 6: overlapping zip members, tar members whose header
# is refused (an index of an older version is made again on resume)
ROW_GROUP = 16384  # members per row group of members.parquet: what a worker reads per lookup
LAZY_MEMBERS_KEPT = 200_000  # members a worker keeps looked up before it forgets older folders
KIND_FILE, KIND_DIR, KIND_OTHER, KIND_DEVICE, KIND_FIFO = 0, 1, 2, 3, 4  # OTHER: a link
KIND_OVERLAP = 5  # a zip member whose data runs into another's: never read (a zip bomb's trick)
KIND_SAID = {KIND_DIR: "a folder", KIND_OTHER: "a link", KIND_DEVICE: "a device", KIND_FIFO: "a FIFO"}
OVERLAP_SAID = ("its data overlaps the next member's (one compressed stream shared by members: a zip "
                "bomb; unzip -t refuses such a zip, 'overlapped components'): not read")
GZIP_CHUNK = 4 * 2**20  # rapidgzip's seek-point spacing (its default): see docs/archives.md

_MEMBERS_SCHEMA = pa.schema([("name", pa.string()), ("offset", pa.int64()), ("size", pa.int64()),
                             ("mtime_ns", pa.int64()), ("kind", pa.int8())])


class ArchiveError(Exception):
    """The archive cannot be used at all; the message says what, where and what to do."""


def archive_format(path: Path | str) -> str | None:
    """'tar.gz', 'tar' or 'zip' by the file name, else None."""
    name = str(path).lower()
    return next((f for s, f in FORMATS.items() if name.endswith(s)), None)


# Files named like archives this tool does not read in place: what they are, and the command that
# turns one into what it reads ({name}: the file's name, {stem}: without the suffix).
_REPACK = ("Unpack it and pass the folder, or make a .tar.gz of it without unpacking: "
           "`{tool} -dc {name} | gzip > {stem}.tar.gz`")
UNREADABLE = {
    ".tar.xz": ("an xz-compressed tar", _REPACK.replace("{tool}", "xz")),
    ".txz": ("an xz-compressed tar", _REPACK.replace("{tool}", "xz")),
    ".tar.bz2": ("a bzip2-compressed tar", _REPACK.replace("{tool}", "bzip2")),
    ".tbz2": ("a bzip2-compressed tar", _REPACK.replace("{tool}", "bzip2")),
    ".tar.zst": ("a zstd-compressed tar", _REPACK.replace("{tool}", "zstd")),
    ".tzst": ("a zstd-compressed tar", _REPACK.replace("{tool}", "zstd")),
    ".7z": ("a 7-Zip archive", "Unpack it (`7z x {name}`) and pass the folder"),
    ".rar": ("a RAR archive", "Unpack it (`unrar x {name}`) and pass the folder"),
    ".gz": ("a gzip file whose name says no tar", "If it holds a tar, name it {stem}.tar.gz; "
            "else unpack it (`gunzip -k {name}`) and pass what it holds"),
}


# What a file's first bytes say it is (what its name says decides how it is read)
_MAGIC = ((b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"), (b"\x1f\x8b", "gzip"),
          (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"), (b"\x28\xb5\x2f\xfd", "zstd"),
          (b"7z\xbc\xaf\x27\x1c", "7z"), (b"Rar!\x1a\x07", "rar"))
_EXPECTED = {"zip": ("zip",), "tar.gz": ("gzip",), "tar": ("tar",)}
_SUFFIX = {"zip": ".zip", "gzip": ".tar.gz", "tar": ".tar", "xz": ".tar.xz", "bzip2": ".tar.bz2",
           "zstd": ".tar.zst", "7z": ".7z", "rar": ".rar"}


def sniff(path: Path) -> str:
    """What the file is by its first bytes: zip, gzip, tar, xz, ... or "" when none is known."""
    with open(path, "rb") as f:
        head = f.read(512)
    found = next((kind for magic, kind in _MAGIC if head.startswith(magic)), "")
    return found or ("tar" if head[257:262] == b"ustar" else "")


def _check_kind(path: Path, fmt: str) -> None:
    """Refuse an archive whose bytes are another kind than its name says, naming what it is."""
    kind = sniff(path)
    if kind and kind not in _EXPECTED[fmt]:
        stem = path.name[:-len(next(s for s, f in FORMATS.items() if path.name.lower().endswith(s)))]
        raise ArchiveError(f"{path} is named as {a(fmt)} file but is {a(kind)} file (its first bytes "
                           f"say so). Rename it to {stem}{_SUFFIX[kind]} and pass that.")


def unreadable_archive(path: Path | str) -> str:
    """Why a file named like an archive this tool cannot read in place is refused, else ""."""
    p = Path(path)
    found = next(((s, w) for s, w in UNREADABLE.items() if p.name.lower().endswith(s)), None)
    if found is None or not p.is_file():
        return ""
    suffix, (what, how) = found
    stem = p.name[:-len(suffix)]
    return (f"--dataset {p} is {what}, which is not read in place (this tool reads "
            f"{', '.join(FORMATS)} files: a gzip stream can be indexed for seeking). "
            + how.format(name=p.name, stem=stem) + ".")


def split_root(root: Path | str) -> tuple[Path, str] | None:
    """(archive file, folder inside it) when root is an archive or a path through one, else None.
    Resolved first: an archive reached through a symlink of any name, or `..`, is found as itself."""
    p = Path(os.path.realpath(root))
    for cand in (p, *p.parents):
        if archive_format(cand.name) and cand.is_file():
            return cand, "" if p == cand else p.relative_to(cand).as_posix()
    return None


@dataclass
class ArchiveIndex:
    """What planning read from an archive once, and what a worker needs to read members back."""

    path: Path
    fmt: str
    size: int
    mtime_ns: int
    members: pa.Table  # _MEMBERS_SCHEMA: in archive order when built, by folder when loaded
    gzip_index: bytes = b""  # rapidgzip's export (tar.gz only), when just built
    problem: str = ""  # why part of the archive could not be read (truncated, ...)
    digest: str = ""
    gzip_file: Path | None = None  # or where it is saved (a worker never holds it in Python)
    members_file: Path | None = None  # a worker's index: members read from here a folder at a time
    notes: list[str] = field(default_factory=list)  # anomalies: names twice, names left out
    gzip_end: int = 0  # where the gzip stream ends when bytes follow it (0: it fills the file)
    _folders: dict[str, tuple[int, int]] | None = field(default=None, repr=False)
    _names: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    _tree: dict[str, dict[str, int]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.members_file is not None:  # filled by _load_folder: member id -> value
            self.offset, self.length, self.mtime, self.kind = {}, {}, {}, {}  # type: ignore[assignment]
            self._name_of: dict[int, str] = {}
            self._groups: list[tuple[str, str]] | None = None
            self._next_id = 0
            return
        self.offset = self.members["offset"].to_numpy()
        self.length = self.members["size"].to_numpy()
        self.mtime = self.members["mtime_ns"].to_numpy()
        self.kind = self.members["kind"].to_numpy()
        if not self.digest:
            h = hashlib.sha256(f"{self.fmt}\0{self.size}\0{self.problem}\0".encode())
            for col in ("name", "offset", "size", "mtime_ns", "kind"):
                for buf in self.members[col].combine_chunks().buffers():
                    if buf is not None:
                        h.update(buf)
            h.update(self.gzip_index)
            self.digest = h.hexdigest()

    def _group(self) -> None:
        """Members grouped by folder (Arrow and numpy only): a worker holding the release's index
        keeps no Python string per member, only those of the folders it reads."""
        names = self.members["name"]
        parent = _parent(names)
        enc = parent.combine_chunks().dictionary_encode()
        codes = enc.indices.to_numpy()
        self._order = np.argsort(codes, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(codes, minlength=len(enc.dictionary)))]
        self._folders = {d: (int(bounds[k]), int(bounds[k + 1]))
                         for k, d in enumerate(enc.dictionary.to_pylist())}
        del names, parent, enc, codes
        pa.default_memory_pool().release_unused()  # the temporaries' pages back to the system

    def find(self, name: str) -> int | None:
        """The member of that name (the last one, as tar does when a name is there twice)."""
        folder, _, base = name.rpartition("/")
        entries = self._names.get(folder)
        if entries is None and self.members_file is not None:
            entries = self._names[folder] = self._load_folder(folder)
        elif entries is None:
            if self._folders is None:
                self._group()
            start, stop = self._folders.get(folder, (0, 0))
            idx = self._order[start:stop]
            if len(idx) and int(idx[-1]) - int(idx[0]) + 1 == len(idx):  # stored by folder: a slice
                names = self.members["name"].slice(int(idx[0]), len(idx)).to_pylist()
            else:  # (a take across a loaded table's row groups copies them all)
                names = self.members["name"].take(pa.array(idx)).to_pylist()
            entries = {n.rpartition("/")[2]: int(i) for n, i in zip(names, idx, strict=True)}
            self._names[folder] = entries
        return entries.get(base)

    def name(self, i: int) -> str:
        """Member i's name."""
        return self._name_of[i] if self.members_file is not None else self.members["name"][i].as_py()

    def _load_folder(self, folder: str) -> dict[str, int]:
        """A worker's lookup: only the row groups of members.parquet that can hold the folder's
        members are read (the file is sorted by folder), so a worker holds the names of the
        folders it reads, not the release's 947,756."""
        pf = pq.ParquetFile(self.members_file)
        if self._groups is None:
            col = pf.schema_arrow.get_field_index("folder")
            self._groups = [(st.min, st.max) if (st := pf.metadata.row_group(g).column(col)
                                                 .statistics) is not None and st.has_min_max
                            else ("", "\U0010ffff") for g in range(pf.metadata.num_row_groups)]
        groups = [g for g, (lo, hi) in enumerate(self._groups) if lo <= folder <= hi]
        if len(self._name_of) > LAZY_MEMBERS_KEPT:  # a long-lived worker: forget older folders
            for d in (self.offset, self.length, self.mtime, self.kind, self._name_of):
                d.clear()
            self._names.clear()
        entries: dict[str, int] = {}
        if groups:
            t = pf.read_row_groups(groups, columns=["folder", *_MEMBERS_SCHEMA.names],
                                   use_threads=False)  # Arrow's thread pool: +22 MiB a worker
            t = t.filter(pc.equal(t["folder"], folder))
            for n, o, z, m, kd in zip(*(t[c].to_pylist() for c in _MEMBERS_SCHEMA.names),
                                      strict=True):
                i = self._next_id
                self._next_id += 1
                self._name_of[i], self.offset[i], self.length[i] = n, o, z
                self.mtime[i], self.kind[i] = m, kd
                entries[n.rpartition("/")[2]] = i  # rows are in archive order: the last one wins
            del t
        pa.default_memory_pool().release_unused()
        return entries

    def tree(self) -> dict[str, dict[str, int]]:
        """folder -> {entry name: member index, or -1 for a folder only implied by paths}."""
        if self._tree is None:
            tree: dict[str, dict[str, int]] = {"": {}}
            for i, name in enumerate(self.members["name"].to_pylist()):
                parts = name.split("/")
                for d in range(len(parts) - 1):
                    parent, folder = "/".join(parts[:d]), "/".join(parts[:d + 1])
                    tree[parent].setdefault(parts[d], -1)
                    tree.setdefault(folder, {})
                tree.setdefault("/".join(parts[:-1]), {})[parts[-1]] = i
                if self.kind[i] == KIND_DIR:
                    tree.setdefault(name, {})
            self._tree = tree
        return self._tree

    def changed(self) -> str:
        """"" when the archive still has the size and mtime it was indexed with, else what changed."""
        try:
            st = os.stat(self.path)
        except OSError as e:
            return f"cannot stat {self.path} ({e.strerror})"
        if (st.st_size, st.st_mtime_ns) != (self.size, self.mtime_ns):
            return f"{self.path} changed since it was indexed (size {self.size} -> {st.st_size})" \
                if st.st_size != self.size else f"{self.path} was modified since it was indexed"
        return ""


def clean_name(name: str) -> str:
    """A member name as the index keeps it: no leading `./`, no leading or trailing `/`."""
    return PurePosixPath(name.removeprefix("./")).as_posix().strip("/") if name not in (".", "./") \
        else ""


def _escapes(name: str) -> bool:
    """A member name that would land outside the folder it is unpacked in: absolute, or `..`."""
    return name.startswith(("/", "\\")) or ".." in PurePosixPath(name.replace("\\", "/")).parts


SHOWN = 5  # member names an anomaly names; the count says how many there are


def anomalies(members: pa.Table, outside: list[str], not_utf8: list[str] = ()) -> list[str]:
    """What an archive holds that a corpus in a folder could not: names stored twice (the last
    copy is used, as `tar -x` leaves it), names that leave the archive and names that are no UTF-8
    (both left out)."""
    notes = []
    if not_utf8:
        notes.append(f"{len(not_utf8)} member name(s) that are no UTF-8 are left out (shown as "
                     f"run.json escapes them): {', '.join(not_utf8[:SHOWN])}"
                     f"{' ...' if len(not_utf8) > SHOWN else ''}")
    if outside:
        notes.append(f"{len(outside)} member(s) named outside the archive (absolute or '..') are "
                     f"left out: {', '.join(outside[:SHOWN])}{' ...' if len(outside) > SHOWN else ''}")
    counts = pc.value_counts(members["name"])
    twice = [v["values"].as_py() for v in counts if v["counts"].as_py() > 1]
    if twice:
        notes.append(f"{len(twice)} member name(s) stored more than once; the last copy in the "
                     f"archive is used (as tar -x leaves it): {', '.join(twice[:SHOWN])}"
                     f"{' ...' if len(twice) > SHOWN else ''}")
    return notes


# The most bytes a PAX extended header or a GNU long name may hold before it is read: a real one
# holds a path of at most 4,096 bytes (PATH_MAX) and a few other records; tarfile would read any
# size into memory (a 0.96 MB tar.gz whose PAX header holds a 512 MiB path took 1.85 GB).
MAX_HEADER = 2**20


class _BoundedInfo(tarfile.TarInfo):
    """tarfile's member header, refusing an extended header (PAX, GNU long name) past MAX_HEADER
    unread: its bytes are skipped, and the member it belongs to is given back with `refused`
    saying why, so the walk goes on past it (as `tar -t` lists the members after it)."""

    refused = ""  # why this member's header was refused; "" when it was not

    def _skipped(self, tf: tarfile.TarFile, what: str) -> tarfile.TarInfo:
        why = (f"the {what} at byte {self.offset:,} holds {self.size:,} bytes, more than the "
               f"{MAX_HEADER:,} a header may hold (a real one holds a path of at most 4,096)")
        tf.fileobj.seek(self.offset + tarfile.BLOCKSIZE + self._block(self.size))
        try:
            member = self.fromtarfile(tf)
        except tarfile.HeaderError as e:
            raise tarfile.SubsequentHeaderError(str(e)) from None
        member.offset, member.refused = self.offset, why
        return member

    def _proc_pax(self, tf):
        if self.size > MAX_HEADER:
            return self._skipped(tf, "PAX header")
        return super()._proc_pax(tf)

    def _proc_gnulong(self, tf):
        if self.size > MAX_HEADER:
            return self._skipped(tf, "GNU long name")
        return super()._proc_gnulong(tf)


def data_offset(m: tarfile.TarInfo) -> int:
    """Where a member's data starts; for a GNU sparse member (old or PAX form), whose data is
    stored without its holes, -1 - where its first header starts: it is read by tarfile, which
    puts the holes back as `tar -x` does (sparse_offset gives the header's offset back)."""
    return -1 - m.offset if m.issparse() else m.offset_data


def sparse_offset(offset: int) -> int | None:
    """The first header's offset of a sparse member (from its index offset), None for others."""
    return -1 - offset if offset < 0 else None


def _kind(m: tarfile.TarInfo) -> int:
    if m.isfile() or m.islnk():
        return KIND_FILE
    if m.isdir():
        return KIND_DIR
    return KIND_DEVICE if m.ischr() or m.isblk() else KIND_FIFO if m.isfifo() else KIND_OTHER


def _indexed_name(raw: str, outside: list[str], not_utf8: list[str]) -> str:
    """A member's name as the index keeps it, or "" when it is left out: a name leaving the
    archive goes to `outside`, one no output could hold to `not_utf8` (shown escaped)."""
    if _escapes(raw):
        outside.append(shown(raw))
        return ""
    if not is_utf8(raw):
        not_utf8.append(shown(raw))
        return ""
    return clean_name(raw)


def _tar_rows(fileobj, outside: list[str], not_utf8: list[str],
              refused: list[str]) -> tuple[dict[str, list], str]:
    """Walk a tar stream's headers: members in archive order, and why the walk stopped early;
    names that leave the archive go to `outside`, names no output could hold to `not_utf8`
    (shown escaped), members whose extended header is refused to `refused` (with why), not into
    the index."""
    rows: dict[str, list] = {k: [] for k in _MEMBERS_SCHEMA.names}
    links: list[tuple[int, str]] = []
    problem = ""
    try:
        with tarfile.open(fileobj=fileobj, mode="r:", tarinfo=_BoundedInfo) as tf:
            while (m := tf.next()) is not None:
                tf.members.clear()  # tarfile keeps every header otherwise: 947,756 of them
                if m.refused:
                    refused.append(f"{shown(m.name)[:120]} ({m.refused})")
                    continue
                name = _indexed_name(m.name, outside, not_utf8)
                if not name:
                    continue
                kind = _kind(m)
                if m.islnk():
                    links.append((len(rows["name"]), clean_name(m.linkname)))
                for k, v in zip(_MEMBERS_SCHEMA.names,
                                (name, data_offset(m), m.size, int(m.mtime) * 10**9, kind), strict=True):
                    rows[k].append(v)
    except (tarfile.TarError, OSError, ValueError, EOFError, RuntimeError) as e:
        problem = (f"the archive cannot be read past member {len(rows['name'])} "
                   f"({type(e).__name__}: {str(e)[:160]}); it is probably truncated or damaged")
    where = {n: i for i, n in enumerate(rows["name"])}
    for i, target in links:  # a hard link's data is its target's
        j = where.get(target)
        if j is None:
            rows["kind"][i] = KIND_OTHER
        else:
            rows["offset"][i], rows["size"][i] = rows["offset"][j], rows["size"][j]
    return rows, problem


UTF8_FLAG = 0x800  # general purpose bit 11: the name is UTF-8


def zip_name(raw: bytes, flags: int) -> str:
    """A zip member's name as its maker meant it: UTF-8 when flagged, and also without the flag
    when the bytes are valid UTF-8 (what Info-ZIP's `zip` on Linux writes; unzip and libarchive
    read it so), cp437 otherwise (the zip standard's default, what old DOS tools wrote)."""
    if flags & UTF8_FLAG:
        return raw.decode("utf-8", errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp437")


def info_name(zi: zipfile.ZipInfo) -> str:
    """zip_name of an entry zipfile has read (zipfile decodes an unflagged name as cp437)."""
    if zi.flag_bits & UTF8_FLAG:
        return zi.orig_filename
    return zip_name(zi.orig_filename.encode("cp437"), zi.flag_bits)


def _overlapping(zf: zipfile.ZipFile) -> set[int]:
    """Entries (positions in infolist) whose data runs past the next local header or into the
    central directory, as `unzip -t` finds overlapped components: each needs at least its 30-byte
    local header and its compressed size before the next header starts. Entries sharing one local
    header are not counted here: the header names one of them, the others are refused when read."""
    infos = zf.infolist()
    shared = Counter(zi.header_offset for zi in infos)
    starts = sorted(shared)
    after = dict(zip(starts, [*starts[1:], zf.start_dir], strict=True))
    return {k for k, zi in enumerate(infos) if shared[zi.header_offset] == 1
            and zi.header_offset + 30 + zi.compress_size > after[zi.header_offset]}


def _zip_rows(path: Path, outside: list[str], overlapped: list[str]) -> dict[str, list]:
    """A zip's members from its central directory; those whose data overlaps another's go to
    `overlapped` (kept in the index as KIND_OVERLAP, never read)."""
    rows: dict[str, list] = {k: [] for k in _MEMBERS_SCHEMA.names}
    with zipfile.ZipFile(path) as zf:
        overlap = _overlapping(zf)
        for k, zi in enumerate(zf.infolist()):
            if _escapes(info_name(zi)):
                outside.append(info_name(zi))
                continue
            name = clean_name(info_name(zi).split("\0", 1)[0])
            if not name:
                continue
            ts = calendar.timegm((*zi.date_time, 0, 0, 0))
            kind = KIND_DIR if zi.is_dir() else KIND_OVERLAP if k in overlap else KIND_FILE
            if kind == KIND_OVERLAP:
                overlapped.append(name)
            for key, v in zip(_MEMBERS_SCHEMA.names, (name, zi.header_offset, zi.file_size,
                                                      ts * 10**9, kind), strict=True):
                rows[key].append(v)
    return rows


def _gzip_rows(path: Path, parallelization: int | None, outside: list[str],
               not_utf8: list[str], refused: list[str],
               end: int = 0) -> tuple[dict[str, list], str, bytes, int]:
    """A tar.gz's members, why the walk stopped early, rapidgzip's seek points and where the gzip
    stream ends (0: at the end of the file). Bytes after the stream (zeros a tape or a download
    padded it with), which gzip -t and GNU tar ignore, are ignored here too once rapidgzip has
    refused them."""
    import rapidgzip

    try:
        with rapidgzip.RapidgzipFile(decoder_path(path, end), chunk_size=GZIP_CHUNK,
                                     parallelization=parallelization or
                                     len(os.sched_getaffinity(0))) as f:
            rows, problem = _tar_rows(f, outside, not_utf8, refused)
            buf = io.BytesIO()
            f.export_index(buf, rapidgzip.IndexFormat.GZTOOL)  # windows sparse and compressed
            return rows, problem, buf.getvalue(), end
    except ValueError:
        if end or not (end := gzip_end(path) or 0):
            raise
    for found in (outside, not_utf8, refused):
        found.clear()
    return _gzip_rows(path, parallelization, outside, not_utf8, refused, end)


def build_index(path: Path, parallelization: int | None = None) -> ArchiveIndex:
    """Read the archive once: its members and, for tar.gz, the gzip seek points."""
    path = Path(path).absolute()
    fmt = archive_format(path)
    if fmt is None:
        raise ArchiveError(f"{path}: not an archive this tool reads ({', '.join(FORMATS)}).")
    st = os.stat(path)
    _check_kind(path, fmt)
    gz, problem, outside, not_utf8, end, overlapped, refused = b"", "", [], [], 0, [], []
    try:
        if fmt == "zip":
            rows = _zip_rows(path, outside, overlapped)
        elif fmt == "tar":
            with open(path, "rb") as f:
                rows, problem = _tar_rows(f, outside, not_utf8, refused)
        else:
            rows, problem, gz, end = _gzip_rows(path, parallelization, outside, not_utf8, refused)
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError) as e:
        raise ArchiveError(f"{path}: cannot be read as {fmt} ({type(e).__name__}: {str(e)[:200]}). "
                           "Check the file (download it again?).") from None
    if not rows["name"]:
        raise ArchiveError(f"{path}: no member could be read as {fmt}. " + (problem or "It is empty.")
                           + " Check the file (download it again?).")
    members = pa.table(rows, schema=_MEMBERS_SCHEMA)
    notes = anomalies(members, outside, not_utf8) + _left_out(refused, overlapped)
    if end:
        notes.append(f"{st.st_size - end} byte(s) after the gzip stream (from byte {end}) are "
                     "ignored, as gzip -t and GNU tar ignore them")
    return ArchiveIndex(path, fmt, st.st_size, st.st_mtime_ns, members, gz, problem, notes=notes,
                        gzip_end=end)


def _left_out(refused: list[str], overlapped: list[str]) -> list[str]:
    """The anomalies of members left out for what they would cost: a header refused unread (the
    walk went on past it), data overlapping another member's (never inflated)."""
    notes = []
    if refused:
        notes.append(f"{len(refused)} member(s) whose header is refused are left out, the archive "
                     f"read on past them: {'; '.join(refused[:SHOWN])}"
                     f"{' ...' if len(refused) > SHOWN else ''}")
    if overlapped:
        notes.append(f"{len(overlapped)} member(s) whose data overlaps another member's are not read "
                     "(one compressed stream shared by members: a zip bomb; unzip -t refuses it as "
                     f"'overlapped components'): {', '.join(overlapped[:SHOWN])}"
                     f"{' ...' if len(overlapped) > SHOWN else ''}")
    return notes


def save_index(index: ArchiveIndex, folder: Path) -> None:
    """The index in `folder`, archive.json last (its presence means the rest is whole)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "archive.json").unlink(missing_ok=True)
    buf = io.BytesIO()
    pq.write_table(_by_folder(index.members), buf, compression="zstd", row_group_size=ROW_GROUP)
    atomic_bytes(folder / "members.parquet", buf.getvalue())
    atomic_bytes(folder / "gzip.index", index.gzip_index)
    meta = {"version": INDEX_VERSION, "path": str(index.path), "format": index.fmt,
            "size": index.size, "mtime_ns": index.mtime_ns, "members": index.members.num_rows,
            "digest": index.digest, "problem": index.problem, "notes": index.notes,
            "gzip_end": index.gzip_end}
    atomic_bytes(folder / "archive.json", (json.dumps(meta, indent=2) + "\n").encode())


def _parent(names: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Each member's folder ("" at the top)."""
    return pc.if_else(pc.match_substring(names, "/"), pc.replace_substring_regex(names, "/[^/]*$", ""),
                      "")


def _by_folder(members: pa.Table) -> pa.Table:
    """members with their folder and archive position, sorted by (folder, position): a folder's
    rows lie together, and row-group statistics find them."""
    t = members.append_column("folder", _parent(members["name"])).append_column(
        "pos", pa.array(np.arange(members.num_rows, dtype=np.int64)))
    return t.take(pc.sort_indices(t, sort_keys=[("folder", "ascending"), ("pos", "ascending")]))


def load_index(path: Path, folder: Path, lazy: bool = False) -> ArchiveIndex | None:
    """The index saved in folder for this archive, or None when there is none or it is outdated.
    lazy (a worker): the members are read a folder at a time, when looked up."""
    try:
        meta = json.loads((folder / "archive.json").read_text())
        if meta.get("version") != INDEX_VERSION or meta["path"] != str(Path(path).absolute()):
            return None
        if lazy:
            members = _MEMBERS_SCHEMA.empty_table()
            pq.read_metadata(folder / "members.parquet")
        else:
            members = pq.read_table(folder / "members.parquet", columns=_MEMBERS_SCHEMA.names)
        if not (folder / "gzip.index").is_file():
            return None
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    index = ArchiveIndex(Path(meta["path"]), meta["format"], meta["size"], meta["mtime_ns"],
                         members, b"", meta["problem"], meta["digest"], folder / "gzip.index",
                         folder / "members.parquet" if lazy else None, notes=meta.get("notes", []),
                         gzip_end=meta.get("gzip_end", 0))
    pa.default_memory_pool().release_unused()  # Parquet decoding's buffers
    return None if index.changed() else index


def atomic_bytes(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# Where this process keeps archive indexes (the run folder's archive/); None: in memory only.
_INDEX_DIR: dict[str, Path | bool | None] = {"dir": None, "write": True, "build": True,
                                             "lazy": False}
_INDEXES: dict[str, ArchiveIndex] = {}


def set_index_dir(folder: Path | None, write: bool = True, build: bool = True,
                  lazy: bool = False) -> None:
    """Keep (and find) indexes in folder. write=False: a read-only command (verify) builds an
    outdated index in memory only; build=False: a worker, which never reads a whole archive, refuses
    an archive whose index is outdated (the coordinator indexes it again when the run resumes);
    lazy=True: a worker, which looks members up a folder at a time instead of loading them all."""
    _INDEX_DIR.update(dir=folder, write=write, build=build, lazy=lazy)


def open_index(path: Path) -> ArchiveIndex:
    """The archive's index: this process's, the run folder's when still valid, else built now.
    Kept under the archive's resolved name, so a symlink or `..` reaches the same index."""
    path = Path(os.path.realpath(path))
    key = str(path)
    index = _INDEXES.get(key)
    if index is not None and not index.changed():
        return index
    folder = _INDEX_DIR["dir"]
    index = load_index(path, folder, bool(_INDEX_DIR["lazy"])) if isinstance(folder, Path) else None
    if index is None:
        if not _INDEX_DIR["build"]:
            raise ArchiveError(f"{path} changed since the run indexed it (or its index in "
                               f"{folder} is gone): run the same command again; the run indexes "
                               "it anew and redoes the frames that changed.")
        index = build_index(path)
        if isinstance(folder, Path) and _INDEX_DIR["write"]:
            save_index(index, folder)
    _INDEXES[key] = index
    return index
