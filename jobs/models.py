"""Models by name: `phoenix-keypoints models fetch NAME` and `run --models NAME`.

A pose library's users name a mode (mode="balanced") and get its two files fetched once; this module
does that for each built-in family that publishes models (its package's published.py: the names,
their files, pins and hosts, and for each name the point set and detector kind it is read with),
and only when asked. The catalogue reads those data modules of the families shipped with the tool
alone: a family installed as a plugin is never imported here. `models fetch NAME` downloads each
file of the name into a cache folder (jobs/download.py: where it may connect, through what proxy,
for how long), checks it against a sha256 this project pins, and takes a zip's `end2end.onnx` out
without trusting the zip (its central directory bounded from its end record before zipfile reads
it; no member outside its folder, no absolute path, no link, one `end2end.onnx`, sizes capped). A
name's file may also be a bare .onnx (the 3D pose model), checked as it comes. `run --models NAME`
only looks in the cache: a file that is not there stops the run (exit 2) with the command that
fetches it; the name chooses the family, the point set and the detector kind. Nothing here runs at
import, and no other command reaches the network.

A file no pin is given for is refused, rather than trust unchecked bytes; where the zip's own
sha256 is given, the zip is checked before it is opened. Temporary files (`.NAME.XXXX.part` in the
cache) are locked by the fetch that writes them; one no live fetch holds (a fetch killed with
SIGKILL, a moment ago or long since) is removed by the next fetch.

Exit statuses: 0 fetched (or already there); 1 the download failed (no network, refused
connection, an HTTP error, a refused redirect, a transfer too slow or truncated: try again, or fetch
by hand as the message says); 2 refused bytes or names (wrong sha256, an unsafe or strange zip,
too large, no pin, a bad name).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import re
import stat
import struct
import sys
import tempfile
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import IO, Any

from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.download import DownloadFailed, Refused, download, first_url_problem
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunError

DIR_ENV = "PHOENIX_KEYPOINTS_MODELS_DIR"  # the cache folder (or --models-dir)
URL_ENV = "PHOENIX_KEYPOINTS_MODELS_URL"  # another base URL serving the same paths (or --base-url)
INDEX_ENV = "PHOENIX_KEYPOINTS_MODELS_INDEX"  # a JSON file of other names and pins (tests, mirrors)
MAX_BYTES = 512 * 2**20  # a zip, and the end2end.onnx in it (the largest published: ~370 MB)
CHUNK = 2**20
MEMBER = "end2end.onnx"
# a zip's central directory, as its end record says it (a published zip holds 4-5 members in
# about 1 KiB of directory; 3,000,000 entries in 141 MB took zipfile 1.2 GB to read)
MAX_ENTRIES = 256
MAX_DIRECTORY = 2**20
# a .new file (a temporary file made, not locked yet: microseconds) younger than this is left alone;
# a .part is locked before it has its name, so one whose lock is free is dead, whatever its age
STALE_S = 2.0
FAMILIES_PACKAGE = "phoenix_keypoints.extract.families"  # the built-in families live here


@dataclass(frozen=True)
class Published:
    """One file a name has: its path under the base URL and the bytes this project expects."""

    path: str  # e.g. rtmposev1/onnx_sdk/yolox_m_8xb8-300e_humanart-c2c7a14a.zip (or a bare .onnx)
    input_hw: tuple[int, int]  # the model's input (height, width), as the publisher's mode says
    onnx_sha256: str | None  # of the end2end.onnx inside (or the .onnx); None: no source states it
    zip_sha256: str | None = None  # of the zip itself, where a source states it
    max_bytes: int = MAX_BYTES
    at: str = ""  # the base URL the publisher serves it under

    @property
    def zipped(self) -> bool:
        return self.path.endswith(".zip")

    @property
    def zip_name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def onnx_name(self) -> str:
        """The publisher's own cache name: the zip's name with .onnx (a user can copy one cache over)."""
        return self.zip_name.removesuffix(".zip").removesuffix(".onnx") + ".onnx"


@dataclass(frozen=True)
class Mode:
    """A name `models fetch` knows: its two files and how a run reads them."""

    name: str
    family: str  # the family a run of it is (--estimator)
    files: tuple[Published, Published]  # detector, pose model
    point_set: str | None = None  # --point-set it is read with (None: the family's default)
    detector_kind: str | None = None  # --detector-kind (None: the point set's default)
    about: str = ""  # whose pipeline it is ("rtmlib Body, mode balanced")


# the index's roles: each name is a detector and a pose model
ROLES = ("detector", "pose")


# --- where: the cache folder, the base URL, the names ----------------------------------------------
def default_dir() -> Path:
    """The user's cache folder (XDG on Linux, Library/Caches on macOS, LOCALAPPDATA on Windows)."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Caches"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else home / ".cache"
    return base / "phoenix-keypoints" / "models"


