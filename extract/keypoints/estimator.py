"""The registry of keypoint families: the one seam between the job and whatever turns frames into
keypoints.

A family is a subclass of `Family` (contract.py: every method and constant the tool asks of a
family, each with its default; docs/families.md explains each): it *declares* what it writes (a
`Declaration`, declaration.py) and *runs* a video's frames (an `Estimator`). Each family is one
package whose class the registry names as `package:Class`: the built-in ones are
extract/families/NAME/ (`FAMILIES`); an installed distribution adds one by an entry point of group
`phoenix_keypoints.families` (`name = package:Class`), read from its metadata (name,
distribution, version) without importing it (`PLUGINS`). A family's package is imported only when
a run, a file or a clip names it (importlib, so no room below extract/families/ imports a family),
and `family(name)` gives one instance of its class a process; a question about every family
(which one wrote this file?) imports the installed ones too, skipping with a warning one that
fails. A plugin that fails to import, names no Family subclass (a module, as plugins once were),
or keeps no contract, is a `FamilyError` naming its distribution, version and the error, raised
only where that family is needed: every other command goes on. The job, the schema, the merge
and the outputs read the declaration and call the family's methods, never a family's name.

Settings travel as one plain dict (recorded in run.json under the family's name, and in each
part's footer): the default family's is its options dict exactly as before (no `estimator`
key); another family's carries `estimator: NAME`.

Command-line options. A family adds its own flags to `run` and `slurm` with four methods (all
optional; extract/families/holistic/options.py and wholebody/options.py are two examples):
`add_run_options(parser)` (each flag default None: "not given", a resume keeps the run's own),
`asked_settings(args, estimator, fetched)` (the values of its flags, checked, as the family
records them; None: none given; raise `OptionError` for flags that do not go together; a
built-in family other than the default that returns something is chosen by it; `fetched()`
gives the files of `--models NAME` to the family the name is of: a built-in family's
published.py, read by jobs/models.py, which sets --estimator from it),
`settings_of(asked, recorded)` and `settings_conflicts(asked, recorded)` (why a resume refuses
what was asked), and `moved_files(asked, recorded)` for a family whose flags name files. An
installed family's flags are added where `--estimator NAME` names it or the run in `--out` is
its run. Options on how workers run (--batch-size, --device) are the job's, for a family whose
declaration says `batches`; such a family words --device's help (`DEVICE_HELP`) and says why a
device cannot run here (`device_refused(device)`: None when it can). One that runs on GPUs
(`on_gpu`) says what a worker takes of a card at a batch size (`gpu_memory_need(settings,
batch_size)`: bytes; jobs/schedule/devices.py fits workers and batch to the cards with it), and its
estimator's `execution` record says how its values are computed (device, provider, options, batch
shape: extract/keypoints/execution.py), kept in every part and compared on resume.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from phoenix_keypoints.extract.keypoints.contract import (
    BASE,
    Estimator,
    Family,
    estimator_problems,
    problems,
)
from phoenix_keypoints.extract.keypoints.declaration import Declaration, QualitySpec, ReportSpec
from phoenix_keypoints.extract.keypoints.environ import telemetry_off
from phoenix_keypoints.extract.keypoints.words import a

__all__ = ["DEFAULT_FAMILY", "FAMILIES", "PLUGINS", "Declaration", "Estimator", "Family",
           "FamilyError",
           "ModelFileError", "OptionError", "Plugin", "PluginWarning", "QualitySpec",
           "ReportSpec", "declaration", "family", "names", "open_estimator"]

# The registry: family name -> its class, `package:Class` (extract/families/NAME/). The first is
# the default (a settings dict without `estimator`). Tests may add a family of their own (register).
FAMILIES: dict[str, str] = {
    "holistic": "phoenix_keypoints.extract.families.holistic:Holistic",
    "wholebody": "phoenix_keypoints.extract.families.wholebody:WholeBody",
    "wholebody3d": "phoenix_keypoints.extract.families.wholebody3d:WholeBody3D"}
DEFAULT_FAMILY = next(iter(FAMILIES))


class ModelFileError(Exception):
    """A model file cannot be used (missing, unreadable, another layout, changed since the run was
    planned); the message names the file and says what to do. The command exits 2."""


class OptionError(Exception):
    """A family's command-line options that do not go together (its asked_settings); the message
    says which and what to give. The command exits 2."""


class FamilyError(ValueError):
    """A family that cannot be used here: unknown, or an installed one that fails to import or
    keeps no contract. The message names its distribution and version and the error, in one
    line. A command that needs the family exits 2; every other command goes on."""


class PluginWarning(UserWarning):
    """An installed family skipped by a question about every family (it fails to load)."""


ENTRY_POINTS = "phoenix_keypoints.families"  # installed packages add families: name = pkg:Class
PLUGIN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # a family name: a flag's value, a column


@dataclass(frozen=True)
class Plugin:
    """An installed family as its distribution's metadata says it (nothing of it imported)."""

    name: str  # the entry point's name: --estimator NAME
    module: str  # its value: `package:Class` (a Family subclass)
    distribution: str
    version: str

    @property
    def origin(self) -> str:
        return f"plugin {self.distribution} {self.version} ({self.name} = {self.module})"


