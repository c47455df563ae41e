"""The `phoenix-keypoints` command line: run, slurm, status, verify, merge, tensors, export, report,
show, diff, sample.

Every expected problem (bad dataset, foreign run folder, missing model, interrupted run) ends in a
one-paragraph message and an exit status, never a traceback; every number an option takes is read
by extract/keypoints/option_values.py (ASCII digits only, refusals in words). Only the standard
library (and that module, which imports nothing else) is imported at module level, so
`phoenix-keypoints --help` and `from phoenix_keypoints import run_job` (jobs/api.py) stay cheap;
spawned workers never import it (jobs/schedule/local.py starts them without a main module).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from phoenix_keypoints.extract.keypoints.option_values import decimal_number, whole_number
from phoenix_keypoints.jobs import messages

if TYPE_CHECKING:
    from phoenix_keypoints.jobs.run.options import RunOptions
    from phoenix_keypoints.jobs.rundir.folder import RunDir


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _whole(value: str) -> int:
    """An option's whole number in ASCII digits (extract/keypoints/option_values.py); anything else
    said in words."""
    return whole_number()(value)


def _positive(value: str) -> int:
    return whole_number(1)(value)


# Each worker is a process holding its own estimator (about 0.4 GiB): no machine runs more than this,
# and a typo (--workers 1000000) would start that many processes.
MAX_WORKERS = 1024
# FFmpeg's own max_pixels (set to --max-pixels for every video) is an int: a larger value made every
# video frame undecodable.
MAX_MAX_PIXELS = 2**31 - 1


def _at_most(limit: int, why: str, least: int = 1):  # noqa: ANN202
    """An argparse type: an integer from `least` to `limit`, the refusal saying why the bound."""
    return whole_number(least, limit, why)


_WORKER_COUNT = _at_most(MAX_WORKERS, "each worker is a process holding its own estimator")


def _batch_size(value: str) -> int:
    """--batch-size: bounded by the memory a batch takes (extract/keypoints/estimator.py)."""
    from phoenix_keypoints.extract.keypoints.estimator import batch_refused

    n = _whole(value)
    if why := batch_refused(n):
        raise argparse.ArgumentTypeError(why)
    return n


def _non_negative(value: str) -> int:
    return whole_number(0)(value)


def _frame_rate(value: str) -> float:
    """--fps: frames a second, a finite number above 0 in ASCII digits."""
    return decimal_number(0, 1000, above=True, what="a frame rate")(value)


def _tolerance(value: str) -> float:
    return decimal_number(0, what="a number")(value)


Group = argparse._ActionsContainer  # a parser or a section of its --help: both take add_argument


def _sections(p: argparse.ArgumentParser, *titles: str) -> dict[str, Group]:
    """Sections of `run --help` and `slurm --help` (SECTIONS' titles and words), shown in the
    order made: each family's own section follows "keypoint family" (_family_args)."""
    return {t: p.add_argument_group(t, SECTIONS[t]) for t in titles}


SECTIONS = {
    "what to read": "the corpus and how its files are read",
    "what to select": "a part of it (default: every video of every split)",
    "where it goes": None,
    "keypoint family": "which family extracts (each family's own options below)",
    "the sbatch array": "what each shard and the merge job ask of SLURM",
    "workers and devices": "how the work runs; not part of the output",
    "model limits": "what one model call may take (a model file is untrusted)",
    "resume and failures": "the same command resumes; these change what it does",
    "several nodes": "shards of one run on a cluster (docs/cluster.md)",
}


def _plan_args(sec: dict[str, Group]) -> None:
    """What the plan is made of: used when a run folder is planned, checked when it is resumed."""
    from phoenix_keypoints.extract.corpora.base import SPLITS
    from phoenix_keypoints.extract.keypoints.estimator import names

    read, select = sec["what to read"], sec["what to select"]
    read.add_argument("--manifest", type=Path, metavar="FILE",
                   help="a csv/tsv/jsonl listing the videos (name, split, path, ...), instead of "
                        "--dataset")
    read.add_argument("--manifest-root", type=Path, metavar="DIR",
                   help="--manifest's paths lie under DIR (your own list of absolute paths); "
                        "default: the manifest's folder, outside which nothing is read")
    select.add_argument("--splits", type=_csv, nargs="+", metavar="SPLIT",
                   help=f"splits to process, space- or comma-separated: --splits train dev, "
                        f"--splits train,dev (default {','.join(SPLITS)}; for other corpora: "
                        "every split they have)")
    select.add_argument("--limit-videos", type=_positive, metavar="N",
                   help="a quick try: the first N videos of each split in the corpus file's order "
                        "(--max-samples-per-split: the older script's, by folder name)")
    select.add_argument("--max-samples-per-split", "--max_samples_per_split", type=_positive,
                   metavar="N", help="the older script's selection: the first N video folders of "
                                     "each split sorted by name, as it chose them (--limit-videos: "
                                     "corpus order); with both, this applies to what that kept")
    select.add_argument("--videos", type=_csv, help="comma-separated video names")
    sec["workers and devices"].add_argument("--chunk-frames", type=_positive,
                   help="fixed frames per chunk, whole videos (default: sizes chosen from the "
                        "dataset and the worker count, at most 1000, shrinking toward the end)")
    sec["keypoint family"].add_argument("--estimator", choices=names(), help=_estimator_help())
    read.add_argument("--no-follow-links", dest="follow_links", action="store_false", default=None,
                   help="leave out videos reached through a link that leaves the dataset's folder "
                        "(links are followed by default, and those leaving it named)")
    read.add_argument("--max-pixels", type=_at_most(MAX_MAX_PIXELS, "FFmpeg's own max_pixels is an int"),
                   metavar="N",
                   help="a frame whose header says more pixels is `too_large`, never decoded "
                        "(default 40000000: 8K video passes)")
    read.add_argument("--max-scans", type=_positive, metavar="N",
                   help="a JPEG of more scans is `over_budget`, never decoded (default 500, "
                        "libjpeg-turbo's own limit; encoders write about 10)")


def _default_about() -> str:
    from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, family

    return family(DEFAULT_FAMILY).ABOUT or DEFAULT_FAMILY


def _family_order() -> list[str]:
    """The families whose flags and words the parser holds, the default last (its options close
    the list, as they always have): the built-in ones and an installed one the command names
    (imported before the parser is built: _load_named)."""
    from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, loaded

    return [n for n, _ in loaded() if n != DEFAULT_FAMILY] + [DEFAULT_FAMILY]


def _once_each_doc(texts: list[str]) -> list[str]:
    """The texts with a page of docs/ named again (`: docs/wholebody.md`) left out after its first."""
    import re

    seen: set[str] = set()
    out = []
    for text in texts:
        for doc in re.findall(r"docs/[\w./-]+\.md", text):
            if doc in seen:
                text = text.replace(f": {doc}", "")
            seen.add(doc)
        out.append(text)
    return out


def _estimator_help() -> str:
    """--estimator's help: each family with its words (its ABOUT), the default first; an
    installed family not imported by its distribution's metadata (its own words and flags are
    read where --estimator names it)."""
    from phoenix_keypoints.extract.keypoints.estimator import (
        DEFAULT_FAMILY,
        escaped,
        family,
        names,
        plugin,
    )

    def about(name: str) -> str:  # a distribution's metadata escaped, as every message has it
        if (p := plugin(name)) is not None and name not in _family_order():
            return f"{name} (installed: {escaped(p.distribution)} {escaped(p.version)})"
        words = family(name).ABOUT
        return f"{name} ({'default: ' if name == DEFAULT_FAMILY else ''}{words})" if words else name
    said = " or ".join(_once_each_doc([about(n) for n in names()]))
    if any(plugin(n) is not None for n in names()):
        said += ("; an installed family's own flags: `run --estimator NAME --help` "
                 "(docs/families.md: installing one is trusting its code)")
    return said


def _family_args(p: argparse.ArgumentParser) -> None:
    """Each family's own options (its add_run_options), in a section of --help named for it, and
    --models for the built-in families that publish models (jobs/models.py reads their data,
    never a plugin's)."""
    from phoenix_keypoints.extract.keypoints.estimator import family
    from phoenix_keypoints.jobs.models import publishers

    models, publishing = False, publishers()  # --models once, after the first that publishes
    for name in _family_order():
        own = p.add_argument_group(f"{name} (--estimator {name})")  # a section of its own
        family(name).add_run_options(own)
        if not models and name in publishing:
            _models_args(own)
            models = True


def _runtime_args(p: Group, limits: Group) -> None:
    """How the workers of a family that batches frames (its declaration's `batches`) run (run,
    and each shard of slurm): not part of the output."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    batching = [n for n in _family_order() if family(n).declaration(None).batches]
    which = "/".join(batching)
    docs = ", ".join(dict.fromkeys(family(n).DOCS for n in batching))
    where = "; ".join(dict.fromkeys(family(n).DEVICE_HELP for n in batching))
    p.add_argument("--batch-size", type=_batch_size, metavar="N",
                   help=f"{which}: frames per model call, within a video (default 8 on the CPU; "
                        "on GPUs the largest of 16, 8, 4, 2, 1 that fits each card's free memory "
                        "with its workers, said at start). On the CPU the output is the same for "
                        "any N; on a GPU every call is padded to N and the values depend on N and "
                        "the device, so a resume keeps the run's own and refuses others: "
                        f"{docs}")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"),
                   help=f"{which}: {where}")
    _limit_args(limits, which)


def _limit_args(p: Group, which: str) -> None:
    """--model-deadline, --model-memory: what one model call may take (for a model file is
    untrusted: extract/keypoints/model_calls.py); not part of the output."""
    from phoenix_keypoints.extract.keypoints import model_calls as mc

    p.add_argument("--model-deadline", metavar="SECONDS",
                   type=decimal_number(0, mc.MAX_DEADLINE_S, above=True, what="a number of seconds"),
                   help=f"{which}: the longest one model call may take, per frame or crop it holds "
                        f"(default {mc.DEADLINE_S:g}); a model past it is refused (exit 2)")
    p.add_argument("--model-memory", metavar="MIB",
                   type=whole_number(1, mc.MAX_MEMORY_MIB, "1 TiB", "a whole number of MiB"),
                   help=f"{which}: the most one model call may grow a process's memory by, in MiB "
                        f"per frame or crop it holds (default {mc.MEMORY_MIB}); a model past it is "
                        "refused (exit 2)")


def _set_limits(args: argparse.Namespace) -> None:
    """This process's model limits, before the start-up check runs the models once."""
    from phoenix_keypoints.extract.keypoints.model_calls import say_error, set_last_word, set_limits

    set_limits(getattr(args, "model_deadline", None), getattr(args, "model_memory", None))
    set_last_word(lambda text: say_error(messages.terminal(text)))


def _export_to() -> str:
    """--to's help: which formats write one file there, and that the others write a folder."""
    from phoenix_keypoints.extract.outputs.export import one_file_formats

    files = [f for f in _export_formats() if f in one_file_formats()]
    return (f"{', '.join(files)}: the file to write; the other formats: a folder (a file per "
            "video, <split>/<video>.pose, or per split), never one named like a file (X.pkl)")


def _export_formats() -> dict[str, str]:
    """Each `export --format` a family supports -> its words (the first family's EXPORT_HELP that
    words it) and, where not every family supports it, the families whose runs it takes."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    takes: dict[str, list[str]] = {}
    words: dict[str, str] = {}
    order = _family_order()
    for n in order:
        for f in family(n).declaration(None).exports:
            takes.setdefault(f, []).append(n)
            words.setdefault(f, family(n).EXPORT_HELP.get(f, ""))
    return {f: words[f] + ("" if len(runs) == len(order) else f" ({', '.join(runs)} runs)")
            for f, runs in takes.items()}


def _add_run(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="plan, extract what is not done yet, merge (resumes)")
    sec = _sections(r, "what to read", "what to select", "where it goes", "keypoint family")
    _family_args(r)
    sec |= _sections(r, "workers and devices", "model limits", "resume and failures",
                     "several nodes")
    read, out, work, again, nodes = (sec[t] for t in (
        "what to read", "where it goes", "workers and devices", "resume and failures",
        "several nodes"))
    read.add_argument("--dataset", "--dataset_path", type=Path,
                      help="the corpus: a PHOENIX, CSL-Daily or How2Sign folder, a folder of "
                           "videos, or a manifest file (docs/corpora.md)")
    out.add_argument("--out", type=Path, help="run folder (created if missing)")
    out.add_argument("--output_path", type=Path, metavar="FILE.pkl",
                     help="the older script's flag: also write its pkl layout to FILE.pkl at the "
                          "end; without --out the run folder is FILE_run/ beside it (or in --temp_dir)")
    out.add_argument("--temp_dir", "--temp-dir", type=Path, metavar="DIR",
                     help="the older script's flag: with --output_path and no --out, the run folder "
                          "(parts, logs, keypoints.parquet) goes in DIR")
    work.add_argument("--workers", type=_WORKER_COUNT, metavar="N",
                      help="worker processes, each with an estimator of its own (its models loaded "
                           "once a process; default: one per usable CPU core)")
    work.add_argument("--num-gpus", "--num_gpus", type=_at_most(MAX_WORKERS, "at most one worker each",
                                                                least=0),
                      help="GPUs to pin workers to (default: visible GPUs, 0 when none)")
    work.add_argument("--workers-per-gpu", "--num_workers_per_gpu", type=_WORKER_COUNT,
                      help="workers per GPU, or CPU workers with 0 GPUs (default: usable CPUs, "
                           "shared among the GPUs; on GPUs fewer where their memory does not hold "
                           "that many, said at start)")
    _runtime_args(work, sec["model limits"])
    _plan_args(sec)
    again.add_argument("--fresh", action="store_true",
                       help="delete the run in --out (if any) and start again")
    again.add_argument("--allow-partial", action="store_true",
                       help="merge even if videos failed (run.json lists what is missing)")
    again.add_argument("--retry-failed", action="store_true",
                       help="redo the chunks of videos that failed before (after fixing their frames)")
    again.add_argument("--frozen", action="store_true",
                       help="keep the stored plan when the corpus changed since it was made (only "
                            "warn); by default added/changed videos are extracted and removed ones "
                            "left out")
    nodes.add_argument("--num-shards", type=_positive,
                       help="this node is one of S shards (S fixed when planned) sharing the chunks; "
                            "the first to start also merges")
    nodes.add_argument("--shard-index", type=_non_negative,
                       help="which shard, 0..S-1 (default: $SLURM_ARRAY_TASK_ID)")
    nodes.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="local worker processes (default), or actors on Ray (extra [ray])")
    nodes.add_argument("--address",
                       help="with --backend ray: the cluster to join ('auto': the one started with "
                            "`ray start`); default: start a local Ray")
    r.set_defaults(handler=_run)


def _add_slurm(sub: argparse._SubParsersAction) -> None:
    sl = sub.add_parser("slurm", help="plan, then an sbatch array over the missing shards + merge job")
    sec = _sections(sl, "what to read", "what to select", "where it goes", "keypoint family")
    _family_args(sl)
    sec |= _sections(sl, "the sbatch array", "workers and devices", "model limits",
                     "resume and failures")
    read, out, array, again = (sec[t] for t in (
        "what to read", "where it goes", "the sbatch array", "resume and failures"))
    read.add_argument("--dataset", type=Path, help="folder holding annotations/ and features/")
    out.add_argument("--out", type=Path, required=True,
                     help="run folder on a filesystem every node sees")
    array.add_argument("--num-shards", type=_positive, required=True,
                       help="array size S, fixed in run.json when planned")
    _plan_args(sec)
    array.add_argument("--max-parallel", type=_positive,
                       help="at most K shards at once (--array=...%%K)")
    array.add_argument("--time", help="time limit per shard and for the merge (sbatch --time)")
    array.add_argument("--cpus-per-task", type=_positive,
                       help="CPUs per shard: one worker per CPU (per GPU: C/G)")
    array.add_argument("--workers", type=_WORKER_COUNT, metavar="N",
                       help="workers per shard: asks sbatch for N CPUs, one worker each (the same as "
                            "--cpus-per-task N)")
    array.add_argument("--gpus-per-task", type=_positive, help="GPUs per shard")
    _runtime_args(sec["workers and devices"], sec["model limits"])
    array.add_argument("--mem", metavar="SIZE",
                       help="memory per shard (sbatch --mem, e.g. 32G); default: 561 MiB, a worker's "
                            "measured peak, x its CPUs x 1.5 + 1 GiB (15G for 16 CPUs); the merge job "
                            "asks for 2G")
    array.add_argument("--partition", help="sbatch --partition")
    array.add_argument("--account", help="sbatch --account")
    array.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                       help="another sbatch option for both jobs, e.g. --sbatch-arg=--qos=long "
                            "(repeatable)")
    array.add_argument("--submit", action="store_true",
                       help="submit with sbatch (default: print the scripts and the command)")
    again.add_argument("--frozen", action="store_true",
                       help="keep the stored plan when the corpus changed since it was made (only warn)")
    sl.set_defaults(handler=_slurm)


def _preset_help() -> tuple[tuple[str, ...], str]:
    """--preset's choices and help: every family's presets whose declaration has a PointTable
    (read through the registry), and each one's default set."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    tables = [t for t in (family(n).declaration(None).points for n in _family_order())
              if t is not None]
    choices = tuple(dict.fromkeys(c for t in tables for c in t.choices()))
    defaults = [f"{t.full} ({t.wider.full} on {t.wider_run})" if t.wider else t.full
                for t in tables]
    return choices, f"default {' or '.join(defaults) or 'every point'}"