def cache_dir(option: Path | None) -> Path:
    """--models-dir, else $PHOENIX_KEYPOINTS_MODELS_DIR, else the user's cache folder."""
    if option is not None:
        return option.expanduser()
    env = os.environ.get(DIR_ENV, "")
    return Path(env).expanduser() if env else default_dir()


def allowed_url(url: str) -> str | None:
    """Why a URL is not fetched, or None: https only (or plain http to this machine's loopback,
    which no network can tamper with: a local mirror, the tests' server)."""
    why = first_url_problem(url)
    return messages.terminal(why) if why else None


def base_url(option: str | None) -> str | None:
    """--base-url, else $PHOENIX_KEYPOINTS_MODELS_URL, always ending in '/'; None: each file
    from its publisher's host."""
    url = option or os.environ.get(URL_ENV, "")
    if not url:
        return None
    why = allowed_url(url)
    if why:
        raise RunError(f"base URL {why}.")
    return url if url.endswith("/") else url + "/"


def file_url(f: Published, base: str | None) -> str:
    return (base or f.at) + f.path


_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_SHA = re.compile(r"[0-9a-f]{64}")
_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*\.(zip|onnx)")


def publishers() -> dict[str, ModuleType]:
    """family -> its published.py, for each built-in family that has one (read from the
    registry's built-in entries and the files of their packages: a plugin family is neither
    listed nor imported here)."""
    from phoenix_keypoints.extract.keypoints.environ import telemetry_off
    from phoenix_keypoints.extract.keypoints.estimator import FAMILIES

    telemetry_off()  # a family's package is imported here too, as in estimator.family
    spec = importlib.util.find_spec(FAMILIES_PACKAGE)
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    out = {}
    for name, spec_of in FAMILIES.items():
        module = spec_of.partition(":")[0]  # package:Class
        folder = module.removeprefix(FAMILIES_PACKAGE + ".")
        if module.startswith(FAMILIES_PACKAGE + ".") and "." not in folder and any(
                (root / folder / "published.py").is_file() for root in roots):
            out[name] = importlib.import_module(module + ".published")
    return out


def _default_family() -> str:
    return next(iter(publishers()))


