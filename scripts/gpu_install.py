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
--join (and --from) checks every part and the whole before the wheel is written back (atomically),
and refuses a part missing, short or of other bytes, naming it. Standard library only: it runs on
a node where nothing else is installed yet.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = ".parts.json"
# the platforms a wheelhouse is downloaded for (pip matches each tag exactly): the manylinux tags
# onnxruntime-gpu, numpy and the nvidia-* wheels are published under
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux_2_12_x86_64",
             "manylinux1_x86_64", "manylinux_2_5_x86_64", "any")
CHUNK = 1 << 20


def gpu_requirement(pyproject: Path = REPO / "pyproject.toml",
                    python: tuple[int, int] = sys.version_info[:2]) -> str:
    """The `gpu` extra's requirement for this Python, as pyproject.toml pins it."""
    text = pyproject.read_text()
    block = re.search(r"^gpu = \[(.*?)\]\s*$", text, re.M | re.S)
    if block is None:
        raise SystemExit(f"{pyproject}: no `gpu` extra")
    for req, marker in re.findall(r'"([^";]+);\s*python_version\s*([<>=]+\s*\'[\d.]+\')"',
                                  block[1]):
        op, version = re.match(r"([<>=]+)\s*'([\d.]+)'", marker).groups()
        want = tuple(int(x) for x in version.split("."))
        if {"<": python < want, ">=": python >= want}.get(op, False):
            return req.strip()
    raise SystemExit(f"{pyproject}: the `gpu` extra names nothing for Python {python}")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def split(path: Path, cap: int) -> list[Path]:
    """Cut `path` into parts of at most `cap` bytes beside it, with its manifest; the file itself
    is removed once the parts are written and checked."""
    parts, whole = [], hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(cap):
            whole.update(block)
            part = path.with_name(f"{path.name}.part-{len(parts):03d}")
            part.write_bytes(block)
            parts.append({"name": part.name, "size": len(block),
                          "sha256": hashlib.sha256(block).hexdigest()})
    manifest = {"name": path.name, "size": path.stat().st_size, "sha256": whole.hexdigest(),
                "parts": parts}
    path.with_name(path.name + MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    path.unlink()
    return [path.with_name(p["name"]) for p in parts]


def join(manifest_path: Path) -> Path:
    """The wheel a manifest describes, from its parts: each part's size and sha256 checked, then
    the whole's; written under a temporary name and renamed, so a failed join leaves nothing."""
    manifest = json.loads(manifest_path.read_text())
    folder = manifest_path.parent
    dest = folder / Path(manifest["name"]).name
    if dest.is_file() and dest.stat().st_size == manifest["size"] and sha256(dest) == manifest["sha256"]:
        return dest
    tmp = dest.with_name(f".{dest.name}.joining")
    whole = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for i, part in enumerate(manifest["parts"]):
                path = folder / Path(part["name"]).name
                if not path.is_file():
                    raise SystemExit(f"{dest.name}: part {i + 1} of {len(manifest['parts'])} "
                                     f"({path.name}) is missing: copy it into {folder}")
                data = path.read_bytes()
                if len(data) != part["size"] or hashlib.sha256(data).hexdigest() != part["sha256"]:
                    raise SystemExit(f"{dest.name}: {path.name} is not the part that was split "
                                     f"({len(data)} bytes, {part['size']} expected, or other "
                                     "bytes): copy it again")
                whole.update(data)
                out.write(data)
        if whole.hexdigest() != manifest["sha256"]:
            raise SystemExit(f"{dest.name}: the joined parts are not the wheel that was split")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def join_all(folder: Path) -> list[Path]:
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


def wheelhouse(dest: Path, python_version: str | None, split_mb: float, dry: bool,
               alone: bool = False) -> None:
    """The `gpu` extra's wheels (with its dependencies; `alone`: onnxruntime-gpu's wheel only,
    for a node that has the rest, CUDA included) for the node's Python, in `dest`, each wheel
    over split_mb cut into parts."""
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
    cap = int(split_mb * 2**20)
    for wheel in sorted(dest.glob("*.whl")):
        if wheel.stat().st_size > cap:
            print(f"split {wheel.name} ({wheel.stat().st_size / 2**20:.0f} MB) into "
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
    p.add_argument("--python-version", help="the node's Python for --wheelhouse (default: this one)")
    p.add_argument("--split-mb", type=float, default=60.0,
                   help="cut wheels over this many MiB into parts (--wheelhouse; default 60)")
    p.add_argument("--only-onnxruntime", action="store_true",
                   help="--wheelhouse: onnxruntime-gpu's wheel alone (the node has the rest)")
    p.add_argument("--dry-run", action="store_true", help="say the commands, run none")
    return p.parse_args()


def main() -> int:
    args = parse()
    if args.check:
        return check()
    if args.join:
        for wheel in join_all(args.join):
            print(f"joined {wheel} (sha256 checked)")
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
