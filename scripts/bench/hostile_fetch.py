"""What each hostile server or cache costs `models fetch` (issue 46 item 4): wall seconds, peak RSS,
the exit and what a listener on another loopback port heard, against a real HTTP server on
127.0.0.1 serving tests/tiny_onnx.py's models zipped as OpenMMLab's are (a custom index, as
tests/test_models_fetch.py builds it). Default settings (the rate floor: 32 KiB/s after 60 s),
so the trickling server's figure is what a user would wait.

    python scripts/bench/hostile_fetch.py [--name hostile-fetch.json]   # under docs/results/
    python scripts/bench/hostile_fetch.py --only zip   # one case (a name's start)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import machine, save_json  # noqa: E402
from helpers import sha256_bytes as sha  # noqa: E402
from helpers import shipped_zip  # noqa: E402
from local_http import Listener, Server, stalling  # noqa: E402
from tiny_onnx import tiny_models  # noqa: E402


def wide_zip(onnx: bytes, entries: int) -> bytes:
    """A zip whose central directory lists `entries` more members (each pointing at the one real
    local header), zip64 end records: what zipfile holds in memory grows with them."""
    name = b"m/end2end.onnx"
    crc = zipfile.crc32(onnx)
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(onnx), len(onnx),
                        len(name), 0) + name + onnx

    def central(n: bytes, size: int, c: int) -> bytes:
        return struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, c, size, size, len(n),
                           0, 0, 0, 0, 0, 0) + n
    cd = bytearray(central(name, len(onnx), crc))
    for i in range(entries):
        cd += central(b"%07d" % i, 0, 0)
    at, total = len(local), entries + 1
    z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, total, total, len(cd), at)
    loc = struct.pack("<4sLQL", b"PK\x06\x07", 0, at + len(cd), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return local + bytes(cd) + z64 + loc + end


def fetch(name: str, env: dict[str, str], timeout: float = 900) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "phoenix_keypoints",
                        "models", "fetch", name], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **env})
    lines = p.stderr.strip().splitlines()
    said = [x for x in lines[:-1] if x.startswith(("error", "note"))]
    return {"exit": p.returncode, "wall_s": round(time.monotonic() - t0, 2),
            "peak_rss_mib": int(lines[-1]) // 1024, "said": said[-1][:240] if said else ""}


def trickle(h: BaseHTTPRequestHandler) -> None:
    h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(600):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(1)


def odd_length(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "²")
    h.end_headers()


def setup(tmp: Path, server: Server, listener: Listener) -> tuple[dict[str, str], dict]:
    m = tiny_models(tmp / "m")
    det, pose = m["detector"].read_bytes(), m["pose"].read_bytes()
    server.files |= {"/det.zip": shipped_zip(det, "m"), "/pose.zip": shipped_zip(pose, "m"),
                     "/wide.zip": wide_zip(det, 3_000_000)}
    server.raw |= {"/slow.zip": trickle, "/odd.zip": odd_length}
    server.redirect |= {"/plain.zip": f"http://127.0.0.1:{listener.port}/admin?x=1",
                        "/named.zip": f"https://localhost:{listener.port}/admin"}
    pose_entry = {"path": "pose.zip", "input_hw": [96, 128], "onnx_sha256": sha(pose)}
    index = {name: {"detector": {"path": f"{name}.zip", "input_hw": [96, 128],
                                 "onnx_sha256": sha(det)}, "pose": pose_entry}
             for name in ("det", "wide", "slow", "odd", "plain", "named")}
    (tmp / "index.json").write_text(json.dumps(index))
    env = {"PHOENIX_KEYPOINTS_MODELS_INDEX": str(tmp / "index.json"),
           "PHOENIX_KEYPOINTS_MODELS_URL": server.url, "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"}
    return env, {"wide_zip_bytes": len(server.files["/wide.zip"])}


def killed_part(tmp: Path, env: dict[str, str], server: Server, sent_mib: int = 9,
                announced_mib: int = 10, wait_s: float = 2.5) -> dict:
    """A fetch stalled after `sent_mib` of `announced_mib`, killed with SIGKILL once they are on
    disk; the next fetch, `wait_s` later: its cost, what it says, what is left."""
    hold = threading.Event()
    server.raw["/det.zip"] = stalling(hold, 120, sent=sent_mib * 2**20, length=announced_mib * 2**20)
    cache = tmp / f"killed-{sent_mib}"
    env = {**env, "PHOENIX_KEYPOINTS_MODELS_DIR": str(cache)}
    p = subprocess.Popen([sys.executable, "-m", "phoenix_keypoints", "models", "fetch", "det"],
                         env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    while not any(f.stat().st_size >= sent_mib * 2**20 for f in cache.glob(".*.part")):
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    hold.set()
    left = sum(f.stat().st_size for f in cache.glob(".*.part"))
    del server.raw["/det.zip"]
    time.sleep(wait_s)
    out = fetch("det", env)
    return out | {"left_by_sigkill_bytes": left,
                  "left_after_bytes": sum(f.stat().st_size for f in cache.glob(".*.part"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="hostile-fetch.json", help="file name under docs/results/")
    ap.add_argument("--only", default="", help="run only the cases whose name starts so")
    args = ap.parse_args()
    server, listener, proxy = Server(), Listener(), Listener()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        env, facts = setup(tmp, server, listener)
        cases = {"clean": ("det", {}),
                 "redirect to http://127.0.0.1:PORT/admin?x=1": ("plain", {}),
                 "redirect to https://localhost:PORT/admin": ("named", {}),
                 "Content-Length: ²": ("odd", {}),
                 "1 byte a second": ("slow", {}),
                 "http(s)_proxy set, no_proxy empty, loopback index": (
                     "det", {k: f"http://127.0.0.1:{proxy.port}" for k in
                             ("http_proxy", "https_proxy", "all_proxy")} | {"no_proxy": "",
                                                                             "NO_PROXY": ""}),
                 "zip of 3,000,000 central-directory entries, no zip pin": ("wide", {})}
        for k, (case, (name, extra)) in enumerate(cases.items()):
            if not case.startswith(args.only):
                continue
            cache = {"PHOENIX_KEYPOINTS_MODELS_DIR": str(tmp / f"cache-{k}")}
            results[case] = fetch(name, {**env, **extra, **cache}) | {
                "listener_heard": len(listener.heard), "proxy_heard": len(proxy.heard)}
            print(case, results[case], flush=True)
        if "SIGKILL".startswith(args.only) or not args.only:
            for case, how in (("a SIGKILLed fetch's 9 MiB .part, then a fetch", (9, 10, 2.5)),
                              ("SIGKILLed at 4 MiB of 16, then a fetch at once", (4, 16, 0))):
                results[case] = killed_part(tmp, env, server, *how)
                print(case, results[case], flush=True)
    save_json(args.name, {"machine": machine(), **facts, "cases": results})


if __name__ == "__main__":
    main()
