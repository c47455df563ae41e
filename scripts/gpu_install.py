#!/usr/bin/env python3
"""The `gpu` extra on a GPU node in one command, online or from a wheelhouse (docs/gpu.md).

onnxruntime-gpu provides the same `onnxruntime` module as the CPU package the project depends on,
so installing the extra over it leaves whichever wrote last: the CPU package goes first, then
onnxruntime-gpu at the version pyproject.toml pins, with the CUDA 13 and cuDNN 9 libraries it was
built for as nvidia-* wheels (its `[cuda,cudnn]`; extract/keypoints/cuda_libs.py loads them
before onnxruntime). Then it checks what onnxruntime sees.

    python scripts/gpu_install.py                        # online (this Python's index)
    python scripts/gpu_install.py --wheelhouse DIR       # where the index is reachable: the wheels
        [--python-version 3.12] [--split-mb 60]          #   for the node's Python, big ones split
    python scripts/gpu_install.py --from DIR             # on the node, no index: join, check, install
    python scripts/gpu_install.py --join DIR             # only join (and check) split wheels
    python scripts/gpu_install.py --check                # providers, CUDA libraries, a CUDA session
    ... --dry-run                                        # say the commands, run none

A wheel over --split-mb (onnxruntime-gpu is ~256 MB, cuDNN ~700 MB) is cut into NAME.part-NNN
files of at most that size, with NAME.parts.json holding the sha256 of the whole and of each part;
--join (and --from) checks every part and the whole before the wheel is written back (atomically,
inside the wheelhouse), and refuses a part missing, short or of other bytes, naming it. Everything
it reads is checked first: --split-mb a whole number of MiB (ASCII digits, at least 1), a manifest
a regular file of JSON whose every field has its type (the wheel's name its own, less .parts.json;
parts named as plain file names of the folder), each part a regular file of its recorded size
(lstat, before a byte is read: a FIFO or a link is refused unopened), their sizes adding up to the
wheel's; a refusal says what and what to do, exit 2, and nothing is written or removed. Standard
library only: it runs on a node where nothing else is installed yet.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

REPO = Path(__file__).resolve().parents[1]
MANIFEST = ".parts.json"
# the platforms a wheelhouse is downloaded for (pip matches each tag exactly): the manylinux tags
# onnxruntime-gpu, numpy and the nvidia-* wheels are published under
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux_2_12_x86_64",
             "manylinux1_x86_64", "manylinux_2_5_x86_64", "any")
CHUNK = 1 << 20
MIN_SPLIT_MB, MAX_SPLIT_MB = 1, 1 << 20  # --split-mb: 1 MiB to 1 TiB a part
MAX_MANIFEST = 1 << 20  # bytes of a manifest (one of a 1,000-part wheel is ~140 KB)
MAX_PARTS = 10_000
MAX_WHEEL = 1 << 40  # bytes of a wheel (cuDNN's, the largest, is ~700 MB)
SHA256 = re.compile(r"[0-9a-f]{64}")


class Refused(Exception):
    """A value, a manifest or a part of the wheelhouse that cannot be used; the message says what
    and what to do (exit 2, nothing written, nothing removed)."""


def gpu_requirement(pyproject: Path = REPO / "pyproject.toml",
                    python: tuple[int, int] = sys.version_info[:2]) -> str:
    """The `gpu` extra's requirement for this Python, as pyproject.toml pins it."""
    text = pyproject.read_text()
    block = re.search(r"^gpu = \[(.*?)\]\s*$", text, re.M | re.S)
    if block is None:
        raise Refused(f"{pyproject}: no `gpu` extra")
    for req, marker in re.findall(r'"([^";]+);\s*python_version\s*([<>=]+\s*\'[\d.]+\')"',
                                  block[1]):
        op, version = re.match(r"([<>=]+)\s*'([\d.]+)'", marker).groups()
        want = tuple(int(x) for x in version.split("."))
        if {"<": python < want, ">=": python >= want}.get(op, False):
            return req.strip()
    raise Refused(f"{pyproject}: the `gpu` extra names nothing for Python "
                  f"{'.'.join(map(str, python))}")


