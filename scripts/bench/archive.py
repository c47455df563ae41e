#!/usr/bin/env python3
"""Reading the dataset from its tar.gz in place, against the unpacked folder; and the index at scale.

run: a workload of real frames (scripts/bench/workload.py: the shared sample's two signing videos copied
  under many names) as a folder and packed as the release is (`PHOENIX-2014-T-release-v3/
  PHOENIX-2014-T/...`, every member a real copy), then `phoenix-keypoints run` with default options
  on each, alternated (folder, archive, archive, folder, ...). Wall time per run, and each worker
  process's peak RSS (sampled from /proc). Ratio: archive frames/s over folder frames/s.
index: the index build alone on that archive (MB/s, members/s, peak RSS), and one process that
  loads the saved index and reads every member in archive order (what a worker holds).
full: a fabricated tar.gz with the release's 947,756 member names (from the release index's
  per-video frame counts, in (split, name, frame) order) and tiny incompressible members (a 1x1
  PNG and 1 KiB of random bytes each): the
  index build, the corpus read from it (detection, listing every video's frames), and what loading
  the saved index costs one process (time, RSS).

    .venv/bin/python scripts/bench/archive.py --copies 25 --repeat 2 --full --save archive.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from common import REPO, SHARED_INDEX, loadavg, machine, rss_mib, save_json, tree_pids  # noqa: E402
from workload import build_workload  # noqa: E402

TOP = "PHOENIX-2014-T-release-v3/PHOENIX-2014-T"


def pack(tree: Path, dest: Path) -> Path:
    """tree packed under TOP, symlinked folders followed and every frame stored as itself."""
    with tarfile.open(dest, "w:gz", compresslevel=6, dereference=True) as tf:
        tf.add(tree, arcname=TOP)
    return dest


def _worker_peaks(pid: int, stop: threading.Event, peaks: dict[int, float]) -> None:
    while not stop.is_set():
        for p in tree_pids(pid):
            if p != pid:
                peaks[p] = max(peaks.get(p, 0.0), rss_mib(p) or 0.0)
        stop.wait(0.25)


def _cpu() -> float:
    """CPU seconds of finished children (the coordinator and, through it, its workers)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_run(dataset: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "phoenix_keypoints", "run", "--dataset", str(dataset),
           "--out", str(out)]
    peaks: dict[int, float] = {}
    stop = threading.Event()
    cpu0 = _cpu()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    sampler = threading.Thread(target=_worker_peaks, args=(proc.pid, stop, peaks), daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.monotonic() - t0
    cpu = _cpu() - cpu0
    stop.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"run on {dataset} exited {proc.returncode}:\n{err[-2000:]}")
    rows = json.loads((out / "run.json").read_text())["merge"]["rows"]
    return {"wall_s": round(wall, 2), "frames": rows, "fps": round(rows / wall, 2),
            "cpu_s": round(cpu, 1), "cpu_ms_per_frame": round(1000 * cpu / rows, 1),
            "worker_peak_rss_mib": sorted(round(v, 1) for v in peaks.values())[-2:],
            "load_1min": loadavg()[0]}


def bench_runs(folder: Path, tgz: Path, work: Path, repeat: int) -> dict:
    runs: dict[str, list[dict]] = {"folder": [], "archive": []}
    order = ["folder", "archive"]
    for rep in range(repeat):
        for kind in order if rep % 2 == 0 else order[::-1]:
            r = timed_run(folder if kind == "folder" else tgz, work / f"out-{kind}")
            runs[kind].append(r)
            print(kind, r, flush=True)
    fps = {k: sum(r["fps"] for r in v) / len(v) for k, v in runs.items()}
    cpu = {k: sum(r["cpu_s"] for r in v) for k, v in runs.items()}
    return {"runs": runs, "archive_over_folder": round(fps["archive"] / fps["folder"], 3),
            "archive_over_folder_by_cpu": round(cpu["folder"] / cpu["archive"], 3)}


def _child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