def catalogue() -> dict[str, Mode]:
    """The names `models` knows: those of the built-in families' published.py, or those of
    $PHOENIX_KEYPOINTS_MODELS_INDEX (a JSON file {NAME: {"detector": FILE, "pose": FILE, "family",
    "point_set", "detector_kind", "about"}}, FILE {"path", "input_hw", "onnx_sha256",
    "zip_sha256", "max_bytes", "at"}: for tests against a local server, or a site's own files)."""
    index = os.environ.get(INDEX_ENV, "")
    if not index:
        return {name: _mode(name, raw, fam, str(mod.PUBLISHED_AT))
                for fam, mod in publishers().items() for name, raw in mod.PUBLISHED_MODELS.items()}
    where = f"${INDEX_ENV} ({messages.terminal(index)})"
    default = _default_family()
    at = str(publishers()[default].PUBLISHED_AT)
    try:
        raw = json.loads(Path(index).read_text(encoding="utf-8"))
        out = {name: _mode(name, entry, default, at) for name, entry in raw.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RunError(f"{where} cannot be read as a models index: {messages.terminal(str(e))}. "
                       f"Fix it, or unset {INDEX_ENV} to use the published models.") from None
    bad = [messages.terminal(n) for n in out if not _NAME.fullmatch(n)]
    if bad:
        raise RunError(f"{where}: names must be lower-case letters, digits, - and _: {bad[:3]}.")
    return out


def _mode(name: str, raw: dict[str, Any], family_name: str, at: str) -> Mode:
    fam = str(raw.get("family", family_name))
    if fam not in publishers():
        raise ValueError(f"{name}: family {fam!r} publishes no models here (one of "
                         f"{', '.join(publishers())})")
    files = (_entry(raw["detector"], at), _entry(raw["pose"], at))
    kind, points = raw.get("detector_kind"), raw.get("point_set")
    return Mode(name, fam, files, None if points is None else str(points),
                None if kind is None else str(kind), str(raw.get("about", "")))


def _entry(raw: dict[str, Any], at: str) -> Published:
    """One file of an index, checked: a relative path of plain names ending in .zip or .onnx,
    hex pins, an https host."""
    path, shas = str(raw["path"]), (raw.get("onnx_sha256"), raw.get("zip_sha256"))
    if not _PATH.fullmatch(path) or ".." in path.split("/"):
        raise ValueError(f"path {path!r}: a relative path of plain names ending in .zip or .onnx")
    if any(s is not None and not (isinstance(s, str) and _SHA.fullmatch(s)) for s in shas):
        raise ValueError(f"{path}: a sha256 is 64 lower-case hex digits (or null)")
    cap = int(raw.get("max_bytes", MAX_BYTES))
    if not 0 < cap <= 4 * 2**30:
        raise ValueError(f"{path}: max_bytes must be in 1..4 GiB")
    host = str(raw.get("at") or at)
    if first_url_problem(host):
        raise ValueError(f"{path}: its host {host!r} is not https")
    h, w = (int(v) for v in raw.get("input_hw", (0, 0)))
    return Published(path, (h, w), shas[0], shas[1], cap, host if host.endswith("/") else host + "/")


def mode(name: str) -> Mode:
    known = catalogue()
    if name not in known:
        raise RunError(f"no models named {messages.terminal(name)!r}; known: {', '.join(known)} "
                       "(`phoenix-keypoints models list`).")
    return known[name]


# --- run --models NAME: the cache only ---------------------------------------------------------------
def resolve(name: str, folder: Path | None) -> tuple[Path, Path]:
    """(detector, pose model) of a fetched name; a missing file stops the run, naming the fetch."""
    where = cache_dir(folder)
    paths = tuple(where / f.onnx_name for f in mode(name).files)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        flag = f" --models-dir {messages.quote(folder)}" if folder is not None else ""
        raise RunError(f"--models {name}: {', '.join(str(p) for p in missing)} not fetched yet. Run "
                       f"`phoenix-keypoints models fetch {name}{flag}` once (it downloads and checks "
                       "them), or give --detector and --pose-model.")
    return paths[0], paths[1]


def fetched(name: str, folder: Path | None) -> tuple[Path, Path]:
    """A fetched name's files, each still the pinned bytes (a file copied into the cache by hand,
    or changed since, is refused here rather than recorded)."""
    paths = resolve(name, folder)
    for path, f in zip(paths, mode(name).files, strict=True):  # checked before onnxruntime reads it
        have = _sha256_file(path)
        if have != f.onnx_sha256:
            pinned = f"not the pinned {f.onnx_sha256}" if f.onnx_sha256 else "and no sha256 is pinned"
            raise RunError(f"--models {name}: {path} has sha256 {have}, {pinned}. Remove it and run "
                           f"`phoenix-keypoints models fetch {name}` again, or give the files with "
                           "--detector and --pose-model.")
    return paths


def run_choices(name: str) -> dict[str, str | None]:
    """What `run --models NAME` implies: its family (--estimator), point set and detector kind."""
    m = mode(name)
    return {"estimator": m.family, "point_set": m.point_set, "detector_kind": m.detector_kind}


# --- models fetch NAME ------------------------------------------------------------------------------
def fetch(name: str, folder: Path | None, base: str | None) -> int:
    """Each file of the name into the cache, once; each checked against its pin."""
    m, where, url = mode(name), cache_dir(folder), base_url(base)
    unpinned = [(flag, f) for flag, f in zip(("--detector", "--pose-model"), m.files, strict=True)
                if f.onnx_sha256 is None]
    if unpinned:
        flag, f = unpinned[0]
        how = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in run_choices(name).items() if v)
        raise RunError(f"models {name}: this project pins no sha256 for {file_url(f, url)} yet (no "
                       "source states one), so it is not fetched unchecked. Download it yourself, "
                       f"check it, and pass its {MEMBER if f.zipped else 'file'} as {flag} ({how}, "
                       f"with the other file of the pair: `models list`; "
                       f"{publishers()[m.family].MODELS_DOCS}).")
    where.mkdir(parents=True, exist_ok=True)
    _sweep(where)
    for role, f in zip(ROLES, m.files, strict=True):
        dest = where / f.onnx_name
        have = _sha256_file(dest) if dest.is_file() else None
        if have == f.onnx_sha256:
            messages.result(f"{role}: {dest} (already fetched, sha256 checked)")
            continue
        if have is not None:
            messages.note(f"{dest} has other bytes (sha256 {have}): fetched again, replaced if the "
                          "download checks out")
        _fetch_one(f, file_url(f, url), dest)
        messages.result(f"{role}: {dest} (fetched, sha256 {f.onnx_sha256})")
    return 0