def shown(value: object) -> str:
    """A value from a file or the command line as a message may print it: quoted, escaped, short."""
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."


def mib_arg(text: str) -> int:
    """--split-mb: a whole number of MiB, at least MIN_SPLIT_MB, in ASCII digits (argparse type)."""
    if not (text.isascii() and text.isdigit()) or not MIN_SPLIT_MB <= int(text) <= MAX_SPLIT_MB:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of MiB from {MIN_SPLIT_MB} to {MAX_SPLIT_MB:,} in ASCII "
            f"digits, not {shown(text)} (each part is at most that size; 60 is the default)")
    return int(text)


def python_arg(text: str) -> str:
    """--python-version: MAJOR.MINOR in ASCII digits, a Python 3 (argparse type)."""
    if not re.fullmatch(r"3\.[0-9]{1,2}", text):
        raise argparse.ArgumentTypeError(f"must be the node's Python as 3.MINOR in ASCII digits "
                                         f"(3.12), not {shown(text)}")
    return text


_KINDS = ((stat.S_ISLNK, "a link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def regular(path: Path, what: str) -> os.stat_result | None:
    """lstat(path): a regular file's stat, None where nothing is there; anything else (a link, a
    FIFO, a device, a folder) refused by what it is, never opened."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a file")
        raise Refused(f"{path}: {what} is {kind}, not a regular file: put the file itself there "
                      "(copy it again)")
    return st


def open_regular(path: Path, st: os.stat_result) -> BinaryIO:
    """The file lstat saw as `st`, opened without following a link or waiting on a FIFO, and
    checked to be that very file still."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise Refused(f"{path}: cannot be opened ({e.strerror}): copy it again") from None
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino, now.st_size) != (st.st_dev, st.st_ino, st.st_size):
        os.close(fd)
        raise Refused(f"{path}: changed while it was read: copy it again, then join")
    return os.fdopen(fd, "rb")


def sha256(path: Path, st: os.stat_result) -> str:
    """The sha256 of the regular file lstat saw as `st`."""
    h = hashlib.sha256()
    with open_regular(path, st) as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def split(path: Path, cap: int) -> list[Path]:
    """Cut `path` into parts of at most `cap` bytes (at least 1 MiB) beside it, with its manifest;
    the file itself is removed only once the parts hold all its bytes."""
    if cap < MIN_SPLIT_MB * 2**20:
        raise ValueError(f"parts of {cap} bytes: at least {MIN_SPLIT_MB} MiB")
    parts, whole = [], hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(cap):
            whole.update(block)
            part = path.with_name(f"{path.name}.part-{len(parts):03d}")
            part.write_bytes(block)
            parts.append({"name": part.name, "size": len(block),
                          "sha256": hashlib.sha256(block).hexdigest()})
    size = path.stat().st_size
    if not parts or sum(p["size"] for p in parts) != size:
        raise Refused(f"{path}: its parts hold {sum(p['size'] for p in parts)} of its {size} "
                      "bytes (it changed while it was split): it is kept; download it again")
    manifest = {"name": path.name, "size": size, "sha256": whole.hexdigest(), "parts": parts}
    written = path.with_name(f".{path.name}{MANIFEST}.tmp")
    written.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(written, path.with_name(path.name + MANIFEST))
    path.unlink()
    return [path.with_name(p["name"]) for p in parts]


def plain_name(name: object) -> bool:
    """A file name of the folder itself: text, not empty, no separator, not `.` or `..`."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\\" not in name and "\0" not in name and name.isprintable()
            and len(name.encode("utf-8", "surrogateescape")) <= 255)


def _field(where: Path, key: str, value: object, want: str) -> Refused:
    return Refused(f"{where}: its {key} is {shown(value)}, not {want}: this is not a manifest "
                   "gpu_install.py wrote; copy it again from the wheelhouse, or make the "
                   "wheelhouse again (--wheelhouse DIR)")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WHEEL


def _checked_part(where: Path, i: int, part: object, taken: set[str]) -> dict:
    """One entry of `parts`: an object of a plain file name (not the wheel's, the manifest's or
    another part's), a size in bytes and a sha256."""
    key = f"parts[{i}]"
    if not isinstance(part, dict):
        raise _field(where, key, part, "an object (name, size, sha256)")
    if not plain_name(part.get("name")) or part["name"] in taken:
        raise _field(where, f"{key}.name", part.get("name"),
                     "a file name of this folder of its own")
    if not _count(part.get("size")):
        raise _field(where, f"{key}.size", part.get("size"), f"a size in bytes (1 to {MAX_WHEEL:,})")
    if not isinstance(part.get("sha256"), str) or not SHA256.fullmatch(part["sha256"]):
        raise _field(where, f"{key}.sha256", part.get("sha256"), "64 hex digits")
    taken.add(part["name"])
    return part


def checked_manifest(where: Path, manifest: object) -> dict:
    """A manifest's fields, each of its type: the wheel's name (the manifest's own, less
    .parts.json: a plain file name), size and sha256, and 1 to MAX_PARTS parts whose sizes add
    up to the wheel's."""
    if not isinstance(manifest, dict):
        raise _field(where, "content", type(manifest).__name__, "an object")
    name = manifest.get("name")
    if not plain_name(name) or where.name != f"{name}{MANIFEST}":
        raise _field(where, "name", name, f"{where.name[:-len(MANIFEST)]!r}, the file it describes")
    if not _count(manifest.get("size")):
        raise _field(where, "size", manifest.get("size"), f"a size in bytes (1 to {MAX_WHEEL:,})")
    if not isinstance(manifest.get("sha256"), str) or not SHA256.fullmatch(manifest["sha256"]):
        raise _field(where, "sha256", manifest.get("sha256"), "64 hex digits")
    parts = manifest.get("parts")
    if not isinstance(parts, list) or not 0 < len(parts) <= MAX_PARTS:
        raise _field(where, "parts", parts if not isinstance(parts, list) else f"{len(parts)} parts",
                     f"a list of 1 to {MAX_PARTS:,} parts")
    taken = {name, where.name}
    parts = [_checked_part(where, i, p, taken) for i, p in enumerate(parts)]
    if sum(p["size"] for p in parts) != manifest["size"]:
        raise _field(where, "size", manifest["size"],
                     f"the {sum(p['size'] for p in parts):,} bytes its parts add up to")
    return manifest


def read_manifest(path: Path) -> dict:
    """A manifest, read only where it is a regular file of at most MAX_MANIFEST bytes, and
    checked field by field."""
    st = regular(path, "the manifest")
    if st is None:
        raise Refused(f"{path}: the manifest is missing")
    if st.st_size > MAX_MANIFEST:
        raise Refused(f"{path}: {st.st_size:,} bytes, more than a manifest holds "
                      f"({MAX_MANIFEST:,} at most): copy it again from the wheelhouse")
    with open_regular(path, st) as f:
        raw = f.read(MAX_MANIFEST + 1)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Refused(f"{path}: not JSON: copy it again from the wheelhouse, or make the "
                      "wheelhouse again (--wheelhouse DIR)") from None
    return checked_manifest(path, manifest)


def _part_stats(folder: Path, dest: Path, parts: list[dict]) -> list[os.stat_result]:
    """Every part's lstat, each a regular file of its recorded size, before a byte is read."""
    stats = []
    for i, part in enumerate(parts):
        path = folder / part["name"]
        st = regular(path, f"part {i + 1} of {len(parts)}")
        if st is None:
            raise Refused(f"{dest.name}: part {i + 1} of {len(parts)} ({path.name}) is missing: "
                          f"copy it into {folder}")
        if st.st_size != part["size"]:
            raise Refused(f"{dest.name}: {path.name} is not the part that was split "
                          f"({st.st_size:,} bytes, {part['size']:,} expected): copy it again")
        stats.append(st)
    return stats


def _copy_part(path: Path, st: os.stat_result, part: dict, out: BinaryIO, whole: Any) -> None:
    """One part's bytes onto `out` (and into the whole's hash), checked against its sha256."""
    h, left = hashlib.sha256(), part["size"]
    with open_regular(path, st) as f:
        while left and (block := f.read(min(CHUNK, left))):
            h.update(block)
            whole.update(block)
            out.write(block)
            left -= len(block)
    if left or h.hexdigest() != part["sha256"]:
        raise Refused(f"{path.name} is not the part that was split ({part['size'] - left:,} "
                      f"bytes read, {part['size']:,} expected, or other bytes): copy it again")


def _already(dest: Path, manifest: dict) -> bool:
    """Whether the wheel is there already, whole (a folder in its place is refused)."""
    if dest.is_dir() and not dest.is_symlink():
        raise Refused(f"{dest}: a folder where the joined wheel belongs: move it away")
    st = os.lstat(dest) if os.path.lexists(dest) else None
    return bool(st and stat.S_ISREG(st.st_mode) and st.st_size == manifest["size"]
                and sha256(dest, st) == manifest["sha256"])


def join(manifest_path: Path) -> Path:
    """The wheel a manifest describes, from its parts: every field checked, every part's size
    compared (lstat) before a byte is read, then each part's sha256, the whole's size and sha256;
    written in the wheelhouse under a temporary name and renamed, so a failed join leaves nothing."""
    manifest = read_manifest(manifest_path)
    folder = manifest_path.parent
    dest = folder / manifest["name"]
    if _already(dest, manifest):
        return dest
    stats = _part_stats(folder, dest, manifest["parts"])
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{dest.name}.", suffix=".joining")
    whole = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part, st in zip(manifest["parts"], stats, strict=True):
                _copy_part(folder / part["name"], st, part, out, whole)
            size = out.tell()
        if size != manifest["size"] or whole.hexdigest() != manifest["sha256"]:
            raise Refused(f"{dest.name}: the joined parts ({size:,} bytes) are not the wheel that "
                          f"was split ({manifest['size']:,} bytes): copy the parts again")
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dest


def join_all(folder: Path) -> list[Path]:
    """Every split wheel of a wheelhouse folder, joined and checked."""
    if not folder.is_dir():
        raise Refused(f"{folder}: not a folder: give the wheelhouse's folder")
    return [join(m) for m in sorted(folder.glob(f"*{MANIFEST}"))]


def run(cmd: list[str], dry: bool) -> None:
    print("+ " + " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    if not dry:
        subprocess.run([str(c) for c in cmd], check=True)


def pip() -> list[str]:
    return [sys.executable, "-m", "pip"]


def install(index: list[str], dry: bool) -> None:
    """The CPU package out, the pinned GPU build (and its CUDA wheels) in, under the project's
    constraints (numpy, protobuf stay what the values were validated with)."""
    run([*pip(), "uninstall", "-y", "onnxruntime", "onnxruntime-gpu"], dry)
    run([*pip(), "install", *index, "-c", REPO / "constraints.txt", gpu_requirement()], dry)


def wheelhouse(dest: Path, python_version: str | None, split_mb: int, dry: bool,
               alone: bool = False) -> None:
    """The `gpu` extra's wheels (with its dependencies; `alone`: onnxruntime-gpu's wheel only,
    for a node that has the rest, CUDA included) for the node's Python, in `dest`, each wheel
    over split_mb MiB cut into parts."""
    target = tuple(int(x) for x in python_version.split(".")) if python_version else \
        sys.version_info[:2]
    cross = ["--python-version", f"{target[0]}.{target[1]}", "--only-binary=:all:",
             *[a for p in PLATFORMS for a in ("--platform", p)]] if python_version else []
    requirement = gpu_requirement(python=target)
    if alone:
        requirement = re.sub(r"\[[^\]]*\]", "", requirement)
    run([*pip(), "download", "-d", dest, "-c", REPO / "constraints.txt", *cross,
         *(["--no-deps"] if alone else []), requirement], dry)
    if dry:
        return
    cap = split_mb * 2**20
    for wheel in sorted(dest.glob("*.whl")):
        st = regular(wheel, "a wheel")
        if st is not None and st.st_size > cap:
            print(f"split {wheel.name} ({st.st_size / 2**20:.0f} MB) into "
                  f"{len(split(wheel, cap))} parts", flush=True)


def check() -> int:
    """What onnxruntime sees here: its version, providers, the CUDA libraries found, and a
    session on CUDA where a GPU is here. Exit 1 where CUDA cannot run."""
    sys.path.insert(0, str(REPO))
    from phoenix_keypoints.extract.keypoints import cuda_libs

    loaded = cuda_libs.preload()
    import onnxruntime as ort

    print(f"onnxruntime {ort.__version__} ({ort.get_device()}); providers "
          f"{ort.get_available_providers()}")
    print(f"CUDA libraries loaded from the nvidia-* wheels: {loaded or 'none (system CUDA or none)'}")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print("no CUDAExecutionProvider: this is the CPU build (run this script without --check)")
        return 1
    return 0


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--wheelhouse", type=Path, metavar="DIR",
                      help="download the gpu extra's wheels into DIR (where the index is reachable)")
    mode.add_argument("--from", dest="source", type=Path, metavar="DIR",
                      help="install from DIR with --no-index (join split wheels first)")
    mode.add_argument("--join", type=Path, metavar="DIR", help="join (and check) split wheels")
    mode.add_argument("--check", action="store_true", help="what onnxruntime sees here")
    p.add_argument("--python-version", type=python_arg,
                   help="the node's Python for --wheelhouse, 3.MINOR (default: this one)")
    p.add_argument("--split-mb", type=mib_arg, default=60,
                   help="cut wheels over this many MiB into parts (--wheelhouse; default 60)")
    p.add_argument("--only-onnxruntime", action="store_true",
                   help="--wheelhouse: onnxruntime-gpu's wheel alone (the node has the rest)")
    p.add_argument("--dry-run", action="store_true", help="say the commands, run none")
    return p.parse_args()


def main() -> int:
    """The command; a wheelhouse's input refused is said in one line, exit 2."""
    args = parse()
    try:
        return act(args)
    except Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"error: {shlex.join(map(str, e.cmd[:4]))} ... failed (exit {e.returncode}): "
              "its messages are above", file=sys.stderr)
        return 1
    except OSError as e:  # the wheelhouse cannot be written: the disk's, not the input's
        print(f"error: {e.filename or ''}: {e.strerror or e}: free space or fix permissions, "
              "then run the same command again", file=sys.stderr)
        return 1


def act(args: argparse.Namespace) -> int:
    if args.check:
        return check()
    if args.join:
        joined = join_all(args.join)
        for wheel in joined:
            print(f"joined {wheel} (size and sha256 checked)")
        if not joined:
            print(f"no split wheel (NAME{MANIFEST}) in {args.join}: nothing to join")
        return 0
    if args.wheelhouse:
        wheelhouse(args.wheelhouse, args.python_version, args.split_mb, args.dry_run,
                   args.only_onnxruntime)
        return 0
    index = []
    if args.source:
        if not args.dry_run:
            join_all(args.source)
        index = ["--no-index", "--find-links", args.source]
    install(index, args.dry_run)
    return 0 if args.dry_run else check()


if __name__ == "__main__":
    sys.exit(main())