def _add_tensors(sub: argparse._SubParsersAction) -> None:
    from phoenix_keypoints.extract.outputs.normalize import FILL_MODES, NORMALIZE_MODES
    from phoenix_keypoints.extract.outputs.tensors import COORDS, DTYPES

    t = sub.add_parser("tensors", help="write a tensor set (points, normalisation, gap filling)")
    t.add_argument("--out", type=Path, required=True, help="a run folder with keypoints.parquet")
    which = t.add_mutually_exclusive_group()
    choices, default = _preset_help()
    which.add_argument("--preset", choices=choices, help=default)
    which.add_argument("--points", help="explicit points: global indices and ranges (11-16,501-542) "
                                        "or PART[:N-M] (pose:11-16,left_hand,right_hand)")
    t.add_argument("--normalize", choices=NORMALIZE_MODES, default="none")
    t.add_argument("--fill", choices=FILL_MODES, default="zero")
    t.add_argument("--max-gap", type=_non_negative, default=3,
                   help="with --fill interpolate: longest gap (frames) filled, default 3")
    t.add_argument("--dtype", choices=DTYPES, default="float32")
    t.add_argument("--coords", choices=COORDS, default="image",
                   help="image: x, y normalised by the frame (default); world: the pose's "
                        "pose_world, metres around the hips (pose points only)")
    t.add_argument("--name", help="tag (folder under tensors/); default: made from the options")
    t.set_defaults(handler=_tensors)


