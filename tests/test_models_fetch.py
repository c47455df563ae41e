"""`phoenix-keypoints models fetch NAME` against a real HTTP server on 127.0.0.1 (issue 40 item 4).

The server serves zips built here the way rtmlib's are shipped (a folder holding end2end.onnx and
the SDK's json files), with tests/tiny_onnx.py's models inside; an index file
($PHOENIX_KEYPOINTS_MODELS_INDEX) pins their sha256 as the project pins rtmlib's. Each failure
(wrong sha256, truncated transfer, a `../` member, a refused connection, too large, a redirect to
plain http) must end in one clear message and its exit status, leaving nothing in the cache; and
nothing is fetched unless `models fetch` is asked.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from helpers import assert_no_traceback, popen_cli, run_cli, shipped_zip
from helpers import sha256_bytes as sha
from local_http import Listener, Server, stalling
from tiny_onnx import tiny_models


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture(scope="module")
def onnx_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    models = tiny_models(tmp_path_factory.mktemp("tiny"))
    return {"detector": models["detector"].read_bytes(), "pose": models["pose"].read_bytes()}


def entry(path: str, onnx: bytes, zipped: bytes | None = None, **more: object) -> dict:
    return {"path": path, "input_hw": [96, 128], "onnx_sha256": sha(onnx),
            **({"zip_sha256": sha(zipped)} if zipped is not None else {}), **more}


def publish(server: Server, tmp_path: Path, onnx: dict[str, bytes],
            **variants: dict[str, dict]) -> dict[str, str]:
    """The tiny models zipped and served as `tiny`, plus the named variants; the index written
    and the environment that points `models` at it and at the server."""
    det_zip = shipped_zip(onnx["detector"], "yolox_tiny")
    pose_zip = shipped_zip(onnx["pose"], "rtmw_tiny")
    server.files["/sdk/det.zip"] = det_zip
    server.files["/sdk/pose.zip"] = pose_zip
    index = {"tiny": {"detector": entry("sdk/det.zip", onnx["detector"], det_zip),
                      "pose": entry("sdk/pose.zip", onnx["pose"])}, **variants}
    (tmp_path / "index.json").write_text(json.dumps(index))
    return {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",  # a CI's proxy
            "PHOENIX_KEYPOINTS_MODELS_INDEX": str(tmp_path / "index.json"),
            "PHOENIX_KEYPOINTS_MODELS_URL": server.url,
            "PHOENIX_KEYPOINTS_MODELS_DIR": str(tmp_path / "cache")}


def cache_files(tmp_path: Path) -> list[str]:
    cache = tmp_path / "cache"
    return sorted(p.name for p in cache.rglob("*")) if cache.exists() else []


def refused(proc, code: int, *words: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert_no_traceback(proc)
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


def test_fetch_checks_unpacks_once_and_a_run_uses_the_cache(server: Server, tmp_path: Path,
                                                             onnx_bytes: dict[str, bytes],
                                                             sample_root: Path) -> None:
    env = publish(server, tmp_path, onnx_bytes)
    before = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run", "--estimator",
                      "wholebody", "--models", "tiny", "--videos", "cameraman-1"], env=env)
    refused(before, 2, "models fetch tiny", "not fetched yet")
    assert server.requests == [] and cache_files(tmp_path) == []  # nothing fetched unless asked

    proc = run_cli(["models", "fetch", "tiny"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    assert cache_files(tmp_path) == ["det.onnx", "pose.onnx"]  # no zip, no .part left
    cache = tmp_path / "cache"
    assert sha((cache / "det.onnx").read_bytes()) == sha(onnx_bytes["detector"])
    assert sha((cache / "pose.onnx").read_bytes()) == sha(onnx_bytes["pose"])
    assert sorted(server.requests) == ["/sdk/det.zip", "/sdk/pose.zip"]

    again = run_cli(["models", "fetch", "tiny"], env=env)  # once: the cache is checked, not refetched
    assert again.returncode == 0 and again.stdout.count("already fetched") == 2, again.stdout
    assert len(server.requests) == 2
    (cache / "pose.onnx").write_bytes(b"damaged")  # other bytes in the cache: fetched again
    mended = run_cli(["models", "fetch", "tiny"], env=env)
    assert mended.returncode == 0 and "other bytes" in mended.stderr, mended.stderr
    assert sha((cache / "pose.onnx").read_bytes()) == sha(onnx_bytes["pose"])
    assert len(server.requests) == 3 and cache_files(tmp_path) == ["det.onnx", "pose.onnx"]

    run = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run", "--estimator",
                   "wholebody", "--models", "tiny", "--videos", "cameraman-1"], env=env)
    assert run.returncode == 0, run.stderr
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["options"]["wholebody"]
    text = json.dumps(recorded)
    assert str(cache / "det.onnx") in text and str(cache / "pose.onnx") in text, text
    assert sha(onnx_bytes["detector"]) in text and sha(onnx_bytes["pose"]) in text
    both = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run2", "--estimator",
                    "wholebody", "--models", "tiny", "--detector", cache / "det.onnx"], env=env)
    refused(both, 2, "without --detector and --pose-model")
    (cache / "det.onnx").write_bytes(onnx_bytes["pose"])  # a file of other bytes in the cache
    changed = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "run3", "--estimator",
                       "wholebody", "--models", "tiny", "--videos", "cameraman-1"], env=env)
    refused(changed, 2, f"not the pinned {sha(onnx_bytes['detector'])}", "models fetch tiny")


def test_a_wrong_sha256_is_refused_and_nothing_kept(server: Server, tmp_path: Path,
                                                    onnx_bytes: dict[str, bytes]) -> None:
    wrong = {"detector": {**entry("sdk/det.zip", onnx_bytes["detector"]), "onnx_sha256": "0" * 64},
             "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    wrong_zip = {"detector": {**entry("sdk/det.zip", onnx_bytes["detector"]), "zip_sha256": "1" * 64},
                 "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    env = publish(server, tmp_path, onnx_bytes, wrong=wrong, wrongzip=wrong_zip)
    for name, what in (("wrong", "end2end.onnx of"), ("wrongzip", "(the zip)")):
        proc = run_cli(["models", "fetch", name], env=env)
        refused(proc, 2, "sha256", "0" * 64 if name == "wrong" else "1" * 64, "refused", what)
        assert cache_files(tmp_path) == [], proc.stderr


def test_a_truncated_download_fails_and_nothing_is_kept(server: Server, tmp_path: Path,
                                                        onnx_bytes: dict[str, bytes]) -> None:
    env = publish(server, tmp_path, onnx_bytes)
    server.truncate.add("/sdk/det.zip")
    proc = run_cli(["models", "fetch", "tiny"], env=env)
    refused(proc, 1, "truncated", f"{server.url}sdk/det.zip", "Nothing was kept")
    assert cache_files(tmp_path) == []


def test_a_zip_with_members_outside_its_folder_is_refused(server: Server, tmp_path: Path,
                                                          onnx_bytes: dict[str, bytes]) -> None:
    """`../` (and an absolute path, a link) in a member: the whole zip refused, nothing written
    anywhere, whether the bad member is end2end.onnx itself or another file beside it."""
    slip = shipped_zip(onnx_bytes["detector"], "yolox", {"../../escaped.txt": b"x"})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../end2end.onnx", onnx_bytes["detector"])
    link = io.BytesIO()
    with zipfile.ZipFile(link, "w") as z:
        info = zipfile.ZipInfo("yolox/end2end.onnx")
        info.external_attr = (0o120777 << 16)  # a symbolic link
        z.writestr(info, "/etc/passwd")
    served = {"/sdk/slip.zip": slip, "/sdk/dotdot.zip": buf.getvalue(), "/sdk/link.zip": link.getvalue()}
    variants = {k.split("/")[-1][:-4]: {"detector": entry(k[1:], onnx_bytes["detector"]),
                                         "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
                for k in served}
    env = publish(server, tmp_path, onnx_bytes, **variants)
    server.files.update(served)
    for name, shown in (("slip", "'../../escaped.txt'"), ("dotdot", "'../end2end.onnx'"),
                        ("link", "'yolox/end2end.onnx'")):
        proc = run_cli(["models", "fetch", name], env=env)
        refused(proc, 2, shown, "outside its folder or a link", "nothing extracted")
        assert cache_files(tmp_path) == []
    assert not list(tmp_path.parent.rglob("escaped.txt"))


def test_no_network_says_which_url_and_where_then_a_zip_put_there_is_used(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes]) -> None:
    env = publish(server, tmp_path, onnx_bytes)
    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/"
    env["PHOENIX_KEYPOINTS_MODELS_URL"] = closed
    proc = run_cli(["models", "fetch", "tiny"], env=env)
    cache = tmp_path / "cache"
    refused(proc, 1, f"could not download {closed}sdk/det.zip", "refused",
            f"put the zip at {cache / 'det.zip'}", f"{cache / 'det.onnx'}")
    assert cache_files(tmp_path) == []

    (cache / "det.zip").write_bytes(server.files["/sdk/det.zip"])  # fetched elsewhere, put there
    (cache / "pose.zip").write_bytes(server.files["/sdk/pose.zip"])
    offline = run_cli(["models", "fetch", "tiny"], env=env)
    assert offline.returncode == 0, offline.stderr
    assert cache_files(tmp_path) == ["det.onnx", "pose.onnx"]
    assert server.requests == []


def test_too_large_unpinned_and_downgrading_redirects_are_refused(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes]) -> None:
    small = {"detector": entry("sdk/det.zip", onnx_bytes["detector"], max_bytes=1000),
             "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    unpinned = {"detector": {**entry("sdk/det.zip", onnx_bytes["detector"]), "onnx_sha256": None},
                "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    moved = {"detector": entry("sdk/moved.zip", onnx_bytes["detector"]),
             "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    env = publish(server, tmp_path, onnx_bytes, small=small, unpinned=unpinned, moved=moved)
    server.redirect["/sdk/moved.zip"] = "http://example.com/det.zip"
    refused(run_cli(["models", "fetch", "small"], env=env), 2, "more than the 1000")
    n = len(server.requests)
    refused(run_cli(["models", "fetch", "unpinned"], env=env), 2, "pins no sha256")
    assert len(server.requests) == n  # refused before any request
    refused(run_cli(["models", "fetch", "moved"], env=env), 1, "http://example.com/det.zip",
            "not https")
    assert cache_files(tmp_path) == []
    # the real catalogue: lightweight's pose model has no pin yet, so it is never fetched
    real = {**env, "PHOENIX_KEYPOINTS_MODELS_INDEX": "", "PHOENIX_KEYPOINTS_MODELS_URL": server.url}
    refused(run_cli(["models", "fetch", "lightweight"], env=real), 2, "pins no sha256",
            "rtmw-dw-l-m_simcc-cocktail14_270e-256x192_20231122.zip")
    assert len(server.requests) == n + 1
    refused(run_cli(["models", "fetch", "balanced"], env={**real, "PHOENIX_KEYPOINTS_MODELS_URL":
                                                         "http://example.com/"}), 2, "not https")


def test_a_bad_index_is_refused(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text(json.dumps(
        {"x": {"detector": {"path": "../../etc/x.zip", "onnx_sha256": None}, "pose": {}}}))
    proc = run_cli(["models", "fetch", "x"], env={"PHOENIX_KEYPOINTS_MODELS_INDEX":
                                                  str(tmp_path / "index.json")})
    refused(proc, 2, "cannot be read as a models index", "relative path")
    file = {"path": "a/b.zip", "onnx_sha256": "0" * 64}
    (tmp_path / "index.json").write_text(json.dumps(
        {"odd": {"detector": file, "pose": file, "detector_kind": "evil"},
         "alien": {"detector": file, "pose": file, "family": "holistic"}}))
    env = {"PHOENIX_KEYPOINTS_MODELS_INDEX": str(tmp_path / "index.json")}
    refused(run_cli(["models", "list"], env=env), 2, "family 'holistic' publishes no models here")
    (tmp_path / "index.json").write_text(json.dumps(
        {"odd": {"detector": file, "pose": file, "detector_kind": "evil"}}))
    refused(run_cli(["run", "--dataset", tmp_path, "--out", tmp_path / "r", "--models", "odd"],
                    env=env), 2, "--detector-kind 'evil': one of yolox, rtmdet")


# --- issue 46 item 4: a fetch goes only where the catalogue says -------------------------------------
@pytest.fixture
def listener() -> Iterator[Listener]:
    one = Listener()
    yield one
    one.sock.close()


@pytest.mark.slow
def test_redirects_go_only_to_public_https_and_within_the_users_own_origin(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], listener: Listener) -> None:
    """Each hop is checked as the first URL is not: https only, and every address its host
    resolves to public (the name is resolved, not judged); the listener on another loopback port
    hears nothing. A redirect inside the user's own base URL's origin is followed."""
    port = listener.port
    hostile = {"plain": (f"http://127.0.0.1:{port}/admin?x=1", "not https"),
               "tls-loopback": (f"https://127.0.0.1:{port}/admin?x=1", "loopback"),
               "by-name": (f"https://localhost:{port}/admin", "loopback"),
               "mapped": (f"https://[::ffff:127.0.0.1]:{port}/admin", "loopback"),
               "metadata": ("https://169.254.169.254/latest/meta-data/", "link-local"),
               "private": ("https://10.20.30.40/det.zip", "private")}
    variants = {name: {"detector": entry(f"sdk/{name}.zip", onnx_bytes["detector"]),
                       "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
                for name in [*hostile, "moved", "loop"]}
    env = publish(server, tmp_path, onnx_bytes, **variants)
    for name, (target, _) in hostile.items():
        server.redirect[f"/sdk/{name}.zip"] = target
    for name, (_, why) in hostile.items():
        proc = run_cli(["models", "fetch", name], env=env)
        refused(proc, 1, f"{server.url}sdk/{name}.zip", why, "Nothing was kept")
        assert cache_files(tmp_path) == [], (name, proc.stderr)
    assert listener.heard == []
    server.redirect["/sdk/moved.zip"] = f"{server.url}sdk/det.zip"  # the user's own origin
    server.redirect["/sdk/loop.zip"] = f"{server.url}sdk/loop.zip"
    refused(run_cli(["models", "fetch", "loop"], env=env), 1, "more than 5 redirects")
    moved = run_cli(["models", "fetch", "moved"], env=env)
    assert moved.returncode == 0, moved.stderr
    assert cache_files(tmp_path) == ["moved.onnx", "pose.onnx"]


def test_the_connection_goes_to_the_address_that_was_checked(monkeypatch) -> None:
    """DNS that answers a public address, then loopback (a rebinding attack): the name is resolved
    once, and the socket is opened to the address checked, never to the name again."""
    from phoenix_keypoints.jobs import download

    answers = iter(["93.184.216.34", "127.0.0.1", "127.0.0.1"])
    asked, connected = [], []

    def resolve(host, port, *args, **kwargs):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    def connect(address, *args, **kwargs):
        connected.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(download.socket, "getaddrinfo", resolve)
    monkeypatch.setattr(download.socket, "create_connection", connect)
    for key in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(download.DownloadFailed, match="refused"):
        download.download("https://rebind.test/x.zip", io.BytesIO(), 100, lambda n: lambda b: None)
    assert asked == ["rebind.test"] and connected == [("93.184.216.34", 443)]


@pytest.mark.parametrize("length", ["²", "1e3", "+7", "0x10", "-1"])
def test_a_content_length_that_is_no_ascii_number_is_refused(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], length: str) -> None:
    def odd(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", length)  # http.server writes it as latin-1
        h.end_headers()
        h.wfile.write(server.files["/sdk/pose.zip"])

    env = publish(server, tmp_path, onnx_bytes)
    server.raw["/sdk/det.zip"] = odd
    proc = run_cli(["models", "fetch", "tiny"], env=env)
    refused(proc, 2, "Content-Length", repr(length), "ASCII digits", "nothing kept")
    assert cache_files(tmp_path) == []


@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_server_trickling_bytes_is_cut_off_by_the_rate_floor(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], where: str) -> None:
    """A byte every 0.2 s, in the body or in a header line: the floor (here 1000 bytes a second after
    2 s, set by the environment; 32 KiB/s after 60 s by default) cuts the transfer off, where a
    per-read timeout alone never would."""
    def trickle(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        h.wfile.write(b"Content-Length: 100000\r\n\r\n" if where == "body" else b"X-Slow: ")
        for _ in range(300):  # a minute at most: the test's own bound
            h.wfile.write(b"x")  # a body, or one header line that never ends
            h.wfile.flush()
            time.sleep(0.2)

    env = publish(server, tmp_path, onnx_bytes)
    env |= {"PHOENIX_KEYPOINTS_FETCH_MIN_RATE": "1000", "PHOENIX_KEYPOINTS_FETCH_GRACE": "2"}
    server.raw["/sdk/det.zip"] = trickle
    began = time.monotonic()
    proc = run_cli(["models", "fetch", "tiny"], env=env, timeout=40)
    refused(proc, 1, "too slow", "PHOENIX_KEYPOINTS_FETCH_MIN_RATE", "Nothing was kept")
    assert time.monotonic() - began < 20
    assert cache_files(tmp_path) == []
    bad = run_cli(["models", "fetch", "tiny"], env={**env, "PHOENIX_KEYPOINTS_FETCH_GRACE": "٣"})
    refused(bad, 2, "PHOENIX_KEYPOINTS_FETCH_GRACE", "ASCII digits")


def _stalled_fetch(server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], sent_mib: int,
                   announced_mib: int) -> tuple[subprocess.Popen, Path, threading.Event, dict]:
    """`models fetch stalled` started against a server that sends `sent_mib` of an announced
    `announced_mib` and stalls until the event is set: the fetch, its .part once all but the
    writer's buffer (a few KiB) is on disk, the event, the environment."""
    release = threading.Event()
    stalled = {"detector": entry("sdk/stall.zip", onnx_bytes["detector"]),
               "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    env = publish(server, tmp_path, onnx_bytes, stalled=stalled)
    server.raw["/sdk/stall.zip"] = stalling(release, 60, sent=sent_mib * 2**20,
                                             length=announced_mib * 2**20)
    live = popen_cli(["models", "fetch", "stalled"], env=env)
    cache, parts = tmp_path / "cache", []
    for _ in range(300):
        parts = list(cache.glob(".stall.zip.*.part")) if cache.exists() else []
        if parts and parts[0].stat().st_size >= (sent_mib - 1) * 2**20:
            break
        time.sleep(0.1)
    assert parts and parts[0].stat().st_size >= (sent_mib - 1) * 2**20, live.poll()
    return live, parts[0], release, env


def _kill(live: subprocess.Popen, release: threading.Event, server: Server) -> None:
    """SIGKILL the fetch; the server then serves the detector's zip as stall.zip."""
    os.killpg(live.pid, signal.SIGKILL)
    live.wait()
    release.set()
    server.raw.clear()
    server.files["/sdk/stall.zip"] = server.files["/sdk/det.zip"]


def test_a_killed_fetch_leaves_a_part_the_next_fetch_sweeps_but_not_a_live_ones(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes]) -> None:
    """A fetch stalled after 9 MiB is a live one: another fetch into the same cache leaves its
    .part alone (it holds a lock on it). Killed with SIGKILL, its .part stays; the next fetch
    removes it. (The file on disk lags what arrived by the writer's buffer, a few KiB: 8 MiB on
    disk is a fetch well into the stalled body.)"""
    live, part, release, env = _stalled_fetch(server, tmp_path, onnx_bytes, 9, 10)
    try:
        os.utime(part, (time.time() - 60, time.time() - 60))  # old, but held
        other = run_cli(["models", "fetch", "tiny"], env=env)
        assert other.returncode == 0, other.stderr
        assert part.exists()  # a live fetch's file is left alone
    finally:
        _kill(live, release, server)
    assert part.exists() and part.stat().st_size >= 8 * 2**20  # what SIGKILL leaves
    os.utime(part, (time.time() - 60, time.time() - 60))
    after = run_cli(["models", "fetch", "stalled"], env=env)
    assert after.returncode == 0, after.stderr
    assert "left by a fetch that did not finish" in after.stderr, after.stderr
    assert cache_files(tmp_path) == ["det.onnx", "pose.onnx", "stall.onnx"]