PLUGINS: dict[str, Plugin] = {}
_loaded: dict[str, Family] = {}  # plugin name -> its family, once imported and checked
_built: dict[tuple[str, Any], Family] = {}  # (built-in name, its class) -> its one instance
_broken: dict[str, str] = {}  # plugin name -> why it cannot be used, once tried
_scanned: list[bool] = []  # the installed packages' families were read (once a process)


def register(name: str, spec: str) -> None:
    """Add a family (`package:Class`, a Family subclass) to this process's registry."""
    FAMILIES[name] = spec


def names(rescan: bool = False) -> tuple[str, ...]:
    """Every family this process knows, none imported: the registry's, then those installed
    packages declare (entry points of group ENTRY_POINTS, read once a process, or again with
    `rescan`; a name already known keeps its module)."""
    if rescan or not _scanned:
        for found in _installed_families():
            if found.name not in FAMILIES:
                PLUGINS.setdefault(found.name, found)
        _scanned.append(True)
    return (*FAMILIES, *(n for n in PLUGINS if n not in FAMILIES))


def plugin(name: str) -> Plugin | None:
    """The installed family of that name, as its metadata says it (None: a built-in or unknown)."""
    names()
    return PLUGINS.get(name) if name not in FAMILIES else None


def _installed_families() -> list[Plugin]:
    """Each family an installed distribution declares, from its metadata alone. Only absolute
    entries of sys.path are searched: a relative one (an editable install's path hook, a '' from
    `python -c`) would be read in the current folder, which is often the corpus, whose files are
    data. A name no flag could hold is skipped with a warning."""
    from importlib.metadata import distributions

    where = [p for p in sys.path if os.path.isabs(p)]
    out = []
    for dist in distributions(path=where):
        try:
            found = [ep for ep in dist.entry_points if ep.group == ENTRY_POINTS]
            if not found:
                continue
            meta = (str(dist.metadata["Name"]), str(dist.version))
        except Exception:  # noqa: BLE001 (metadata that cannot be read names no family)
            continue
        for ep in found:
            if PLUGIN_NAME.fullmatch(ep.name):
                out.append(Plugin(ep.name, ep.value, *meta))
            else:
                warnings.warn(f"the family {escaped(ep.name)!r} of distribution "
                              f"{escaped(meta[0])} {escaped(meta[1])} is skipped: a family's name "
                              "is lower-case letters, digits, - and _", PluginWarning, stacklevel=2)
    return out


def family(name: str) -> Family:
    """A family: its class's one instance in this process, its package imported on first use; a
    FamilyError where it cannot be used. onnxruntime's telemetry is turned off first, in every
    process, for every family (built-in or installed): a family does nothing for it (its module
    may import onnxruntime at once)."""
    telemetry_off()
    if name not in FAMILIES and name not in names(rescan=name not in PLUGINS):
        raise FamilyError(f"unknown estimator {escaped(name)!r}; this installation knows "
                          f"{', '.join(names())}")
    if name in FAMILIES:
        found = _imported(FAMILIES[name])  # a module imported once: a lookup after
        if (name, found) not in _built:
            try:
                _built[name, found] = _made(name, found)
            except FamilyError as e:
                raise FamilyError(f"the {name} family cannot be used: {FAMILIES[name]} {e}") \
                    from None
        return _built[name, found]
    if name in _loaded:
        return _loaded[name]
    if name not in _broken:
        try:
            _loaded[name] = _load(PLUGINS[name])
            return _loaded[name]
        except FamilyError as e:
            _broken[name] = str(e)
    raise FamilyError(_broken[name])


def _imported(spec: str) -> Any:
    """What `package:Class` names, imported (a module where it names no attribute)."""
    module, _, attribute = spec.partition(":")
    found: Any = importlib.import_module(module.strip())
    for attr in filter(None, attribute.strip().split(".")):
        found = getattr(found, attr)
    return found