def _add_small(sub: argparse._SubParsersAction) -> None:
    """The commands with a handful of options: status, merge, export, sample."""
    s = sub.add_parser("status", help="progress of a run folder (safe beside a live run)")
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(handler=_status)

    m = sub.add_parser("merge", help="merge committed parts into keypoints.parquet + tensors")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--allow-partial", action="store_true",
                   help="merge although chunks are missing or videos failed")
    m.set_defaults(handler=_merge)

    e = sub.add_parser("export", help="export keypoints for existing code (pkl dict, .pose files, "
                                      "Kaggle islr parquets)")
    e.add_argument("--out", type=Path, required=True, help="a finished run folder")
    e.add_argument("--format", choices=tuple(_export_formats()), required=True,
                   help="; ".join(f"{f}: {words}" for f, words in _export_formats().items()))
    e.add_argument("--to", type=Path, required=True, help=_export_to())
    e.add_argument("--tag", default="", help="pkl: tensor set to export (default: the run's own)")
    e.add_argument("--flat", action="store_true",
                   help="unisign-pkl: every split's files in --to itself, the one folder Uni-Sign's "
                        "CSL_Daily (and How2Sign, OpenASL) config reads for every phase")
    e.add_argument("--fps", type=_frame_rate, metavar="F",
                   help="pose: the rate of frame-folder videos (default 25, PHOENIX's); a video "
                        "file's .pose takes its stream's rate")
    e.set_defaults(handler=_export)

    sa = sub.add_parser("sample", help="write a tiny demo dataset (PHOENIX-2014-T layout)")
    sa.add_argument("--out", type=Path, required=True)
    sa.set_defaults(handler=_sample)