def test_a_fetch_killed_a_moment_ago_is_swept_by_the_next_one(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes]) -> None:
    """SIGKILLed once 4 MiB of 16 had arrived, the same command at once: the retry succeeded and
    left the dead fetch's .part in the cache, since the sweep skipped a .part younger than 2 s
    (issue 52 item 6). A .part is named so only once its fetch holds its lock now, so a free lock
    is a dead fetch's, whatever its age. Its time is set ahead of the clock: written "just now"
    however long the retry's interpreter takes to start on a loaded host (or a file server whose
    clock runs ahead)."""
    live, part, release, env = _stalled_fetch(server, tmp_path, onnx_bytes, 4, 16)
    _kill(live, release, server)
    assert part.exists() and part.stat().st_size >= 3 * 2**20
    os.utime(part, (time.time() + 30, time.time() + 30))
    after = run_cli(["models", "fetch", "stalled"], env=env)
    assert after.returncode == 0, after.stderr
    assert f"removed {part}" in after.stderr and "did not finish" in after.stderr, after.stderr
    assert cache_files(tmp_path) == ["pose.onnx", "stall.onnx"]


def test_proxies_are_taken_as_pip_takes_them_and_never_for_loopback(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], listener: Listener) -> None:
    """http_proxy, https_proxy, all_proxy set, no_proxy empty: the loopback server is fetched
    directly, the proxy hears nothing. An https URL goes through https_proxy as a CONNECT (the
    proxy refuses it here), unless no_proxy names its host."""
    env = publish(server, tmp_path, onnx_bytes)
    proxy = f"http://127.0.0.1:{listener.port}"
    env |= {k: proxy for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                               "HTTPS_PROXY", "ALL_PROXY")} | {"no_proxy": "", "NO_PROXY": ""}
    proc = run_cli(["models", "fetch", "tiny"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert listener.heard == [] and cache_files(tmp_path) == ["det.onnx", "pose.onnx"]

    refusing = Listener(answer=b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    env |= {"https_proxy": f"http://127.0.0.1:{refusing.port}",
            "PHOENIX_KEYPOINTS_MODELS_URL": "https://models.invalid/", "PHOENIX_KEYPOINTS_MODELS_DIR":
            str(tmp_path / "other")}
    through = run_cli(["models", "fetch", "tiny"], env=env)
    refused(through, 1, "https://models.invalid/sdk/det.zip", "403")
    assert [h.split(b"\r\n")[0] for h in refusing.heard] == [b"CONNECT models.invalid:443 HTTP/1.0"]
    bypass = run_cli(["models", "fetch", "tiny"], env={**env, "no_proxy": "models.invalid"})
    refused(bypass, 1, "models.invalid cannot be resolved")
    assert len(refusing.heard) == 1
    refusing.sock.close()


def test_a_zip_whose_central_directory_is_too_large_is_refused_unread(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes]) -> None:
    """No zip_sha256 pinned (a custom index): the end record's entry count and size are read
    before zipfile reads the directory (3,000,000 entries took it 1.2 GB); 20,000 here."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("big/end2end.onnx", onnx_bytes["detector"])
        for i in range(20_000):
            z.writestr(f"big/{i}", b"")
    big = {"detector": entry("sdk/big.zip", onnx_bytes["detector"]),
           "pose": entry("sdk/pose.zip", onnx_bytes["pose"])}
    env = publish(server, tmp_path, onnx_bytes, big=big)
    server.files["/sdk/big.zip"] = buf.getvalue()
    proc = run_cli(["models", "fetch", "big"], env=env)
    refused(proc, 2, "central directory says 20001 entries", "refused unread")
    assert cache_files(tmp_path) == []


def test_the_directory_is_sized_where_zipfile_reads_it_zip64_too(tmp_path: Path) -> None:
    """70,000 entries: zipfile writes zip64 end records (the 16-bit count says 0xFFFF); the sizes
    read are those zipfile then reads, as its own infolist and directory bear out."""
    from phoenix_keypoints.jobs.models import directory_of

    path = tmp_path / "wide.zip"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(70_000):
            z.writestr(f"{i}", b"")
    with zipfile.ZipFile(path) as z:
        entries = len(z.infolist())
    data = path.read_bytes()  # the directory: from its first entry to the zip64 end record
    assert directory_of(path) == (entries, data.rindex(b"PK\x06\x06") - data.index(b"PK\x01\x02"))
    assert entries == 70_000 and data[-12:-10] == b"\xff\xff"  # the 16-bit count could not say it


# --- issue 48 item 5: models by name for each family rtmlib publishes --------------------------------
@pytest.mark.slow
def test_run_models_name_chooses_the_family_point_set_and_detector_kind(
        server: Server, tmp_path: Path, onnx_bytes: dict[str, bytes], sample_root: Path) -> None:
    """Names of a custom index as the published ones are: a 3D pair (family wholebody3d, its
    pose model a bare .onnx, as rtmlib's RTMW3D-x is), a hand pair (RTMDet detector, 21 points)
    and a body pair (17 points). Fetched, then `run --models NAME` without --estimator: each run
    is of the name's family, point set and detector kind."""
    from tiny_onnx import pose_model, rtmdet_models, tiny_models

    tiny = tiny_models(tmp_path / "m")
    hand_det = rtmdet_models(tmp_path / "m")["rtmdet"].read_bytes()
    hand = pose_model(tmp_path / "m", "simcc", 21).read_bytes()
    body = pose_model(tmp_path / "m", "simcc", 17).read_bytes()
    pose3d = tiny["pose3d"].read_bytes()
    server.files |= {"/sdk/hdet.zip": shipped_zip(hand_det, "rtmdet"),
                     "/sdk/hand.zip": shipped_zip(hand, "hand5"),
                     "/sdk/body.zip": shipped_zip(body, "body7"), "/hf/rtmw3d.onnx": pose3d}
    det = entry("sdk/det.zip", onnx_bytes["detector"])
    names = {"tiny3d": {"family": "wholebody3d", "detector": det,
                        "pose": entry("hf/rtmw3d.onnx", pose3d)},
             "tinyhand": {"detector": entry("sdk/hdet.zip", hand_det),
                          "pose": entry("sdk/hand.zip", hand), "point_set": "hand21",
                          "detector_kind": "rtmdet"},
             "tinybody": {"detector": det, "pose": entry("sdk/body.zip", body), "point_set": "coco"}}
    env = publish(server, tmp_path, onnx_bytes, **names)
    listed = run_cli(["models", "list"], env=env)
    assert listed.returncode == 0, listed.stderr
    assert "wholebody3d, its default point set (run --models NAME: --estimator wholebody3d):" \
        in listed.stdout, listed.stdout
    assert "  tinyhand: tinyhand, --detector-kind rtmdet" in listed.stdout, listed.stdout
    expect = {"tiny3d": ("wholebody3d", None, None), "tinyhand": ("wholebody", "hand21", "rtmdet"),
              "tinybody": ("wholebody", "coco", None)}
    for name, (fam, points, kind) in expect.items():
        got = run_cli(["models", "fetch", name], env=env)
        assert got.returncode == 0, got.stderr
        out = tmp_path / f"run-{name}"
        proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--models", name, "--videos",
                        "cameraman-1", "--workers", "1"], env=env)
        assert proc.returncode == 0, proc.stderr
        options = json.loads((out / "run.json").read_text())["options"]
        assert fam in options, options.keys()
        assert options[fam].get("point_set") == points and \
            options[fam]["detector"].get("kind") == kind, options[fam]
    assert cache_files(tmp_path)[:1] == ["body.onnx"] and "rtmw3d.onnx" in cache_files(tmp_path)
    refused(run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "x", "--estimator",
                     "wholebody", "--models", "tiny3d"], env=env), 2, "--models NAME chooses the family",
            "tiny3d is models of --estimator wholebody3d")