def _made(name: str, found: Any) -> Family:
    """The instance of the Family subclass that `found` is, named `name`; where it is something
    else (a module, as families once were) a FamilyError saying what it names, to be prefixed
    with whose it is."""
    if not (isinstance(found, type) and issubclass(found, Family)):
        what = "a module" if inspect.ismodule(found) else a(type(found).__name__)
        raise FamilyError(f"names {what}, not a subclass of {BASE} (a family is a class: "
                          "docs/families.md says how to write one).")
    fam = found()
    fam.name = name
    return fam


def _load(p: Plugin) -> Family:
    """Import an installed family, make its instance and hold it to the contract; any failure a
    FamilyError."""
    who = f"the {p.name} family cannot be used: {escaped(p.origin)}"
    try:
        found = _imported(p.module)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (a plugin's import runs its own code)
        raise FamilyError(f"{who} failed to import: {one_line(e)}. Fix or uninstall "
                          f"{escaped(p.distribution)} (pip uninstall); other families run "
                          "without it.") from None
    try:
        fam = _made(p.name, found)
    except FamilyError as e:
        raise FamilyError(f"{who} {e} Fix or uninstall {escaped(p.distribution)} (pip "
                          "uninstall); other families run without it.") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 (its class's __init__ is its own code)
        raise FamilyError(f"{who} failed to make its family: {one_line(e)}.") from None
    wrong = problems(fam)
    if wrong:
        raise FamilyError(f"{who} keeps no family contract: {escaped('; '.join(wrong))} "
                          "(docs/families.md).")
    return fam


def one_line(e: BaseException, limit: int = 300) -> str:
    """An exception as one escaped line: its type and its words, lines joined, control
    characters as \\xNN (a plugin's message cannot steer the terminal), at most `limit` long."""
    text = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
    said = escaped(f"{type(e).__name__}: {text}" if text else type(e).__name__)
    return said if len(said) <= limit else said[:limit - 3] + "..."


def escaped(text: str) -> str:
    """Text from outside (a plugin's names and errors) with control and format characters as
    \\xNN or \\uNNNN."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" if ord(c) < 65536 else f"\\U{ord(c):08x}" for c in text)


def module_name(name: str) -> str:
    """The module a family lives in (a plugin's from its entry point), for messages."""
    return (FAMILIES[name] if name in FAMILIES else PLUGINS[name].module).partition(":")[0]


def loaded() -> Iterator[tuple[str, Family]]:
    """The families this process can ask without running an installed package's code: the
    built-in ones and the plugins imported already."""
    for name in FAMILIES:
        yield name, family(name)
    yield from list(_loaded.items())


def every_family() -> Iterator[tuple[str, Family]]:
    """Every family, for a question only all can answer (which one wrote this file?): the
    loaded ones first, then each installed one imported; one that cannot be used is skipped
    with a PluginWarning (once a process) rather than stop the question."""
    yield from loaded()
    for name in names():
        if name in FAMILIES or name in _loaded:
            continue
        fresh = name not in _broken
        try:
            yield name, family(name)
        except FamilyError as e:
            if fresh:
                warnings.warn(f"{e} Skipped here.", PluginWarning, stacklevel=2)


def export_refused(decl: Declaration, fmt: str, where: object) -> str | None:
    """Why `export --format fmt` cannot take this family's run (None: it can): the one wording
    of every such refusal, naming the loaded families that do support it."""
    if fmt in decl.exports:
        return None
    others = [d for d in (f.declaration(None) for _, f in loaded()) if fmt in d.exports]
    made = " or ".join(f"{d.title} (--estimator {d.name})" for d in others) or "no family here"
    return (f"--format {fmt} is made from {made}; {where} is {a(decl.name)} run ({decl.title}). "
            f"Its exports: {', '.join(decl.exports) or 'none'}.")


def estimator_name(settings: dict[str, Any] | None) -> str:
    """The family a settings dict is for (a dict without the key is the default family's)."""
    return str((settings or {}).get("estimator", DEFAULT_FAMILY))


def declaration(settings: dict[str, Any] | None) -> Declaration:
    """The declaration of the family these settings run."""
    return family(estimator_name(settings)).declaration(settings)


def declaration_of_schema(schema: Any) -> Declaration | None:
    """The declaration whose table a file's schema is, or None (a family's earlier ones too)."""
    for _, fam in every_family():
        found = fam.declaration_of_schema(schema)
        if found is not None:
            return found
    return None


def _default_declarations(name: str, fam: Family,
                          cache: dict[str, tuple[Declaration, ...]] = {}  # noqa: B006
                          ) -> tuple[Declaration, ...]:
    """A family's declaration for default settings, then those of its other variants (`variants()`
    where it has some: point sets with columns of their own), made once a process (read per video)."""
    if name not in cache:
        cache[name] = (fam.declaration(None), *fam.variants())
    return cache[name]


def declaration_of_columns(columns: list[str]) -> Declaration | None:
    """The family whose landmark columns these are (a table read for show, report or diff)."""
    for name, fam in every_family():
        for d in _default_declarations(name, fam):
            if set(d.parts) - set(d.optional) <= set(columns):
                return d
    return None


DEFAULT_BATCH = 8  # frames per model call on the CPU: docs/performance.md
# What a batch holds, a frame at a time: the frame as RGB twice (read ahead, and waiting in the
# batch: video_rows.py), 2 x 5.9 MiB for a 1920x1080 frame, and what the family's models take of
# it (its declaration's batch_input: the whole-body detector's 640x640 float input, 4.7 MiB; about
# 16 MiB in all). A batch may hold BATCH_BYTES, so --batch-size is at most BATCH_BYTES / that
# (a batch of 1,000,000 held a whole video: 3.4 GB on 600 frames of 540x720, 425 MiB at 8).
BATCH_FRAME_BYTES = 2 * 1920 * 1080 * 3
BATCH_BYTES = 2 * 2**30
_TIMES = {2: "twice", 3: "three times"}


def batch_refused(n: int, models_take: tuple[int, str] | None = None) -> str:
    """Why --batch-size n is refused ("" when it is not): fewer than 1, or more frames than a batch
    may hold in BATCH_BYTES, for the batching family whose frames take the most (the flag is read
    before the family is known): of the built-in ones and the installed one the command names;
    or (models_take: bytes and words) for the models a run loaded."""
    if n < 1:
        return f"must be >= 1, not {n}"
    batching = [fam for _, fam in loaded() if fam.declaration(None).batches]
    if not batching:
        return ""
    fam = max(batching, key=lambda f: f.declaration(None).batch_input[0])
    extra, words = models_take or fam.declaration(None).batch_input
    frame = BATCH_FRAME_BYTES + extra
    if n <= BATCH_BYTES // frame:
        return ""
    held = ["RGB read ahead", "RGB in the batch", *([words] if extra else [])]
    return (f"must be at most {BATCH_BYTES // frame}, not {n:,}: a batch holds each of its frames "
            f"about {_TIMES.get(len(held), f'{len(held)} times')} ({', '.join(held)}), about "
            f"{frame / 2**20:.0f} MiB a 1920x1080 frame, and may hold {BATCH_BYTES // 2**30} GiB "
            f"({fam.DOCS})")


RUNTIME = "runtime"  # settings key of how a worker runs (batch size, device), not what it writes


def runtime(batch_size: int | None = None, device: str | None = None,
            gpu_memory: int | None = None, chosen: str = "") -> dict[str, Any]:
    """How a worker of a family that batches frames runs (its declaration's `batches`): frames per
    batch, --device, and on a GPU its share of the card (bytes: its sessions' memory limit) and
    how the coordinator chose them (`chosen`, said at start; jobs/schedule/devices.py). Recorded in
    run.json per worker. What the values depend on of it (the device, provider, options and batch
    shape that actually ran) is the family estimator's `execution` record, kept in every part and
    compared on resume (extract/keypoints/execution.py), not in the fingerprint."""
    out: dict[str, Any] = {"batch_size": batch_size or DEFAULT_BATCH, "device": device or "auto"}
    if gpu_memory:
        out["gpu_memory"] = int(gpu_memory)
    return out | ({"chosen": chosen} if chosen else {})


def open_estimator(settings: dict[str, Any], num_threads: int | None = 1) -> Estimator:
    """The estimator these settings name, built in this process (models loaded, graph started);
    an installed family's held to contract.py's Estimator."""
    name = estimator_name(settings)
    est = family(name).open_estimator(settings, num_threads)
    wrong = estimator_problems(est) if name in PLUGINS and name not in FAMILIES else []
    if wrong:
        raise FamilyError(f"the {name} family cannot be used: {escaped(PLUGINS[name].origin)} "
                          f"gave an estimator that {escaped('; '.join(wrong))} (docs/families.md).")
    return est