_HWM = """
def hwm(key="VmHWM"):  # this process's own peak (ru_maxrss keeps the parent's across exec)
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
"""

_BUILD = _HWM + """
import json, time
from pathlib import Path
from phoenix_keypoints.extract.sources import archive

def full_windows():  # the same seek points in rapidgzip's indexed_gzip format (32 KiB windows)
    import io, rapidgzip
    if archive.archive_format({path!r}) != "tar.gz":
        return None
    with rapidgzip.RapidgzipFile({path!r}, parallelization=2, chunk_size=archive.GZIP_CHUNK) as f:
        while f.read(64 << 20):
            pass
        buf = io.BytesIO()
        f.export_index(buf, rapidgzip.IndexFormat.INDEXED_GZIP)
        return len(buf.getvalue())

t0 = time.perf_counter()
ix = archive.build_index(Path({path!r}))
t = time.perf_counter() - t0
archive.save_index(ix, Path({folder!r}))
peak = hwm()
print(json.dumps({{"seconds": round(t, 2), "members": ix.members.num_rows, "bytes": ix.size,
                  "MB_per_s": round(ix.size / 1e6 / t, 1),
                  "members_per_s": round(ix.members.num_rows / t),
                  "index_bytes": sum(p.stat().st_size for p in Path({folder!r}).iterdir()),
                  "gzip_index_bytes": (Path({folder!r}) / "gzip.index").stat().st_size,
                  "gzip_index_bytes_full_windows": full_windows(), "peak_rss_mib": peak}}))
"""

_READ = _HWM + """
import json, time
from pathlib import Path
from phoenix_keypoints.extract.sources import archive
base = hwm("VmRSS")
t0 = time.perf_counter()
archive.set_index_dir(Path({folder!r}), write=False, build=False)
ix = archive.open_index(Path({path!r}))
files = [int(i) for i in (ix.kind == archive.KIND_FILE).nonzero()[0][:{limit}]]
for i in files[:: max(1, len(files) // 1000)]:  # folders looked up as a worker's videos are
    ix.find(ix.members["name"][i].as_py())
loaded = time.perf_counter() - t0
with_index = hwm("VmRSS")
r = archive.reader(ix)
t1 = time.perf_counter()
n = sum(len(r.read(i)[0]) for i in files[:{limit}])
t = time.perf_counter() - t1
r.close()
print(json.dumps({{"load_index_s": round(loaded, 2), "read_members": min(len(files), {limit}),
                  "read_MB_per_s": round(n / 1e6 / t, 1), "rss_imports_mib": base,
                  "rss_index_loaded_mib": with_index, "peak_rss_mib": hwm()}}))
"""


def bench_index(tgz: Path, work: Path, limit: int = 10**9) -> dict:
    folder = work / "index"
    shutil.rmtree(folder, ignore_errors=True)
    build = _child(_BUILD.format(path=str(tgz), folder=str(folder)))
    read = _child(_READ.format(path=str(tgz), folder=str(folder), limit=limit))
    return {"build": build, "worker": read}


PAYLOAD = 1024  # random bytes after a 1x1 PNG: the member sizes are tiny, the data incompressible
_PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c"
                     "4944415408d763f8ffff3f0005fe02fea7d6a4b20000000049454e44ae426082")


def fabricate(dest: Path) -> dict:
    """The release's member names, one tiny PNG each, corpus csv files from the release index."""
    import io

    t0 = time.monotonic()
    members = 0
    with tarfile.open(dest, "w:gz", compresslevel=6) as tf:
        for csv in sorted(SHARED_INDEX.glob("*.corpus.csv")):
            tf.add(csv, arcname=f"{TOP}/annotations/manual/{csv.name}")
            members += 1
        for split in ("dev", "test", "train"):
            lines = (SHARED_INDEX / f"PHOENIX-2014-T.{split}.frame_counts.tsv").read_text().splitlines()
            for line in sorted(lines[1:]):
                _, name, n, _ = line.split("\t")
                for i in range(1, int(n) + 1):
                    ti = tarfile.TarInfo(f"{TOP}/features/fullFrame-210x260px/{split}/{name}/"
                                         f"images{i:04d}.png")
                    data = _PNG + os.urandom(PAYLOAD)  # as incompressible as a real frame
                    ti.size, ti.mtime = len(data), 1_400_000_000
                    tf.addfile(ti, io.BytesIO(data))
                    tf.members.clear()  # tarfile keeps every header written otherwise
                    members += 1
    return {"members": members, "bytes": dest.stat().st_size,
            "seconds_to_write": round(time.monotonic() - t0, 1)}