def test_the_published_names_cover_rtmlibs_solutions_and_refuse_what_no_pin_covers(
        tmp_path: Path) -> None:
    """rtmlib 0.0.16's Wholebody, Body, BodyWithFeet, Hand and Wholebody3d modes by name, listed
    by family and point set; a name one of whose files no public source pins a sha256 for is
    refused before any request, naming that file and how to pass it by hand."""
    env = {"PHOENIX_KEYPOINTS_MODELS_INDEX": "", "PHOENIX_KEYPOINTS_MODELS_URL": "",
           "PHOENIX_KEYPOINTS_MODELS_DIR": str(tmp_path / "cache")}
    listed = run_cli(["models", "list"], env=env)
    assert listed.returncode == 0, listed.stderr
    for line in ("wholebody, coco-wholebody (run --models NAME: --estimator wholebody):",
                 "wholebody, coco (run --models NAME: --estimator wholebody):",
                 "wholebody, halpe26 (run --models NAME: --estimator wholebody):",
                 "wholebody, hand21 (run --models NAME: --estimator wholebody):",
                 "  body-balanced: rtmlib Body, mode balanced",
                 "  body-with-feet-balanced: rtmlib BodyWithFeet, mode balanced",
                 "  hand-lightweight: rtmlib Hand, mode lightweight, --detector-kind rtmdet",
                 "  wholebody3d-balanced: rtmlib Wholebody3d, mode balanced"):
        assert line in listed.stdout, (line, listed.stdout)
    for name, file, flags in (
            ("hand-lightweight", "rtmpose-m_simcc-hand5_pt-aic-coco_210e-256x256-74fb594_20230320.zip",
             "--estimator wholebody --point-set hand21 --detector-kind rtmdet"),
            ("wholebody3d-balanced", "https://huggingface.co/Soykaf/RTMW3D-x/resolve/main/onnx/"
             "rtmw3d-x_8xb64_cocktail14-384x288-b0a0eab7_20240626.onnx", "--estimator wholebody3d"),
            ("body-with-feet-lightweight", "halpe26_700e-256x192-7f134165", "--point-set halpe26")):
        refused(run_cli(["models", "fetch", name], env=env), 2, "pins no sha256", file, flags,
                "--pose-model")
    refused(run_cli(["run", "--dataset", tmp_path, "--out", tmp_path / "r", "--models",
                     "body-balanced"], env=env), 2, "`phoenix-keypoints models fetch body-balanced`")
    assert not (tmp_path / "cache").exists()


def test_the_catalogue_reads_the_built_in_publishers_and_no_plugin(monkeypatch) -> None:
    """A family registered from outside (a plugin's entry) is neither listed as a publisher nor
    imported by the catalogue: its module here does not even exist."""
    from phoenix_keypoints.extract.keypoints import estimator
    from phoenix_keypoints.jobs import models

    monkeypatch.setitem(estimator.FAMILIES, "aplugin", "no_such_plugin_module.family:Family")
    assert list(models.publishers()) == ["wholebody", "wholebody3d"]
    names = models.catalogue()
    assert {"balanced", "body-balanced", "hand-lightweight", "wholebody3d-balanced"} <= set(names)
    assert {m.family for m in names.values()} == {"wholebody", "wholebody3d"}