def _fetch_one(f: Published, url: str, dest: Path) -> None:
    """The file (a zip the user put in the cache, else downloaded) to dest, a zip's end2end.onnx
    taken out; every temporary file is removed whatever happens, and dest appears whole or not at
    all. (A bare .onnx put in the cache by hand is dest itself, checked by `fetch`.)"""
    handed = dest.parent / f.zip_name if f.zipped else None
    with _temporary(dest.parent, f.zip_name) as part:
        if handed is not None and handed.is_file():
            messages.say(f"using {handed} (put there by hand; checked as a download is)")
            _copy_capped(handed.open("rb"), part, f.max_bytes, str(handed))
        else:
            _download(url, part, f.max_bytes, dest)
        if handed is None:
            _check_sha(_sha256_file(part), f.onnx_sha256, url, None)
            os.replace(part, dest)
        else:
            _unzipped(f, part, url, dest, handed)
    if handed is not None and handed.is_file():
        handed.unlink()


def _unzipped(f: Published, part: Path, url: str, dest: Path, handed: Path) -> None:
    if f.zip_sha256 is not None:
        _check_sha(_sha256_file(part), f.zip_sha256, f"{url} (the zip)", handed)
    with _temporary(dest.parent, f.onnx_name) as onnx:
        _unzip_member(part, onnx, f.max_bytes, url)
        _check_sha(_sha256_file(onnx), f.onnx_sha256, f"{MEMBER} of {url}", handed)
        os.replace(onnx, dest)


@contextmanager
def _temporary(folder: Path, name: str) -> Iterator[Path]:
    """A hidden temporary file beside the destination, locked while this fetch lives (so a sweep
    by another fetch leaves it) and removed on the way out if still there."""
    fd, new = tempfile.mkstemp(prefix=f".{name}.", suffix=".new", dir=folder)
    part = Path(new).with_suffix(".part")
    try:
        _lock(fd, wait=True)
        os.replace(new, part)  # named .part once locked: a sweep may judge it by its lock alone
        yield part
    finally:
        Path(new).unlink(missing_ok=True)
        part.unlink(missing_ok=True)
        os.close(fd)