_DISCOVER = _HWM + """
import json, time
from pathlib import Path
from phoenix_keypoints.extract.sources import archive
from phoenix_keypoints.extract.corpora import discover
archive.set_index_dir(Path({folder!r}), write=False, build=False)
t0 = time.perf_counter()
ds = discover(Path({path!r}))
print(json.dumps({{"discover_s": round(time.perf_counter() - t0, 2), "videos": len(ds.videos),
                  "frames": ds.num_frames, "problems": sum(1 for v in ds.videos if v.problem),
                  "peak_rss_mib": hwm()}}))
"""


def bench_full(work: Path) -> dict:
    dest = work / "fabricated-release.tar.gz"
    made = fabricate(dest)
    print("fabricated", made, flush=True)
    res = {"fabricated": made, **bench_index(dest, work, limit=20_000)}
    print("index", res, flush=True)
    res["discover"] = _child(_DISCOVER.format(path=str(dest), folder=str(work / "index")))
    print("discover", res["discover"], flush=True)
    dest.unlink()
    return res


_WORKER_INDEX = _HWM + """
import json, time
from pathlib import Path
import pyarrow as pa
from phoenix_keypoints.extract.sources import archive
wanted = json.loads(Path({wanted!r}).read_text())
r0 = hwm("VmRSS")
t0 = time.perf_counter()
archive.set_index_dir(Path({folder!r}), write=False, build=False, lazy={lazy!r})
ix = archive.open_index(Path({path!r}))
loaded = hwm("VmRSS")
t1 = time.perf_counter()
found = sum(ix.find(name) is not None for name in wanted)  # a worker's share of folders
print(json.dumps({{"lazy": {lazy!r}, "rss_imports_mib": r0, "rss_index_loaded_mib": loaded,
                  "rss_after_lookups_mib": hwm("VmRSS"), "folders_looked_up": len(wanted),
                  "found": found, "load_s": round(t1 - t0, 2),
                  "ms_per_folder": round(1000 * (time.perf_counter() - t1) / len(wanted), 2)}}))
"""


def worker_index_memory(work: Path) -> dict:
    """The index of the release's 947,759 names alone (members.parquet written directly, a 1-byte
    stand-in archive): what a worker (lazy: a folder's members read when looked up) and a
    coordinator (every member loaded) hold after looking up the frames of 190 folders; and a zip
    of those names read by a worker through zipfile or through the index."""
    import numpy as np
    import pyarrow as pa

    from phoenix_keypoints.extract.sources import archive

    names = [f"{TOP}/annotations/manual/{c.name}" for c in sorted(SHARED_INDEX.glob("*.corpus.csv"))]
    for split in ("dev", "test", "train"):
        lines = (SHARED_INDEX / f"PHOENIX-2014-T.{split}.frame_counts.tsv").read_text().splitlines()
        for line in sorted(lines[1:]):
            _, name, n, _ = line.split("\t")
            names += [f"{TOP}/features/fullFrame-210x260px/{split}/{name}/images{i:04d}.png"
                      for i in range(1, int(n) + 1)]
    n = len(names)
    members = pa.table({"name": names, "offset": np.arange(n, dtype=np.int64),
                        "size": np.ones(n, np.int64), "mtime_ns": np.zeros(n, np.int64),
                        "kind": np.zeros(n, np.int8)}, schema=archive._MEMBERS_SCHEMA)
    stand_in = work / "stand-in.tar.gz"
    stand_in.write_bytes(b"x")
    st = stand_in.stat()
    archive.save_index(archive.ArchiveIndex(stand_in.absolute(), "tar.gz", st.st_size,
                                            st.st_mtime_ns, members), work / "index-only")
    wanted = work / "wanted.json"
    wanted.write_text(json.dumps(names[::5000]))
    out = {mode: _child(_WORKER_INDEX.format(path=str(stand_in), folder=str(work / "index-only"),
                                             wanted=str(wanted), lazy=mode == "worker"))
           for mode in ("worker", "coordinator")}
    out["zip"] = zip_worker_cost(work, names)
    return out


