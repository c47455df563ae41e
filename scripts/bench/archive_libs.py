"""Which library seeks inside a .tar.gz for us: rapidgzip, indexed_gzip or ratarmountcore.

For each, in a fresh process: build the index of a tar.gz (gzip seek points, plus every member's
data offset: a tarfile walk over the library's stream for the first two, ratarmountcore's own
SQLite index for the third), then, in another fresh process that only imports the saved index (as
a worker does after spawn), read every member in archive order and 500 members in random order.
Reports seconds, MB/s and members/s, the index's size on disk, and each process's peak RSS.

    pip install indexed_gzip ratarmountcore   # not dependencies of the project; rapidgzip is
    python scripts/bench/archive_libs.py ARCHIVE.tar.gz [--save archive-libs.json]

A library that is not installed is skipped and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import loadavg, machine, save_json  # noqa: E402

LIBS = ("rapidgzip", "indexed_gzip", "ratarmountcore")
RANDOM_READS = 500


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _open_gz(lib: str, path: str, index: str | None):
    if lib == "rapidgzip":
        import rapidgzip

        f = rapidgzip.RapidgzipFile(path, parallelization=1 if index else os.cpu_count())
        if index:
            with open(index, "rb") as fi:
                f.import_index(fi)
        return f
    import indexed_gzip

    f = indexed_gzip.IndexedGzipFile(path, spacing=4 * 2**20)
    if index:
        f.import_index(filename=index)
    return f


def _members_via_tarfile(f) -> list[tuple[str, int, int]]:
    with tarfile.open(fileobj=f, mode="r:") as tf:
        return [(m.name, m.offset_data, m.size) for m in tf if m.isfile()]


def build(lib: str, path: str, index: str) -> dict:
    t0 = time.perf_counter()
    if lib == "ratarmountcore":
        from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar

        tar = SQLiteIndexedTar(path, writeIndex=True, indexFilePath=index,
                               parallelization=os.cpu_count())
        members = sum(1 for _ in _ratar_names(tar))
        tar.close()
    else:
        f = _open_gz(lib, path, None)
        names = _members_via_tarfile(f)
        members = len(names)
        if lib == "rapidgzip":
            import rapidgzip

            with open(index, "wb") as fo:  # the format the tool writes (sparse, compressed windows)
                f.export_index(fo, rapidgzip.IndexFormat.GZTOOL)
        else:
            f.export_index(filename=index)
        f.close()
        Path(index + ".members.json").write_text(json.dumps(names))
    return {"seconds": time.perf_counter() - t0, "members": members, "peak_rss_mib": _peak_mib()}


def _ratar_names(tar) -> list[str]:
    out, todo = [], ["/"]
    while todo:
        d = todo.pop()
        for name, info in (tar.list(d) or {}).items():
            p = d.rstrip("/") + "/" + name
            if stat.S_ISDIR(info.mode):
                todo.append(p)
            else:
                out.append(p)
    return out


def read(lib: str, path: str, index: str) -> dict:
    base = _peak_mib()
    t0 = time.perf_counter()
    if lib == "ratarmountcore":
        from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar

        tar = SQLiteIndexedTar(path, indexFilePath=index, writeIndex=False)
        infos = [(p, tar.lookup(p)) for p in _ratar_names(tar)]
        infos.sort(key=lambda pi: pi[1].userdata[-1].offset)  # archive order
        opened = time.perf_counter() - t0

        def get(i: int) -> bytes:
            with tar.open(infos[i][1]) as fh:
                return fh.read()
        n = len(infos)
    else:
        f = _open_gz(lib, path, index)
        members = json.loads(Path(index + ".members.json").read_text())
        opened = time.perf_counter() - t0

        def get(i: int) -> bytes:
            f.seek(members[i][1])
            return f.read(members[i][2])
        n = len(members)
    t1 = time.perf_counter()
    total = sum(len(get(i)) for i in range(n))
    sequential = time.perf_counter() - t1
    order = random.Random(0).sample(range(n), min(RANDOM_READS, n))
    t2 = time.perf_counter()
    for i in order:
        get(i)
    rand = time.perf_counter() - t2
    (tar if lib == "ratarmountcore" else f).close()
    return {"open_index_s": opened, "members": n, "bytes": total, "sequential_s": sequential,
            "random_reads": len(order), "random_s": rand, "baseline_rss_mib": base,
            "peak_rss_mib": _peak_mib()}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                         text=True, check=False)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(archive: Path) -> dict:
    size = archive.stat().st_size
    results: dict = {"archive": str(archive), "archive_bytes": size, "machine": machine(),
                     "load_before": loadavg(), "libs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for lib in LIBS:
            try:
                __import__(lib)
            except ImportError:
                results["libs"][lib] = {"skipped": "not installed"}
                continue
            index = str(Path(tmp) / f"{lib}.index")
            b = _child(["build", lib, str(archive), index])
            r = _child(["read", lib, str(archive), index])
            idx_bytes = sum(p.stat().st_size for p in Path(tmp).glob(f"{lib}.index*"))
            if "seconds" in b:
                b["MB_per_s"] = size / 1e6 / b["seconds"]
                b["members_per_s"] = b["members"] / b["seconds"]
            if "sequential_s" in r:
                r["sequential_MB_per_s"] = r["bytes"] / 1e6 / r["sequential_s"]
                r["random_ms_per_member"] = 1000 * r["random_s"] / r["random_reads"]
            results["libs"][lib] = {"build": b, "read": r, "index_bytes": idx_bytes}
            print(lib, json.dumps(results["libs"][lib]), flush=True)
    results["load_after"] = loadavg()
    return results


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        what, lib, path, index = sys.argv[2:6]
        print(json.dumps((build if what == "build" else read)(lib, path, index)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", type=Path)
    ap.add_argument("--save", default="", help="file name under docs/results/")
    a = ap.parse_args()
    results = compare(a.archive)
    if a.save:
        save_json(a.save, results)


if __name__ == "__main__":
    main()
