"""Models by name: `phoenix-keypoints models fetch NAME` and `run --models NAME`.

A pose library's users name a mode (mode="balanced") and get its two files fetched once; this module does
that for the family that publishes its models (its PUBLISHED_MODELS, with their pins and where they
come from), and only when asked: `models fetch
NAME` downloads each file of the mode into a cache folder, checks it against a sha256 this project
pins, and takes the zip's `end2end.onnx` out without trusting the zip (no member outside its
folder, no absolute path, no link, one `end2end.onnx`, sizes capped). `run --models NAME` only
looks in the cache: a file that is not there stops the run (exit 2) with the command that fetches
it. Nothing here runs at import, and no other command reaches the network.

A file no pin is given for is refused, rather than trust unchecked bytes; where the zip's own
sha256 is given, the zip is checked before it is opened.

Exit statuses: 0 fetched (or already there); 1 the download failed (no network, refused
connection, an HTTP error, a truncated transfer: try again, or fetch by hand as the message says);
2 refused bytes or names (wrong sha256, an unsafe or strange zip, too large, no pin, a bad name).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import stat
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from phoenix_keypoints.extract.keypoints.estimator import family, names
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunError

DIR_ENV = "PHOENIX_KEYPOINTS_MODELS_DIR"  # the cache folder (or --models-dir)
URL_ENV = "PHOENIX_KEYPOINTS_MODELS_URL"  # another base URL serving the same paths (or --base-url)
INDEX_ENV = "PHOENIX_KEYPOINTS_MODELS_INDEX"  # a JSON file of other names and pins (tests, mirrors)
MAX_BYTES = 512 * 2**20  # a zip, and the end2end.onnx in it (the largest published: ~230 MB)
TIMEOUT_S = 30.0  # each connect and read; a stalled server fails instead of hanging
CHUNK = 2**20
MEMBER = "end2end.onnx"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Published:
    """One file a mode names: its path under the base URL and the bytes this project expects."""

    path: str  # e.g. rtmposev1/onnx_sdk/yolox_m_8xb8-300e_humanart-c2c7a14a.zip
    input_hw: tuple[int, int]  # the model's input (height, width), as the publisher's mode says
    onnx_sha256: str | None  # of the end2end.onnx inside; None: no source states it (refused)
    zip_sha256: str | None = None  # of the zip itself, where a source states it
    max_bytes: int = MAX_BYTES

    @property
    def zip_name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def onnx_name(self) -> str:
        """The publisher's own cache name: the zip's name with .onnx (a user can copy one cache over)."""
        return self.zip_name.removesuffix(".zip") + ".onnx"


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
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK:
        return None
    return f"{messages.terminal(url)} is not https (only https, or http on 127.0.0.1, is fetched)"


def published_at() -> str:
    """Where the family that publishes models serves them (its PUBLISHED_AT)."""
    return str(family(models_family()).PUBLISHED_AT)


def base_url(option: str | None) -> str:
    """--base-url, else $PHOENIX_KEYPOINTS_MODELS_URL, else where the family publishes (its
    PUBLISHED_AT); always ending in '/'."""
    url = option or os.environ.get(URL_ENV, "") or published_at()
    why = allowed_url(url)
    if why:
        raise RunError(f"base URL {why}.")
    return url if url.endswith("/") else url + "/"


_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_SHA = re.compile(r"[0-9a-f]{64}")
_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*\.zip")


def models_family() -> str:
    """The family whose models `models` fetches: the one that publishes them (its package's
    PUBLISHED_MODELS, an index as $PHOENIX_KEYPOINTS_MODELS_INDEX holds one)."""
    return next(n for n in names() if hasattr(family(n), "PUBLISHED_MODELS"))


def catalogue() -> dict[str, tuple[Published, Published]]:
    """The names `models` knows: the publishing family's modes, or those of
    $PHOENIX_KEYPOINTS_MODELS_INDEX (a JSON file {NAME: {"detector": FILE, "pose": FILE}}, FILE {"path",
    "input_hw", "onnx_sha256", "zip_sha256", "max_bytes"}: for tests against a local server, or a site's
    own files)."""
    index = os.environ.get(INDEX_ENV, "")
    if not index:
        raw = family(models_family()).PUBLISHED_MODELS
        return {name: (_entry(raw[name]["detector"]), _entry(raw[name]["pose"])) for name in raw}
    where = f"${INDEX_ENV} ({messages.terminal(index)})"
    try:
        raw = json.loads(Path(index).read_text(encoding="utf-8"))
        out = {name: (_entry(raw[name]["detector"]), _entry(raw[name]["pose"])) for name in raw}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunError(f"{where} cannot be read as a models index: {messages.terminal(str(e))}. "
                       f"Fix it, or unset {INDEX_ENV} to use "
                       f"{family(models_family()).MODELS_ABOUT}.") from None
    bad = [messages.terminal(n) for n in out if not _NAME.fullmatch(n)]
    if bad:
        raise RunError(f"{where}: names must be lower-case letters, digits, - and _: {bad[:3]}.")
    return out


def _entry(raw: dict[str, Any]) -> Published:
    """One file of an index, checked: a relative path of plain names ending in .zip, hex pins."""
    path, shas = str(raw["path"]), (raw.get("onnx_sha256"), raw.get("zip_sha256"))
    if not _PATH.fullmatch(path) or ".." in path.split("/"):
        raise ValueError(f"path {path!r}: a relative path of plain names ending in .zip")
    if any(s is not None and not (isinstance(s, str) and _SHA.fullmatch(s)) for s in shas):
        raise ValueError(f"{path}: a sha256 is 64 lower-case hex digits (or null)")
    cap = int(raw.get("max_bytes", MAX_BYTES))
    if not 0 < cap <= 4 * 2**30:
        raise ValueError(f"{path}: max_bytes must be in 1..4 GiB")
    h, w = (int(v) for v in raw.get("input_hw", (0, 0)))
    return Published(path, (h, w), shas[0], shas[1], cap)


def mode(name: str) -> tuple[Published, Published]:
    known = catalogue()
    if name not in known:
        raise RunError(f"no models named {messages.terminal(name)!r}; known: {', '.join(known)} "
                       "(`phoenix-keypoints models list`).")
    return known[name]


# --- run --models NAME: the cache only ---------------------------------------------------------------
def resolve(name: str, folder: Path | None) -> tuple[Path, Path]:
    """(detector, pose model) of a fetched mode; a missing file stops the run, naming the fetch."""
    where = cache_dir(folder)
    paths = tuple(where / f.onnx_name for f in mode(name))
    missing = [p for p in paths if not p.is_file()]
    if missing:
        flag = f" --models-dir {messages.quote(folder)}" if folder is not None else ""
        raise RunError(f"--models {name}: {', '.join(str(p) for p in missing)} not fetched yet. Run "
                       f"`phoenix-keypoints models fetch {name}{flag}` once (it downloads and checks "
                       "them), or give --detector and --pose-model.")
    return paths[0], paths[1]


def fetched(name: str, folder: Path | None) -> tuple[Path, Path]:
    """A fetched mode's files, each still the pinned bytes (a file copied into the cache by hand,
    or changed since, is refused here rather than recorded)."""
    paths = resolve(name, folder)
    for path, f in zip(paths, mode(name), strict=True):  # checked before onnxruntime reads it
        have = _sha256_file(path)
        if have != f.onnx_sha256:
            pinned = f"not the pinned {f.onnx_sha256}" if f.onnx_sha256 else "and no sha256 is pinned"
            raise RunError(f"--models {name}: {path} has sha256 {have}, {pinned}. Remove it and run "
                           f"`phoenix-keypoints models fetch {name}` again, or give the files with "
                           "--detector and --pose-model.")
    return paths


# --- models fetch NAME ------------------------------------------------------------------------------
def fetch(name: str, folder: Path | None, base: str | None) -> int:
    """Each file of the mode into the cache, once; each checked against its pin."""
    files, where, url = mode(name), cache_dir(folder), base_url(base)
    unpinned = [f for f in files if f.onnx_sha256 is None]
    if unpinned:
        f = unpinned[0]
        raise RunError(f"models {name}: this project pins no sha256 for {url}{f.path} yet (no source "
                       "states one), so it is not fetched unchecked. Download it yourself, check "
                       f"it, and give its {MEMBER} with --detector / --pose-model "
                       f"({family(models_family()).DOCS}).")
    where.mkdir(parents=True, exist_ok=True)
    for role, f in zip(ROLES, files, strict=True):
        dest = where / f.onnx_name
        have = _sha256_file(dest) if dest.is_file() else None
        if have == f.onnx_sha256:
            messages.result(f"{role}: {dest} (already fetched, sha256 checked)")
            continue
        if have is not None:
            messages.note(f"{dest} has other bytes (sha256 {have}): fetched again, replaced if the "
                          "download checks out")
        _fetch_one(f, url + f.path, dest)
        messages.result(f"{role}: {dest} (fetched, sha256 {f.onnx_sha256})")
    return 0


def _fetch_one(f: Published, url: str, dest: Path) -> None:
    """The zip (a copy the user put in the cache, else downloaded) to dest's end2end.onnx; every
    temporary file is removed whatever happens, and dest appears whole or not at all."""
    handed = dest.parent / f.zip_name
    with _temporary(dest.parent, f.zip_name) as part:
        if handed.is_file():
            messages.say(f"using {handed} (put there by hand; checked as a download is)")
            _copy_capped(handed.open("rb"), part, f.max_bytes, str(handed), None)
        else:
            _download(url, part, f.max_bytes, dest)
        if f.zip_sha256 is not None:
            _check_sha(_sha256_file(part), f.zip_sha256, f"{url} (the zip)", handed)
        with _temporary(dest.parent, f.onnx_name) as onnx:
            _unzip_member(part, onnx, f.max_bytes, url)
            _check_sha(_sha256_file(onnx), f.onnx_sha256, f"{MEMBER} of {url}", handed)
            os.replace(onnx, dest)
    if handed.is_file():
        handed.unlink()


@contextmanager
def _temporary(folder: Path, name: str) -> Iterator[Path]:
    """A hidden temporary file beside the destination, removed on the way out if still there."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _check_sha(got: str, want: str | None, what: str, handed: Path) -> None:
    if got != want:
        hint = f" (remove {handed}, which you put there)" if handed.is_file() else ""
        raise RunError(f"{what}: sha256 {got}, not the pinned {want}: refused, nothing kept{hint}. "
                       "A changed or damaged file; fetch it again, or from another mirror "
                       f"(--base-url, ${URL_ENV}).")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to a URL allowed_url accepts (never down to plain http)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        why = allowed_url(newurl)
        if why:
            raise urllib.error.URLError(f"redirected to {why}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _download(url: str, part: Path, cap: int, dest: Path) -> None:
    """url into part, at most cap bytes, the whole of what the server announced."""
    why = allowed_url(url)
    if why:
        raise RunError(f"{why}: not fetched.")
    messages.say(f"downloading {url}")
    opener = urllib.request.build_opener(_HttpsOnlyRedirects())
    request = urllib.request.Request(url, headers={"User-Agent": "phoenix-keypoints"})
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > cap:
                raise RunError(f"{url}: {int(length)} bytes announced, more than the {cap} this "
                               "project accepts for it: refused, nothing kept.")
            got = _copy_capped(response, part, cap, url, _bar(length))
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        raise JobFailed(_offline(url, dest, _reason(e))) from None
    if length is not None and length.isdigit() and got != int(length):
        raise JobFailed(_offline(url, dest, f"{got} of the {length} bytes announced arrived "
                                            "(truncated)"))


def _reason(e: Exception) -> str:
    if isinstance(e, http.client.IncompleteRead):
        return f"truncated ({len(e.partial)} bytes, then the connection closed)"
    reason = getattr(e, "reason", None) or e
    return messages.terminal(str(reason))


def _offline(url: str, dest: Path, why: str) -> str:
    return (f"could not download {url}: {why}. Nothing was kept. Try again; or, offline, fetch "
            f"that URL on a machine that can and put the zip at {dest.parent / PurePosixPath(url).name}"
            f" (or its {MEMBER} at {dest}): `models fetch` then checks it without the network.")


def _bar(length: str | None) -> Callable[[int], None]:
    """A download progress bar on a terminal (tqdm leaves it out elsewhere)."""
    from tqdm import tqdm

    bar = tqdm(total=int(length) if length and length.isdigit() else None, unit="B",
               unit_scale=True, unit_divisor=1024, leave=False, disable=None, file=sys.stderr)
    return bar.update


def _copy_capped(source: IO[bytes], part: Path, cap: int, what: str,
                 step: Callable[[int], None] | None) -> int:
    """source into part; more than cap bytes is refused. The source is closed."""
    got = 0
    with source, part.open("wb") as out:
        for block in iter(lambda: source.read(CHUNK), b""):
            got += len(block)
            if got > cap:
                raise RunError(f"{what}: more than the {cap} bytes this project accepts for it: "
                               "refused, nothing kept.")
            out.write(block)
            if step is not None:
                step(len(block))
        out.flush()
        os.fsync(out.fileno())
    return got


def _unzip_member(archive: Path, onnx: Path, cap: int, url: str) -> None:
    """The one end2end.onnx of the zip into onnx. Member paths are never used as paths: the whole
    zip is refused if any member would land outside its folder (.., absolute, a drive) or is a
    link, and it must hold exactly one end2end.onnx."""
    try:
        with zipfile.ZipFile(archive) as z:
            infos = z.infolist()
            unsafe = [i.filename for i in infos if _unsafe_member(i)]
            if unsafe:
                raise RunError(f"{url}: the zip holds {_names(unsafe)}, outside its folder or a "
                               "link: refused, nothing extracted.")
            ours = [i for i in infos if PurePosixPath(i.filename).name == MEMBER]
            if len(ours) != 1:
                raise RunError(f"{url}: the zip holds {len(ours)} {MEMBER} (one is expected): "
                               "refused.")
            if ours[0].file_size > cap:
                raise RunError(f"{url}: its {MEMBER} is {ours[0].file_size} bytes, more than the "
                               f"{cap} this project accepts: refused.")
            _copy_capped(z.open(ours[0]), onnx, cap, f"{MEMBER} of {url}", None)
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as e:
        raise RunError(f"{url}: not a readable zip ({messages.terminal(str(e))}): refused.") from None


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
    """Each name, its two files, their URLs and whether they are in the cache."""
    where, url = cache_dir(folder), base_url(base)
    messages.result(f"cache: {where}")
    for name, files in catalogue().items():
        messages.result(f"{name}:")
        for role, f in zip(ROLES, files, strict=True):
            state = "fetched" if (where / f.onnx_name).is_file() else "not fetched"
            pin = "" if f.onnx_sha256 else ", no sha256 pinned yet: not fetched by `models fetch`"
            messages.result(f"  {role}: {url}{f.path} (input {f.input_hw[0]}x{f.input_hw[1]}; "
                            f"{state}{pin})")
    return 0


# --- the command line (jobs/cli.py calls these) -----------------------------------------------------
def add_run_args(p: argparse.ArgumentParser) -> None:
    """run / slurm: --models NAME (a fetched mode) and where the cache is, worded by the family
    that publishes models (its MODELS_HELP)."""
    name = models_family()
    p.add_argument("--models", metavar="NAME", help=f"{name}: {family(name).MODELS_HELP}")
    p.add_argument("--models-dir", type=Path, metavar="DIR",
                   help=f"where fetched models are (default ${DIR_ENV}, else the user's cache "
                        "folder: ~/.cache/phoenix-keypoints/models on Linux)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("models", help=f"fetch {family(models_family()).MODELS_ABOUT} by name, once")
    msub = m.add_subparsers(dest="models_command", required=True)
    f = msub.add_parser("fetch", help="download NAME's detector and pose model into the cache, "
                                      "checked against pinned sha256s (the only command that "
                                      "reaches the network)")
    f.add_argument("name", metavar="NAME",
                   help=" or ".join(", ".join(family(models_family()).PUBLISHED_MODELS).rsplit(", ", 1)))
    ls = msub.add_parser("list", help="the names, their URLs and what is in the cache")
    for q in (f, ls):
        q.add_argument("--models-dir", type=Path, metavar="DIR",
                       help=f"the cache folder (default ${DIR_ENV}, else the user's cache folder)")
        q.add_argument("--base-url", metavar="URL",
                       help=f"fetch from another host serving the same paths (default ${URL_ENV}, "
                            f"else {published_at()}; https only, or http on 127.0.0.1 for tests)")
    f.set_defaults(handler=lambda a: fetch(a.name, a.models_dir, a.base_url))
    ls.set_defaults(handler=lambda a: list_models(a.models_dir, a.base_url))
