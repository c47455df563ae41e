"""Frames inside one archive file (.tar, .tar.gz/.tgz, .zip), read in place: nothing is unpacked.

PHOENIX-2014-T ships as one tar.gz of 947,756 PNG files; unpacking it costs time and about a
million inodes. Here the archive is read once, at planning, into an index kept in the run folder
(`archive/`): every member's name, data offset, size, mtime and kind (`members.parquet`), the gzip
stream's seek points (`gzip.index`, rapidgzip's export: rapidgzip does the seeking, no index of our
own making) and `archive.json` (the archive's size and mtime when indexed, and a digest of the
index, which needs no second read of the archive). A worker, after spawn, opens the archive itself
with that index and reads each frame's member by seeking to its offset; one open reader per
archive per process, parallelization 1 (one core per worker), temp space none.

The corpus inside is detected as from a folder: `ArchivePath` gives the corpus readers the
archive's tree (is_file, is_dir, iterdir, scandir, read_text) without touching the disk, and the
corpus folder is the archive's top, or one or two folders down (the release's own
`PHOENIX-2014-T-release-v3/PHOENIX-2014-T/`). A dataset root inside an archive is written
`ARCHIVE/inner/folder`, so run.json's dataset root names both.

Rows: `image` is the frame's path under the corpus folder (as for a folder dataset) followed by
`#archive=<archive file name>`; file_size, file_mtime_ns and file_sha256 are the member's (size and
sha256 equal the unpacked file's; mtime is the tar header's, whole seconds, or a zip's local
date-time read as UTC). A changed archive (size or mtime) is indexed again when a run resumes, and
the rows whose member now differs are found by comparing the new index, so only their chunks are
redone.

Damage: a truncated archive is indexed up to where it can be read (`problem` says where it
ends; videos whose frames lie beyond have no folder); a member whose bytes cannot be read (a gzip
error, past the end) gets status `unreadable` with the reason; a member that is not an image gets
the folder source's statuses (`not_png`, ...). Nothing else in the run is lost.
"""

from __future__ import annotations

import atexit
import calendar
import hashlib
import io
import json
import os
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from extract.frames import STATUS_MISSING, STATUS_NOT_A_FILE, STATUS_UNREADABLE, decode_frame
from extract.sources.base import Frame, Mismatch, Ref

FORMATS = {".tar.gz": "tar.gz", ".tgz": "tar.gz", ".tar": "tar", ".zip": "zip"}
FRAGMENT = "archive"
INDEX_VERSION = 2  # 2: members.parquet sorted by folder, with `folder` and `pos` (archive order)
ROW_GROUP = 16384  # members per row group of members.parquet: what a worker reads per lookup
LAZY_MEMBERS_KEPT = 200_000  # members a worker keeps looked up before it forgets older folders
KIND_FILE, KIND_DIR, KIND_OTHER = 0, 1, 2
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
    """(archive file, folder inside it) when root is an archive or a path through one, else None."""
    p = Path(root)
    for cand in (p, *p.parents):
        if archive_format(cand.name) and cand.is_file():
            return cand, "" if p == cand else p.relative_to(cand).as_posix()
    return None


# --- the index ----------------------------------------------------------------------------------
@dataclass
class ArchiveIndex:
    """What planning read from an archive once, and what a worker needs to read members back."""

    path: Path
    fmt: str
    size: int
    mtime_ns: int
    members: pa.Table  # _MEMBERS_SCHEMA, in archive order
    gzip_index: bytes = b""  # rapidgzip's export (tar.gz only), when just built
    problem: str = ""  # why part of the archive could not be read (truncated, ...)
    digest: str = ""
    gzip_file: Path | None = None  # or where it is saved (a worker never holds it in Python)
    members_file: Path | None = None  # a worker's index: members read from here a folder at a time
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


def _clean(name: str) -> str:
    return PurePosixPath(name.removeprefix("./")).as_posix().strip("/") if name not in (".", "./") \
        else ""