def _lock(fd: int, wait: bool) -> bool:
    """An exclusive lock on an open file (False: another process holds one). Where there are no
    advisory locks (Windows), an open file cannot be removed anyway: True."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def _sweep(folder: Path) -> None:
    """Remove the temporary files of fetches that died (killed, the machine lost): each .part no
    live fetch holds locked, however young (a fetch killed a moment ago), and each .new older than
    STALE_S (made, not yet locked). Only regular files named as _temporary names them."""
    for path in [*folder.glob(".*.part"), *folder.glob(".*.new")]:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        young = path.suffix == ".new" and time.time() - st.st_mtime < STALE_S
        if not stat.S_ISREG(st.st_mode) or young:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            if _lock(fd, wait=False):
                path.unlink()
                messages.note(f"removed {path} ({st.st_size} bytes): left by a fetch that did not "
                              "finish")
        except OSError:
            pass
        finally:
            os.close(fd)


def _check_sha(got: str, want: str | None, what: str, handed: Path | None) -> None:
    if got != want:
        hint = f" (remove {handed}, which you put there)" if handed and handed.is_file() else ""
        raise RunError(f"{what}: sha256 {got}, not the pinned {want}: refused, nothing kept{hint}. "
                       "A changed or damaged file; fetch it again, or from another mirror "
                       f"(--base-url, ${URL_ENV}).")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _download(url: str, part: Path, cap: int, dest: Path) -> None:
    """url into part, at most cap bytes, the whole of what the server announced."""
    messages.say(f"downloading {messages.terminal(url)}")
    try:
        with part.open("wb") as out:
            download(url, out, cap, _bar)
            out.flush()
            os.fsync(out.fileno())
    except Refused as e:
        raise RunError(f"{messages.terminal(url)}: {messages.terminal(str(e))}.") from None
    except DownloadFailed as e:
        raise JobFailed(_offline(url, dest, messages.terminal(str(e)))) from None


def _offline(url: str, dest: Path, why: str) -> str:
    name = PurePosixPath(urllib.parse.urlsplit(url).path).name
    zipped = name.endswith(".zip")
    inside = f" (or its {MEMBER} at {dest})" if zipped else ""
    return (f"could not download {messages.terminal(url)}: {why}. Nothing was kept. Try again; or, "
            f"offline, fetch that URL on a machine that can and put {'the zip' if zipped else 'it'} at "
            f"{messages.terminal(str(dest.parent / name))}{inside}: `models fetch` then checks it "
            "without the network.")


def _bar(length: int | None) -> Callable[[int], None]:
    """A download progress bar on a terminal (tqdm leaves it out elsewhere)."""
    from tqdm import tqdm

    bar = tqdm(total=length, unit="B", unit_scale=True, unit_divisor=1024, leave=False,
               disable=None, file=sys.stderr)
    return bar.update


def _copy_capped(source: IO[bytes], part: Path, cap: int, what: str) -> int:
    """source into part; more than cap bytes is refused. The source is closed."""
    got = 0
    with source, part.open("wb") as out:
        for block in iter(lambda: source.read(CHUNK), b""):
            got += len(block)
            if got > cap:
                raise RunError(f"{what}: more than the {cap} bytes this project accepts for it: "
                               "refused, nothing kept.")
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    return got


# --- a zip, read without trusting it ----------------------------------------------------------------
_EOCD, _EOCD64_LOCATOR = b"PK\x05\x06", b"PK\x06\x07"


def directory_of(archive: Path) -> tuple[int, int]:
    """(entries, bytes) of a zip's central directory as its end record says them, read where
    zipfile reads them (the last end record in the final 64 KiB, its zip64 record just before
    it): what zipfile would hold in memory, known before it reads anything."""
    size = archive.stat().st_size
    with archive.open("rb") as f:
        tail_at = max(0, size - (22 + 65535))
        f.seek(tail_at)
        tail = f.read()
        at = tail.rfind(_EOCD)
        if at < 0 or len(tail) - at < 22:
            raise zipfile.BadZipFile("no end of central directory record")
        entries, directory = struct.unpack("<10xHL6x", tail[at:at + 22])
        if at >= 20 and tail[at - 20:at - 16] == _EOCD64_LOCATOR:  # zip64: its record 56 bytes before
            where = tail_at + at - 20 - 56
            if where < 0:
                raise zipfile.BadZipFile("a zip64 end record before the start of the file")
            f.seek(where)
            record = f.read(56)
            if len(record) != 56 or record[:4] != b"PK\x06\x06":
                raise zipfile.BadZipFile("a zip64 locator without its end record")
            entries, directory = struct.unpack("<32xQQ8x", record)  # zipfile reads these then
    return entries, directory


def _unzip_member(archive: Path, onnx: Path, cap: int, url: str) -> None:
    """The one end2end.onnx of the zip into onnx. The central directory is bounded (entries,
    bytes) before zipfile reads it. Member paths are never used as paths: the whole zip is refused
    if any member would land outside its folder (.., absolute, a drive) or is a link, and it must
    hold exactly one end2end.onnx."""
    try:
        entries, directory = directory_of(archive)
        if entries > MAX_ENTRIES or directory > MAX_DIRECTORY:
            raise RunError(f"{url}: its central directory says {entries} entries in {directory} "
                           f"bytes, more than the {MAX_ENTRIES} entries and {MAX_DIRECTORY} bytes a "
                           "published model's zip needs: refused unread.")
        with zipfile.ZipFile(archive) as z:
            infos = z.infolist()
            if len(infos) > MAX_ENTRIES:
                raise RunError(f"{url}: the zip holds {len(infos)} entries, more than its end "
                               f"record said and than {MAX_ENTRIES}: refused.")
            _check_members(infos, cap, url)
            ours = next(i for i in infos if PurePosixPath(i.filename).name == MEMBER)
            _copy_capped(z.open(ours), onnx, cap, f"{MEMBER} of {url}")
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, struct.error) as e:
        raise RunError(f"{url}: not a readable zip ({messages.terminal(str(e))}): refused.") from None


def _check_members(infos: list[zipfile.ZipInfo], cap: int, url: str) -> None:
    unsafe = [i.filename for i in infos if _unsafe_member(i)]
    if unsafe:
        raise RunError(f"{url}: the zip holds {_names(unsafe)}, outside its folder or a "
                       "link: refused, nothing extracted.")
    ours = [i for i in infos if PurePosixPath(i.filename).name == MEMBER]
    if len(ours) != 1:
        raise RunError(f"{url}: the zip holds {len(ours)} {MEMBER} (one is expected): refused.")
    if ours[0].file_size > cap:
        raise RunError(f"{url}: its {MEMBER} is {ours[0].file_size} bytes, more than the "
                       f"{cap} this project accepts: refused.")


def _unsafe_member(info: zipfile.ZipInfo) -> bool:
    name = info.filename.replace("\\", "/")
    mode = info.external_attr >> 16
    return (name.startswith("/") or re.match(r"[A-Za-z]:", name) is not None
            or ".." in name.split("/") or stat.S_ISLNK(mode))


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(messages.terminal(n)) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# --- models list -----------------------------------------------------------------------------------
def list_models(folder: Path | None, base: str | None) -> int:
    """Each name, grouped by family and point set: its two files, their URLs, whether they are in
    the cache and whether `models fetch` takes them."""
    where, url = cache_dir(folder), base_url(base)
    messages.result(f"cache: {where}")
    groups: dict[tuple[str, str], list[Mode]] = {}
    for m in catalogue().values():
        groups.setdefault((m.family, m.point_set or "its default point set"), []).append(m)
    for (fam, points), modes in groups.items():
        messages.result(f"{fam}, {points} (run --models NAME: --estimator {fam}):")
        for m in modes:
            fetchable = all(f.onnx_sha256 for f in m.files)
            kind = f", --detector-kind {m.detector_kind}" if m.detector_kind else ""
            state = "" if fetchable else " (no sha256 pinned for a file yet: not fetched)"
            messages.result(f"  {m.name}: {m.about or m.name}{kind}{state}")
            for role, f in zip(ROLES, m.files, strict=True):
                have = "fetched" if (where / f.onnx_name).is_file() else "not fetched"
                pin = "" if f.onnx_sha256 else ", no sha256 pinned"
                messages.result(f"    {role}: {file_url(f, url)} (input {f.input_hw[0]}x"
                                f"{f.input_hw[1]}; {have}{pin})")
    return 0


# --- the command line (jobs/cli.py calls these) -----------------------------------------------------
def add_run_args(p: argparse._ActionsContainer) -> None:
    """run / slurm: --models NAME (a fetched name) and where the cache is."""
    p.add_argument("--models", metavar="NAME",
                   help="the detector and pose model of a name fetched with `phoenix-keypoints "
                        "models fetch NAME` (`models list` shows them), instead of --detector and "
                        "--pose-model; the name also chooses the family (--estimator), point set "
                        "and detector kind")
    p.add_argument("--models-dir", type=Path, metavar="DIR",
                   help=f"where fetched models are (default ${DIR_ENV}, else the user's cache "
                        "folder: ~/.cache/phoenix-keypoints/models on Linux)")


def _about() -> str:
    return " and ".join(str(m.MODELS_ABOUT) for m in publishers().values())


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("models", help=f"fetch {_about()} by name, once")
    msub = m.add_subparsers(dest="models_command", required=True)
    f = msub.add_parser("fetch", help="download NAME's detector and pose model into the cache, "
                                      "checked against pinned sha256s (the only command that "
                                      "reaches the network)")
    known = [n for mod in publishers().values() for n in mod.PUBLISHED_MODELS]
    f.add_argument("name", metavar="NAME", help=" or ".join(", ".join(known).rsplit(", ", 1)))
    ls = msub.add_parser("list", help="the names by family and point set, their URLs and what is "
                                      "in the cache")
    for q in (f, ls):
        q.add_argument("--models-dir", type=Path, metavar="DIR",
                       help=f"the cache folder (default ${DIR_ENV}, else the user's cache folder)")
        q.add_argument("--base-url", metavar="URL",
                       help=f"fetch from another host serving the same paths (default ${URL_ENV}, "
                            "else each file's publisher; https only, or http on 127.0.0.1 for "
                            "tests)")
    f.set_defaults(handler=lambda a: fetch(a.name, a.models_dir, a.base_url))
    ls.set_defaults(handler=lambda a: list_models(a.models_dir, a.base_url))
