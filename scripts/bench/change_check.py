#!/usr/bin/env python3
"""What the corpus change check costs on the whole release, against the plain resume check.

Every `run` (and `slurm`, `status`, `verify`, and a finished run asked again) lists the corpus and
compares it with the stored plan (jobs.run.prepare.check_corpus: discover, make_plan, jobs.run.changes).
This builds the release as a real PHOENIX-2014-T folder tree (the corpus files of the index and
947,756 sparse frame files named as the release names them), plans it, and fabricates one
committed part per chunk with realistic provenance columns (scripts/bench/resume_check.py; each
frame file gets its row's size and mtime, so every stat matches). Then it times, best of N rounds
with the page cache warm:

- the plain resume check, as it was: the listing, the dataset fingerprint compared, and the parts
  scanned with a stat of every frame (jobs.run.done.scan_parts with check_frames);
- the resume check with the change check: the same, the fingerprint replaced by the comparison of
  the listing with the stored plan (check_corpus), which also finds corpus text changes;
- its parts: the listing alone, the plan of the corpus now (make_plan), the comparison;
- with the corpus changed (a video added, a frame removed from another, a translation corrected):
  the comparison that finds it, and the re-plan around the committed parts (jobs.run.prepare.
  follow_corpus: part footers read, the plan extended and saved, run.json saved), once.

    .venv/bin/python scripts/bench/change_check.py --tmp /tmp/cc                  # whole release
    .venv/bin/python scripts/bench/change_check.py --tmp /tmp/cc --fraction 0.05 --rounds 1
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.phoenix import FRAMES_DIR
from phoenix_keypoints.jobs.run.changes import diff_plans
from phoenix_keypoints.jobs.run.done import scan_parts
from phoenix_keypoints.jobs.run.options import RunOptions
from phoenix_keypoints.jobs.run.plan import make_plan
from phoenix_keypoints.jobs.run.prepare import check_corpus, follow_corpus, new_run
from phoenix_keypoints.jobs.rundir.folder import RunDir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import loadavg, machine, save_json, scale_parser, table  # noqa: E402
from fabricate import index_dataset  # noqa: E402
from resume_check import timed, write_parts  # noqa: E402

CSV = "annotations/manual/PHOENIX-2014-T.{}.corpus.csv"


def build_tree(root: Path, index: Path, fraction: float) -> int:
    """The corpus files and an empty file per frame (names only; sizes are set from the parts)."""
    ds = index_dataset(index, fraction)
    keep = {(v.split, v.name) for v in ds.videos}
    for split in ("train", "dev", "test"):
        lines = (index / f"PHOENIX-2014-T.{split}.corpus.csv").read_text().splitlines(True)
        dest = root / CSV.format(split)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(lines[0] + "".join(x for x in lines[1:] if (split, x.split("|")[0]) in keep))
    for v in ds.videos:
        folder = root / v.folder
        folder.mkdir(parents=True)
        for name in v.files:
            os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT, 0o644))
    return ds.num_frames


def fabricate(tmp: Path, fraction: float, index: Path) -> RunDir:
    """The tree, its plan from its own listing, one part per chunk, files matching the parts."""
    root = tmp / "PHOENIX-2014-T"
    build_tree(root, index, fraction)
    info, plan = new_run(discover(root), RunOptions().resolved(), 32)
    rd = RunDir(tmp / "run")
    rd.parts_dir.mkdir(parents=True)
    rd.save_plan(plan)
    rd.save(info)
    write_parts(rd, root)
    return rd


def change(root: Path) -> str:
    """A video added (a copy of the first dev video), a frame removed from the first train video,
    the first test video's translation corrected."""
    first = {}
    for split in ("train", "dev", "test"):
        lines = (root / CSV.format(split)).read_text().splitlines(True)
        first[split] = lines[1].split("|")[0]
    src = root / FRAMES_DIR / "dev" / first["dev"]
    shutil.copytree(src, src.with_name("zz-added-1"))
    with (root / CSV.format("dev")).open("a") as f:
        f.write("zz-added-1|zz-added-1/1/*.png|-1|-1|Signer01|NEU|ein neues video\n")
    last = sorted((root / FRAMES_DIR / "train" / first["train"]).iterdir())[-1]
    last.unlink()
    path = root / CSV.format("test")
    lines = path.read_text().splitlines(True)
    lines[1] = lines[1].rstrip("\n") + " korrigiert\n"
    path.write_text("".join(lines))
    return f"added dev/zz-added-1, removed {last.name} of train/{first['train']}"