def _tar_rows(fileobj) -> tuple[dict[str, list], str]:
    """Walk a tar stream's headers: members in archive order, and why the walk stopped early."""
    rows: dict[str, list] = {k: [] for k in _MEMBERS_SCHEMA.names}
    links: list[tuple[int, str]] = []
    problem = ""
    try:
        with tarfile.open(fileobj=fileobj, mode="r:") as tf:
            while (m := tf.next()) is not None:
                tf.members.clear()  # tarfile keeps every header otherwise: 947,756 of them
                name = _clean(m.name)
                if not name:
                    continue
                kind = KIND_FILE if m.isfile() or m.islnk() else KIND_DIR if m.isdir() else KIND_OTHER
                if m.islnk():
                    links.append((len(rows["name"]), _clean(m.linkname)))
                for k, v in zip(_MEMBERS_SCHEMA.names,
                                (name, m.offset_data, m.size, int(m.mtime) * 10**9, kind), strict=True):
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


def _zip_rows(path: Path) -> dict[str, list]:
    rows: dict[str, list] = {k: [] for k in _MEMBERS_SCHEMA.names}
    with zipfile.ZipFile(path) as zf:
        for zi in zf.infolist():
            name = _clean(zi.filename)
            if not name:
                continue
            ts = calendar.timegm((*zi.date_time, 0, 0, 0))
            kind = KIND_DIR if zi.is_dir() else KIND_FILE
            for k, v in zip(_MEMBERS_SCHEMA.names, (name, zi.header_offset, zi.file_size,
                                                    ts * 10**9, kind), strict=True):
                rows[k].append(v)
    return rows


def build_index(path: Path, parallelization: int | None = None) -> ArchiveIndex:
    """Read the archive once: its members and, for tar.gz, the gzip seek points."""
    path = Path(path).absolute()
    fmt = archive_format(path)
    if fmt is None:
        raise ArchiveError(f"{path}: not an archive this tool reads ({', '.join(FORMATS)}).")
    st = os.stat(path)
    gz, problem = b"", ""
    try:
        if fmt == "zip":
            rows = _zip_rows(path)
        elif fmt == "tar":
            with open(path, "rb") as f:
                rows, problem = _tar_rows(f)
        else:
            import rapidgzip

            with rapidgzip.RapidgzipFile(str(path), parallelization=parallelization or
                                         len(os.sched_getaffinity(0)), chunk_size=GZIP_CHUNK) as f:
                rows, problem = _tar_rows(f)
                buf = io.BytesIO()
                f.export_index(buf, rapidgzip.IndexFormat.GZTOOL)  # windows sparse and compressed
                gz = buf.getvalue()
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError) as e:
        raise ArchiveError(f"{path}: cannot be read as {fmt} ({type(e).__name__}: {str(e)[:200]}). "
                           "Check the file (download it again?).") from None
    if not rows["name"]:
        raise ArchiveError(f"{path}: no member could be read as {fmt}. " + (problem or "It is empty.")
                           + " Check the file (download it again?).")
    members = pa.table(rows, schema=_MEMBERS_SCHEMA)
    return ArchiveIndex(path, fmt, st.st_size, st.st_mtime_ns, members, gz, problem)


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
            "digest": index.digest, "problem": index.problem}
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
            t = pq.read_table(folder / "members.parquet", columns=[*_MEMBERS_SCHEMA.names, "pos"])
            members = t.take(pc.sort_indices(t["pos"])).select(_MEMBERS_SCHEMA.names)
            members = pa.table([c.combine_chunks() for c in members.columns], schema=_MEMBERS_SCHEMA)
            del t
        if not (folder / "gzip.index").is_file():
            return None
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    index = ArchiveIndex(Path(meta["path"]), meta["format"], meta["size"], meta["mtime_ns"],
                         members, b"", meta["problem"], meta["digest"], folder / "gzip.index",
                         folder / "members.parquet" if lazy else None)
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
    """The archive's index: this process's, the run folder's when still valid, else built now."""
    path = Path(path).absolute()
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
    _READERS.pop(key, None)
    return index