def _add_verify(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verify", help="name the frames that changed on disk since the run read them "
                                      "(exit 1 if any)")
    v.add_argument("--out", type=Path, required=True, help="a run folder (merged, or its parts)")
    v.add_argument("--content", action="store_true",
                   help="also re-read and hash every frame (sha256), not only stat it: finds a frame "
                        "rewritten with its size and mtime kept")
    v.set_defaults(handler=_verify)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="phoenix-keypoints",
        description=f"RWTH-PHOENIX-Weather 2014 T frames to {_default_about()} keypoints.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_run, _add_slurm, _add_small, _add_verify, _add_tensors, _inspect_parsers,
                _add_models):
        add(sub)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("phoenix-keypoints")
    except PackageNotFoundError:
        return "(not installed: a source checkout)"


class _Quiet(argparse.ArgumentParser):
    """A parser that says nothing of what it cannot read (the full parser says it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def named_family(argv: list[str]) -> str | None:
    """The installed family a command names, if any: `--estimator NAME`, or the run in `--out`
    (not with --fresh). Built-in families are always known; an installed one is imported only
    where a command names it."""
    from phoenix_keypoints.extract.keypoints.estimator import plugin

    pre = _Quiet(add_help=False)
    pre.add_argument("--estimator")
    pre.add_argument("--out")
    pre.add_argument("--fresh", action="store_true")
    try:
        known = pre.parse_known_args(argv)[0]
    except ValueError:
        return None
    try:
        name = known.estimator or _resumed_family(known)
    except (OSError, ValueError):  # a folder that cannot be read: the command says so itself
        return None
    return name if name is not None and plugin(name) is not None else None


def _models_args(p: Group) -> None:
    from phoenix_keypoints.jobs.models import add_run_args

    add_run_args(p)


def _add_models(sub: argparse._SubParsersAction) -> None:
    from phoenix_keypoints.jobs.models import add_parser

    add_parser(sub)


def _inspect_parsers(sub: argparse._SubParsersAction) -> None:
    """report, show, diff: look at what a run extracted."""
    from phoenix_keypoints.extract.inspect.quality import Thresholds

    rp = sub.add_parser("report", help="the report the run's family declares: "
                                       "RUN/report/index.html + videos.parquet")
    rp.add_argument("--out", type=Path, required=True, help="a merged run folder")
    th = rp.add_argument_group("thresholds of the quality report (when a video is flagged; a "
                               "family's plain report has none)")
    for name, kind, default, doc in Thresholds.options():
        th.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_non_negative if kind is int
                        else decimal_number(0), default=default,
                        metavar="N" if kind is int else "X", help=f"{doc} (default {default})")
    rp.add_argument("--cards", type=_non_negative, default=24,
                    help="worst flagged videos shown with frames and a timeline (default 24)")
    rp.set_defaults(handler=_report)

    sh = sub.add_parser("show", help="one video's frames with the skeleton drawn: MP4, GIF or PNG")
    sh.add_argument("--out", type=Path, required=True, help="a merged run folder")
    sh.add_argument("--video", required=True, help="video name, e.g. 01April_2010_Thursday_heute-6694")
    sh.add_argument("--to", type=Path, required=True,
                    help="FILE.mp4, FILE.gif, or FILE.png (a contact sheet, one tile per frame)")
    sh.add_argument("--fps", type=_frame_rate, metavar="F",
                    help="MP4/GIF frame rate (default: the video's own; frame folders 25, PHOENIX's)")
    sh.add_argument("--scale", type=_positive,
                    help="pixels per frame pixel (default 2 for MP4/GIF, 1 for PNG)")
    sh.set_defaults(handler=_show)

    d = sub.add_parser("diff", help="do two extractions agree? exit 0 yes, 1 no, 2 bad input")
    d.add_argument("run_a", type=Path, metavar="RUN_A", help="run folder (or a keypoints .parquet)")
    d.add_argument("run_b", type=Path, metavar="RUN_B", help="run folder (or a keypoints .parquet)")
    d.add_argument("--tolerance", type=_tolerance, default=0.0,
                   help="largest absolute difference that still agrees (default 0: identical)")
    d.set_defaults(handler=_diff)


def _rd(path: Path) -> RunDir:
    from phoenix_keypoints.jobs.rundir.folder import RunDir

    return RunDir(path)


def _options(args: argparse.Namespace) -> RunOptions:
    from phoenix_keypoints.jobs.run.options import RunOptions

    splits = tuple(s for group in args.splits for s in group) if args.splits else None
    dataset = args.dataset
    if getattr(args, "manifest", None) is not None:
        if dataset is not None and dataset != args.manifest:
            raise SystemExit("phoenix-keypoints: error: give --dataset or --manifest, not both")
        dataset = args.manifest
    root = getattr(args, "manifest_root", None)
    if root is not None and getattr(args, "manifest", None) is None:
        from phoenix_keypoints.jobs.rundir.folder import RunError

        raise RunError("--manifest-root DIR goes with --manifest FILE: it names the folder the "
                       "manifest's paths lie under.")
    asked = _family_options(args)  # first: it may read the flags as a resumed run's family's
    return RunOptions(dataset, splits, args.videos, args.limit_videos, args.chunk_frames,
                      args.max_samples_per_split, args.max_pixels, args.follow_links,
                      args.estimator, args.max_scans, asked, tuple(getattr(args, "argv", ())),
                      root)


def _family_options(args: argparse.Namespace) -> dict[str, dict]:
    """What each family's own options asked (its asked_settings: checked, as it records them),
    for the families given any; --models NAME's files come from the cache (jobs/models.py). A
    resume without --estimator offers them first to the run's own family, as if --estimator named
    it: one built on another family's flags (a 3D run's --detector) reads them as its own."""
    from phoenix_keypoints.extract.keypoints.estimator import OptionError, family
    from phoenix_keypoints.jobs.rundir.folder import RunError

    def fetched() -> tuple[Path, ...]:
        from phoenix_keypoints.jobs.models import fetched as files

        return files(args.models, args.models_dir)

    _models_choose(args)

    def ask(name: str, estimator: str | None) -> dict | None:
        try:
            return family(name).asked_settings(args, estimator, fetched)
        except OptionError as e:
            raise RunError(str(e)) from None

    out = {}
    own = _resumed_family(args) if args.estimator is None else None
    if own is not None and (got := ask(own, own)) is not None:
        args.estimator, out[own] = own, got
    for name in _family_order():
        if name not in out and (got := ask(name, args.estimator)) is not None:
            out[name] = got
    return out


def _models_choose(args: argparse.Namespace) -> None:
    """--models NAME chooses the family (--estimator), and the point set and detector kind the
    name's files are read with, where they are not given; another --estimator is refused."""
    if getattr(args, "models", None) is None:
        return
    from phoenix_keypoints.jobs.models import run_choices
    from phoenix_keypoints.jobs.rundir.folder import RunError

    chosen = run_choices(args.models)
    if args.estimator not in (None, chosen["estimator"]):
        raise RunError(f"--models NAME chooses the family: {args.models} is models of --estimator "
                       f"{chosen['estimator']}, not {args.estimator}. Give it without --estimator, "
                       "or with that one.")
    args.estimator = chosen["estimator"]
    for key in ("point_set", "detector_kind"):
        if getattr(args, key, None) is None:
            setattr(args, key, chosen[key])