_ZIP_WORKER = _HWM + """
import json, time, zipfile
from pathlib import Path
from phoenix_keypoints.extract.sources import archive
wanted = json.loads(Path({wanted!r}).read_text())
r0 = hwm("VmRSS")
t0 = time.perf_counter()
if {mode!r} == "zipfile":  # what a worker paid before: the central directory parsed
    with zipfile.ZipFile({path!r}) as zf:
        n = sum(len(zf.read(name)) for name in wanted)
else:  # a worker now: the lazy index, members read from their local headers
    archive.set_index_dir(Path({folder!r}), write=False, build=False, lazy=True)
    ix = archive.open_index(Path({path!r}))
    r = archive.reader(ix)
    n = sum(len(r.read(ix.find(name))[0]) for name in wanted)
    r.close()
print(json.dumps({{"mode": {mode!r}, "seconds": round(time.perf_counter() - t0, 2), "bytes": n,
                  "rss_before_mib": r0, "rss_after_mib": hwm("VmRSS")}}))
"""


def zip_worker_cost(work: Path, names: list[str]) -> dict:
    """A stored zip holding the release's names (64 bytes each): a worker reading 190 of them
    through zipfile (central directory parsed) against the tool's reader (the run's index)."""
    import zipfile

    from phoenix_keypoints.extract.sources import archive

    dest = work / "names.zip"
    t0 = time.monotonic()
    with zipfile.ZipFile(dest, "w") as zf:
        for name in names:
            zf.writestr(name, b"x" * 64)
    written = round(time.monotonic() - t0, 1)
    archive.save_index(archive.build_index(dest), work / "zip-index")
    wanted = work / "wanted.json"
    out = {"members": len(names), "zip_bytes": dest.stat().st_size, "seconds_to_write": written}
    for mode in ("zipfile", "index"):
        out[mode] = _child(_ZIP_WORKER.format(path=str(dest), folder=str(work / "zip-index"),
                                              wanted=str(wanted), mode=mode))
    dest.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=25, help="copies of the two sample videos")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each, alternated (0: none)")
    ap.add_argument("--full", action="store_true", help="also the fabricated full-scale archive")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-archive"))
    ap.add_argument("--save", default="")
    ap.add_argument("--worker-index", action="store_true",
                    help="only a worker's index memory for the release's names (no archive)")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.worker_index:
        res = {"machine": machine(), "worker_index": worker_index_memory(a.work)}
        print(res["worker_index"])
        if a.save:
            save_json(a.save, res)
        return
    res: dict = {"machine": machine(), "load_before": loadavg()}
    folder = a.work / "tree" / "PHOENIX-2014-T"
    res["workload"] = build_workload(folder, a.copies)
    tgz = pack(folder, a.work / "PHOENIX-2014-T-release-v3.tar.gz")
    res["archive_bytes"] = tgz.stat().st_size
    res["index"] = bench_index(tgz, a.work)
    print("index", res["index"], flush=True)
    if a.repeat:
        res["run"] = bench_runs(folder, tgz, a.work, a.repeat)
    if a.full:
        res["full"] = bench_full(a.work)
    res["load_after"] = loadavg()
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))
    if a.save:
        save_json(a.save, res)


if __name__ == "__main__":
    main()