# --- the archive as a folder tree for corpus readers --------------------------------------------
class _Entry:
    """What os.scandir yields, for one archive entry."""

    def __init__(self, name: str, is_dir: bool) -> None:
        self.name, self._dir = name, is_dir

    def is_dir(self) -> bool:
        return self._dir


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

        f = rapidgzip.RapidgzipFile(str(ix.path), parallelization=1, chunk_size=GZIP_CHUNK)
        if ix.gzip_file is not None:
            with open(ix.gzip_file, "rb") as fi:
                f.import_index(fi)
        else:
            f.import_index(io.BytesIO(ix.gzip_index))
        return f

    def _zip(self) -> zipfile.ZipFile:
        if self.zf is None:
            self.zf = zipfile.ZipFile(self.index.path)
        return self.zf

    def _local(self, i: int) -> _ZipLocal:
        """Member i's local header: where its data starts, how it is stored."""
        self.f.seek(int(self.index.offset[i]))
        head = self.f.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile("no local file header at the member's offset")
        flags, method = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
        start = int(self.index.offset[i]) + 30 + int.from_bytes(head[26:28], "little") + \
            int.from_bytes(head[28:30], "little")
        crc = None if flags & 0x8 else int.from_bytes(head[14:18], "little")
        return _ZipLocal(start, method if not flags & 0x1 else -1, crc)

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

    def open_member(self, i: int) -> io.BufferedReader:
        """Member i as a read-only, seekable binary file (a video for PyAV), nothing unpacked."""
        ix = self.index
        if self.f is None:
            self.f = self._open()
        size = int(ix.length[i])
        start = int(ix.offset[i])
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


class _MemberView(io.RawIOBase):
    """A member's bytes as a file: reads at a position through `read_at`; a damaged or cut
    archive surfaces as OSError (what readers of files expect), never the library's own error."""

    def __init__(self, read_at, size: int, on_close=None) -> None:
        super().__init__()
        self.read_at, self.size, self.pos, self.on_close = read_at, size, 0, on_close

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + pos)
        return self.pos

    def readinto(self, b) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        try:
            data = self.read_at(self.pos, n)
        except (RuntimeError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise OSError(f"cannot read it from the archive ({type(e).__name__}: {e})") from None
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed and self.on_close is not None:
            self.on_close()
        super().close()


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
    """(binary file, size, mtime_ns) of a file on disk or inside an archive (OSError if not)."""
    inside = member_of(path)
    if inside is None:
        f = open(path, "rb")  # noqa: SIM115 (the caller closes it)
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


def _read_forward(index: ArchiveIndex, members: list[int | None]) -> dict[int, tuple[bytes | None, str]]:
    """member -> (bytes, why not): the files among `members` read in order of their offsets."""
    files = sorted({i for i in members if i is not None and index.kind[i] == KIND_FILE},
                   key=lambda i: (int(index.offset[i]), i))
    r = reader(index)
    return {i: r.read(i) for i in files}


def _frame(index: ArchiveIndex, i: int | None, got: dict[int, tuple[bytes | None, str]], rel: str,
           tag: str) -> Frame:
    if i is None:
        return Frame(None, STATUS_MISSING, "no such member in the archive", rel + tag)
    if index.kind[i] != KIND_FILE:
        return Frame(None, STATUS_NOT_A_FILE, "a folder or link in the archive", rel + tag)
    data, why = got[i]
    if data is None:
        return Frame(None, STATUS_UNREADABLE, why, rel + tag)
    rgb, status, note = decode_frame(data, rel)
    return Frame(rgb, status, note, rel + tag, len(data), int(index.mtime[i]),
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
                yield Frame(None, STATUS_MISSING, f"the archive {root} is gone", rel)
            return
        archive, prefix = found
        tag = f"#{FRAGMENT}={archive.name}"
        try:
            index = open_index(archive)
        except ArchiveError as e:
            for rel in names:
                yield Frame(None, STATUS_UNREADABLE, str(e)[:200], rel + tag)
            return
        members = [index.find(_member_name(prefix, rel)) for rel in names]
        pa.default_memory_pool().release_unused()  # the lookup's Arrow temporaries (~1 ms)
        for group in _groups(index, members):
            got = _read_forward(index, [members[k] for k in group])
            for k in group:
                yield _frame(index, members[k], got, names[k], tag)

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
            first.append(min((int(index.offset[i]) for i in hits if i is not None), default=-1))
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
        i = index.find(_member_name(prefix, image.rpartition("#")[0]))
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
            why = self._why(index, _member_name(prefix, image.rpartition("#")[0]), size[row],
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