def _resumed_family(args: argparse.Namespace) -> str | None:
    """The family of the run `--out` holds where it is not the default one (whose flags never
    choose it), else None (a new run, --fresh, or a run.json said wrong again when the run is
    opened)."""
    from phoenix_keypoints.extract.keypoints.estimator import DEFAULT_FAMILY, names
    from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError

    out = None if getattr(args, "fresh", False) else getattr(args, "out", None)
    try:
        rd = RunDir(Path(out)) if out is not None else None
        name = rd.load().options.estimator if rd is not None and rd.exists() else None
    except RunError:
        return None
    return name if name != DEFAULT_FAMILY and name in names() else None


def _run(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.run.options import RunRequest
    from phoenix_keypoints.jobs.rundir.folder import RunError
    from phoenix_keypoints.jobs.runner import run

    if args.backend == "ray":
        from phoenix_keypoints.jobs.schedule.ray_backend import require_ray

        require_ray()
    elif args.address:
        raise RunError("--address is for --backend ray.")
    pkl, out = args.output_path, args.out
    if pkl is not None:
        from phoenix_keypoints.extract.keypoints.estimator import declaration, export_refused

        why = args.estimator and export_refused(declaration({"estimator": args.estimator}),
                                                "legacy-pkl", "this")
        if why:
            raise RunError(f"--output_path writes the older pipeline's pkl (--format legacy-pkl): {why}")
        if pkl.is_dir():
            raise RunError(f"--output_path {pkl} is a folder; give the .pkl file to write.")
        out = out or (args.temp_dir or pkl.parent) / f"{pkl.stem}_run"
    if args.temp_dir is not None and (args.out is not None or pkl is None):
        why = "--out names the run folder" if args.out else "there is no --output_path"
        messages.note(f"--temp_dir {args.temp_dir} not used ({why}): it only places the run folder "
                      "of --output_path when --out is not given")
    if out is None:
        raise RunError("run needs --out RUN_DIR (or the older --output_path FILE.pkl).")
    num_gpus, per_gpu = _workers(args)
    _set_limits(args)
    return run(RunRequest(out, _options(args), num_gpus, per_gpu, args.fresh,
                          args.allow_partial, args.retry_failed, args.num_shards, args.shard_index,
                          args.backend, args.address, pkl, args.frozen,
                          typed_flags(getattr(args, "argv", []), _WORKER_FLAGS),
                          args.batch_size, args.device, args.model_deadline, args.model_memory))


_WORKER_FLAGS = ("--workers", "--workers-per-gpu", "--num_workers_per_gpu", "--num-gpus", "--num_gpus")


def _workers(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """(GPUs, workers per GPU) for --workers N: N CPU workers, or N spread over --num-gpus G."""
    from phoenix_keypoints.jobs.rundir.folder import RunError

    if args.workers is None:
        if (args.num_gpus or 1) * (args.workers_per_gpu or 1) > MAX_WORKERS:
            raise RunError(f"--num-gpus {args.num_gpus} x --workers-per-gpu {args.workers_per_gpu} "
                           f"is more than the {MAX_WORKERS:,} workers a run may start (each is a "
                           "process holding its own estimator).")
        return args.num_gpus, args.workers_per_gpu
    if args.workers_per_gpu is not None:
        raise RunError("give --workers (all workers) or --workers-per-gpu, not both.")
    gpus = args.num_gpus or 0
    if gpus and args.workers % gpus:
        raise RunError(f"--workers {args.workers} does not split evenly over --num-gpus {gpus}: "
                       f"give a multiple of {gpus}.")
    return gpus, args.workers // gpus if gpus else args.workers


def typed_flags(argv: list[str], flags: tuple[str, ...]) -> str:
    """The flags of `flags` in argv as the user typed them, with their values (argparse also takes
    an unambiguous prefix: `--workers-p 2`)."""
    out = []
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if len(name) > 2 and any(f.startswith(name) for f in flags):
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            out.append(f"{name} {value}".strip())
    return " ".join(out)


def _slurm(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.cluster.slurm import SlurmOptions, plan_for_array, slurm_command
    from phoenix_keypoints.jobs.rundir.folder import RunError

    cpus = args.cpus_per_task
    if args.workers is not None:
        if cpus is not None and cpus != args.workers:
            raise RunError(f"--workers {args.workers} and --cpus-per-task {cpus}: a shard runs one "
                           "worker per CPU it is given; give one of them.")
        cpus = args.workers
    so = SlurmOptions(args.max_parallel, args.time, cpus, args.gpus_per_task,
                      args.partition, args.account, args.sbatch_arg, args.mem, args.batch_size,
                      args.device, args.model_deadline, args.model_memory)
    _set_limits(args)
    rd = _rd(args.out)
    return slurm_command(rd, plan_for_array(rd, _options(args), args.num_shards, so, args.frozen),
                         so, submit=args.submit)


def _tensors(args: argparse.Namespace) -> int:
    from phoenix_keypoints.extract.keypoints.points import PointSet
    from phoenix_keypoints.extract.outputs.tensors import TensorSpec
    from phoenix_keypoints.jobs.run.outputs import write_set_command

    # Read in the run's own numbering (its family's table, the file's: write_set), which refuses
    # points the run lacks with the table's words.
    spec = TensorSpec(PointSet.ask(args.preset, args.points), args.normalize, args.fill,
                      args.max_gap, args.dtype, args.name, args.coords)
    return write_set_command(_rd(args.out), spec)


def _export(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.run.outputs import export_command

    return export_command(_rd(args.out), args.format, args.to, args.tag, args.fps, args.flat)


def _status(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.status import render

    messages.result(render(_rd(args.out)))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.verify import verify_command

    return verify_command(_rd(args.out), args.content)


def _merge(args: argparse.Namespace) -> int:
    from phoenix_keypoints.jobs.runner import merge_command

    return merge_command(_rd(args.out), args.allow_partial)


def _report(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from phoenix_keypoints.extract.inspect.quality import Thresholds
    from phoenix_keypoints.extract.inspect.report import write_report
    from phoenix_keypoints.jobs.inspect import report_dir, report_input

    thr = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)})
    inp = report_input(args.out)
    info = write_report(inp, report_dir(args.out), thr, args.cards)
    messages.result(f"report:    {report_dir(args.out) / 'index.html'} ({info['videos']} videos, "
                    f"{info['frames']} frames, {info['flagged']} flagged)")
    messages.result(f"figures:   {report_dir(args.out) / 'videos.parquet'}")
    if info.get("person"):  # a multi-person family's: whose regions the figures are
        messages.result(f"person:    {info['person']}")
    if inp.frames_note:
        messages.note(inp.frames_note)
    return 0


def _show(args: argparse.Namespace) -> int:
    from phoenix_keypoints.extract.inspect.overlay import write_overlay
    from phoenix_keypoints.jobs.inspect import show_input, show_rate

    rows, root, note = show_input(args.out, args.video)
    fps, said = show_rate(rows, root, args.fps)
    n, found = write_overlay(rows, root, args.to, fps, args.scale)
    rate = f" at {said}" if args.to.suffix.lower() != ".png" else ""
    messages.result(f"{args.to}: {n} frames of {args.video}{rate}")
    if found < n:
        messages.note(f"{note or f'{n - found} frame file(s) not found'}; those frames show the "
                      "skeleton on a grey canvas")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from phoenix_keypoints.extract.inspect.compare import diff_files, summary_line
    from phoenix_keypoints.jobs.inspect import keypoints_of

    summary = diff_files(keypoints_of(args.run_a), keypoints_of(args.run_b), args.tolerance)
    messages.result(summary_line(summary, args.tolerance))
    return 0 if summary.agree else 1


def _sample(args: argparse.Namespace) -> int:
    from phoenix_keypoints.extract.sample import build_sample

    messages.result(str(build_sample(args.out)))
    return 0


def _load_named(argv: list[str]) -> None:
    """Import the installed family the command names (its flags, formats and words join the
    parser); a FamilyError where it cannot be used (exit 2, naming its distribution)."""
    from phoenix_keypoints.extract.keypoints.estimator import family

    name = named_family(argv)
    if name is not None:
        family(name)


def _plugin_warnings() -> None:
    """An installed family skipped by a question about every family: said as a warning line
    (messages.warn), not Python's warning with its source line."""
    import warnings

    from phoenix_keypoints.extract.keypoints.estimator import PluginWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, PluginWarning):
            messages.warn(str(message))
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


class Terminated(BaseException):
    """SIGTERM outside the extraction loop (planning, merging): unwind like Ctrl-C, exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def _refusals() -> tuple[type[Exception], ...]:
    """The errors that mean refused input (exit 2): each says what, where and what to do."""
    from phoenix_keypoints.extract.corpora.base import DatasetError
    from phoenix_keypoints.extract.inspect.rows import ReportError
    from phoenix_keypoints.extract.keypoints.estimator import FamilyError, ModelFileError
    from phoenix_keypoints.extract.keypoints.points import PointsError
    from phoenix_keypoints.extract.outputs.tensors import TensorsError
    from phoenix_keypoints.jobs.rundir.folder import RunError

    return (DatasetError, RunError, ModelFileError, TensorsError, PointsError, ReportError,
            FamilyError)


def main(argv: list[str] | None = None) -> int:
    from phoenix_keypoints.extract.keypoints.environ import clean_os_environ

    clean_os_environ()  # before anything loads onnxruntime or starts a child (docs/how-it-works.md)
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    _plugin_warnings()
    try:
        _load_named(argv)
    except _refusals() as e:
        messages.error(str(e))
        return 2
    args = build_parser().parse_args(argv)
    args.argv = argv
    signal.signal(signal.SIGTERM, _on_sigterm)  # so temp files are removed on the way out
    refused = _refusals()
    from phoenix_keypoints.jobs.rundir.folder import JobFailed

    try:
        return args.handler(args)
    except refused as e:
        messages.error(str(e))
        return 2
    except JobFailed as e:
        messages.error(str(e))
        return 1
    except OSError as e:  # an unexpected disk or permission problem: say what, not a traceback
        messages.error(f"{e}. Fix it and {messages.RESUME}.")
        return 1
    except KeyboardInterrupt:
        messages.say(f"interrupted; {messages.RESUME}")
        return 130
    except Terminated:
        messages.say(f"terminated; {messages.RESUME}")
        return 143
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