def plain_resume(rd: RunDir) -> None:
    """The check every resume made before: listing, fingerprint, parts with a stat of each frame."""
    info, plan = rd.load(), rd.load_plan()
    o = info.options
    ds = discover(Path(info.dataset.root), o.splits, o.videos, o.limit_videos,
                  o.max_samples_per_split)
    assert ds.fingerprint() == info.dataset.fingerprint
    scan_parts(rd, info, plan, move_bad=False, check_frames=True)


def changes_resume(rd: RunDir) -> None:
    """The check every resume makes now: the listing compared with the plan, then the parts."""
    info, plan = rd.load(), rd.load_plan()
    assert check_corpus(info, plan).current(info)
    scan_parts(rd, info, plan, move_bad=False, check_frames=True)


def measure(rd: RunDir, rounds: int) -> dict:
    info, plan = rd.load(), rd.load_plan()
    o = info.options
    ds = discover(Path(info.dataset.root))
    now = make_plan(ds, info.plan.workers, o.chunk_frames)
    out = {}
    for name, fn in [("plain_resume_check", lambda: plain_resume(rd)),
                     ("resume_check_with_changes", lambda: changes_resume(rd)),
                     ("listing", lambda: discover(Path(info.dataset.root))),
                     ("make_plan", lambda: make_plan(ds, info.plan.workers, o.chunk_frames)),
                     ("diff_plans", lambda: diff_plans(plan, now)),
                     ("change_check", lambda: check_corpus(info, plan))]:
        secs, rss = timed(fn, rounds)
        out[name] = {"s": secs, "best_s": min(secs), "peak_rss_mib": round(rss)}
    return out


def replan(rd: RunDir, rounds: int) -> dict:
    """The corpus changed: what the comparison finds, what it costs, and the re-plan once."""
    info, plan = rd.load(), rd.load_plan()
    what = change(Path(info.dataset.root))
    secs, rss = timed(lambda: check_corpus(info, plan), rounds)
    check = check_corpus(info, plan)
    t0 = time.perf_counter()
    new = follow_corpus(rd, info, check, 32)
    took = round(time.perf_counter() - t0, 3)
    return {"change": what, "found": check.diff.summary(), "change_check_s": secs,
            "change_check_best_s": min(secs), "change_check_peak_rss_mib": round(rss),
            "replan_s": took, "new_chunks": new.changes[-1].new_chunks,
            "kept_chunks": new.changes[-1].kept_chunks}


def main() -> int:
    args = scale_parser(__doc__).parse_args()
    shutil.rmtree(args.tmp, ignore_errors=True)
    t0 = time.monotonic()
    rd = fabricate(args.tmp, args.fraction, args.index)
    info = rd.load()
    result = {"machine": machine(), "load_before": loadavg(), "fraction": args.fraction,
              "videos": info.dataset.videos, "frames": info.dataset.frames,
              "chunks": info.plan.chunks, "fabricated_s": round(time.monotonic() - t0, 1)}
    result |= measure(rd, args.rounds)
    result["changed"] = replan(rd, args.rounds)
    rows = [[k, result[k]["best_s"], result[k]["peak_rss_mib"]] for k in
            ("plain_resume_check", "resume_check_with_changes", "listing", "make_plan",
             "diff_plans", "change_check")]
    c = result["changed"]
    rows += [["change_check (corpus changed)", c["change_check_best_s"],
              c["change_check_peak_rss_mib"]], ["re-plan (once)", c["replan_s"], ""]]
    print(f"{result['videos']} videos, {result['frames']} frames, {result['chunks']} chunks")
    print(table(rows, ["what", "s (best)", "peak RSS MiB"]))
    print(f"found: {c['found']}")
    if args.json:
        print(save_json(args.json, result))
    shutil.rmtree(args.tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
