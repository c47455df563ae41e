"""Every call of a user's model bounded in time and memory. A model file is untrusted input: one
whose graph loops for ever, or grows 4 MB a trip, would hang a worker (a SLURM job until its
wall-clock limit) or grow it until the OOM killer, whatever frames it is given.

Each call, the start-up check on one grey input as every batch, runs under a watchdog (the
process's one watcher thread looks at every call under way) that reads the clock and this process's
own resident memory (/proc/self/statm: resident minus file-backed pages, so libraries loaded by a
first call do not count) every POLL_S while onnxruntime runs (it lets go of the GIL meanwhile).
Past the call's deadline, or its memory limit, the watchdog sets the call's RunOptions.terminate:
onnxruntime checks it between nodes, inside a Loop's body too (1.32, measured: a Loop of 2^62 trips
stops within a poll of it), the call raises, and the model is refused (ModelLimitError, exit 2) by
a message naming the file and the limit, never the frames. A single node that does not come back
(one kernel running for hours, one allocation far past the limit) cannot be stopped so: at HARD x
the deadline, or HARD x the memory limit, the watchdog says the refusal (`last_word`: the command
prints it, a worker sends it to its coordinator) and ends the process, exit 2.

Before any call, a model's declared input is bounded too (input_refused): at most MAX_INPUT_SIDE
pixels a side (no published detector or pose model takes more than 1,280; a 20000x20000 one made
the start-up check hold 4.8 GB before its first node ran).

The limits scale with what a call holds:
- time: DEADLINE_S (`--model-deadline`), 60 s an input (a frame for the detector, a crop for the
  pose model), so a call of N gets N times it: the heaviest published detector, YOLOX-x at 640,
  takes about 2 s a frame on one loaded CPU core, and CUDA's first call tunes its kernels in
  seconds;
- memory: MEMORY_MIB (`--model-memory`), 2048 MiB a frame the call serves, what the process's
  resident memory may grow by during the call (onnxruntime's arena keeps what a first call took:
  later calls grow little). A frame, not an input: how many crops reach the pose model is the
  detector's answer (up to --max-persons a frame), so crops share their frame's limit, and the
  pose model's calls are cut so that each stays within it (runner.PoseModel.crops_a_call, from the
  growth `last_growth` measured per crop); a model one crop of which passes it is refused.
Neither changes what a model answers, so neither is part of a run's identity (as --batch-size).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.onnx_files import advised

DEADLINE_S = 60.0  # seconds a call may take, per input it holds
MEMORY_MIB = 2048  # MiB the process may grow by during a call, per frame it serves
MAX_DEADLINE_S = 86_400.0  # --model-deadline's bound: a day an input
MAX_MEMORY_MIB = 1 << 20  # --model-memory's bound: 1 TiB an input
POLL_S = 0.02  # how often the watchdog looks (a Loop growing 4 MB a trip: about 20 MB a poll)
IDLE_S = 1.0  # the watcher polls on this long after a call (calls come in runs), then sleeps
HARD = 2  # past HARD x a limit a call that did not stop when told ends the process
MAX_INPUT_SIDE = 4096  # pixels a side of a model's declared input (published ones: 192 to 1,280)
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one call may take: seconds per input it holds, MiB per frame it serves."""

    deadline_s: float = DEADLINE_S
    memory_mib: int = MEMORY_MIB


_limits = Limits()
_here = threading.local()  # the run options of the call under way in this thread


def set_limits(deadline_s: float | None = None, memory_mib: int | None = None) -> None:
    """This process's limits (None: the default); the command sets them from its options, a worker
    from its runtime settings."""
    global _limits
    _limits = Limits(DEADLINE_S if deadline_s is None else float(deadline_s),
                     MEMORY_MIB if memory_mib is None else int(memory_mib))


def limits() -> Limits:
    return _limits


def _saved_stderr() -> int:
    """A descriptor of stderr as it is when this module loads: loading a model sends fd 2 to a
    file meanwhile (onnxruntime's warnings are caught there), and a refusal said then must reach
    the terminal."""
    try:
        return os.dup(2)
    except OSError:
        return -1


_STDERR = _saved_stderr()


def say_error(text: str) -> None:
    """`error: TEXT` on the saved stderr, control characters escaped (the default last word)."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    with contextlib.suppress(OSError):  # no stderr: the exit status still says it
        os.write(_STDERR, f"error: {shown}\n".encode("utf-8", "backslashreplace"))


_last_word: list[Callable[[str], None]] = [say_error]


def set_last_word(say: Callable[[str], None]) -> None:
    """Who is told the refusal when a call that did not stop ends the process: the command prints
    it as its errors, a worker sends it to its coordinator."""
    _last_word[0] = say


class ModelLimitError(ModelFileError):
    """A model call ran past its deadline or memory limit: the model file is at fault (exit 2)."""


def input_refused(hw: tuple[int, int]) -> str:
    """Why a model's declared input (height, width) is refused ("" when it is not): a side below
    1 or above MAX_INPUT_SIDE."""
    if min(hw) < 1 or max(hw) > MAX_INPUT_SIDE:
        return (f"its input is declared {hw[0]:,}x{hw[1]:,} pixels; a model's input may be at "
                f"most {MAX_INPUT_SIDE:,} pixels a side (published detectors and pose models take "
                "192 to 1,280)")
    return ""


def run_options() -> Any:
    """The RunOptions of the bounded call under way in this thread (its watchdog may set
    `terminate` on them), quiet: onnxruntime prints nothing while running, a failure comes back
    as an exception. Outside a bounded call: fresh ones."""
    options = getattr(_here, "options", None)
    return options if options is not None else _quiet()


def _quiet() -> Any:
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4  # fatal only
    return options


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident memory that is its own (resident minus file-backed and shared pages:
    what it allocated, not the libraries a first CUDA call maps in), or 0 where /proc cannot say:
    memory is then not watched."""
    try:
        fields = os.pread(_statm(), 256, 0).split()
        return max(1, int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


_STATM: dict[int, int] = {}  # pid -> its open /proc/self/statm: read twice a call, opened once


def _statm() -> int:
    """This process's /proc/self/statm, kept open (an open and a close were most of a read's
    ~18 us of CPU); a forked child opens its own (the inherited one is its parent's)."""
    pid = os.getpid()
    fd = _STATM.get(pid)
    if fd is None:
        fd = _STATM[pid] = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    return fd


class _Watchdog:
    """Watches one call: past a limit sets terminate on its run options (None: a call nothing can
    stop, a model's load), past HARD x it (or at once where nothing can stop it) says the refusal
    and ends the process. Checked every POLL_S by the process's one watcher thread (_Watcher)."""

    def __init__(self, options: Any, seconds: float, limit: int,
                 refusal: Callable[[str, str], str]) -> None:
        self.options, self.seconds, self.limit, self.refusal = options, seconds, limit, refusal
        self.why = ""  # "time" or "memory" once the call was told to stop
        self.start_at, self.base = time.monotonic(), resident_bytes()
        self.peak = 0  # the most the process grew by while watched (bytes)

    def check(self) -> None:
        """One look: the clock and this process's memory against the call's limits."""
        hard = HARD if self.options is not None else 1
        took = time.monotonic() - self.start_at
        grew = resident_bytes() - self.base if self.base else 0
        self.peak = max(self.peak, grew)
        if not self.why and (took > self.seconds or grew > self.limit):
            self.why = "time" if took > self.seconds else "memory"
            if self.options is not None:
                self.options.terminate = True
                return
        if self.why and (took > hard * self.seconds or grew > hard * self.limit):
            _last_word[0](self.refusal(self.why, "ended" if self.options is None else
                                       "ended, as it did not stop when told to"))
            os._exit(2)

    def __enter__(self) -> _Watchdog:
        _WATCHER.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _WATCHER.remove(self)
        if self.base:  # a call shorter than a poll is measured once, as it ends
            self.peak = max(self.peak, resident_bytes() - self.base)


class _Watcher:
    """One long-lived thread a process that checks every call under way each POLL_S (a thread
    started and joined per call cost ~0.2-0.6 ms a call, issue 53 item 12); asleep once none has
    run for IDLE_S (a call that finds it asleep wakes it, once a run of calls).
    Checks run under the lock, so once remove() returns a call's watchdog is never touched again
    (its `why` is final, as a joined thread's was)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Fresh state: at first use and in a forked child (which has no watcher thread)."""
        self._cond = threading.Condition()
        self._calls: list[_Watchdog] = []
        self._thread: threading.Thread | None = None
        self._idle = False  # waiting for a call, not polling: the next call wakes it
        self._last = 0.0  # when the last call ended: polling goes on IDLE_S after it

    def add(self, dog: _Watchdog) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="model-call-watchdog",
                                                daemon=True)
                self._thread.start()
            self._calls.append(dog)
            if self._idle:  # a polling watcher finds the call at its next look, unwoken
                self._cond.notify()

    def remove(self, dog: _Watchdog) -> None:
        with self._cond:
            self._calls.remove(dog)
            self._last = time.monotonic()

    def _loop(self) -> None:
        with self._cond:
            while True:
                if not self._calls and time.monotonic() - self._last > IDLE_S:
                    self._idle = True
                    self._cond.wait()  # until a call starts
                    self._idle = False
                    continue
                self._cond.wait(POLL_S)
                for dog in list(self._calls):
                    dog.check()


_WATCHER = _Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHER._reset)


def _refusal(flag: str, path: Path, doing: str, seconds: float, mib: int, why: str,
             how: str = "stopped", advice: str = "") -> str:
    """The refusal of a model past a limit: the file, what it was doing, the limit and its flag,
    and `how` it ended ("stopped"; a process "ended"); `advice`: the family's own words."""
    if why == "time":
        past = f"ran past {seconds:g} s (--model-deadline: {_limits.deadline_s:g} s an input)"
        more = "a larger --model-deadline if this model is that slow"
    else:
        past = (f"grew this process's memory by more than {mib:,} MiB (--model-memory: "
                f"{_limits.memory_mib:,} MiB a frame)")
        more = "a larger --model-memory if this model needs that much"
    ended = "was stopped" if how == "stopped" else f"the process was {how}"
    return (f"{flag} {path}: {doing} {past}, and {ended}. The model file is at fault, not "
            "the frames: a published detector or pose model loads and answers an input in a few "
            f"seconds and well under a GiB. Pass another file, or {more}{advised(advice)}.")


def _doing(n: int, frames: int | None) -> str:
    """What a call holds, in words: its inputs, and where they are crops the frames they serve."""
    if frames is None:
        return f"a call of this model on {f'{n:,} inputs' if n > 1 else 'one input'}"
    return (f"a call of this model on {f'{n:,} crops' if n > 1 else 'one crop'} of "
            f"{f'{frames:,} frames' if frames > 1 else 'one frame'}")


def bounded(call: Callable[[], T], flag: str, path: Path, inputs: int = 1,
            frames: int | None = None, advice: str = "") -> T:
    """call() (which runs the model with run_options()) under this process's limits: the deadline
    of `inputs` inputs, the memory of `frames` frames (None: one an input, a detector's frames);
    past one, ModelLimitError naming the file and the limit (`advice`: the family's own words
    after it). last_growth() then says how much the process grew by during it."""
    n = max(1, int(inputs))
    f = None if frames is None else max(1, int(frames))
    seconds, mib = _limits.deadline_s * n, _limits.memory_mib * (n if f is None else f)
    doing = _doing(n, f)
    options = _quiet()
    _here.options = options
    def refusal(why: str, how: str = "stopped") -> str:
        return _refusal(flag, path, doing, seconds, mib, why, how, advice)

    with _Watchdog(options, seconds, mib * 2**20, refusal) as dog:
        try:
            out = call()
        except Exception:
            if dog.why:
                raise ModelLimitError(refusal(dog.why)) from None
            raise
        finally:
            _here.options = None
    _here.grew = dog.peak
    if dog.why:  # it came back, but past the limit
        raise ModelLimitError(refusal(dog.why))
    return out


def last_growth() -> int:
    """The most this process grew by (bytes) during the last bounded call of this thread that
    came back (0 before any, or where /proc cannot say)."""
    return int(getattr(_here, "grew", 0))


def bounded_load(make: Callable[[], T], flag: str, path: Path, size: int, advice: str = "") -> T:
    """make() (onnxruntime loading a model of `size` bytes: it computes the graph's constant parts
    then, which nothing can stop) under one input's deadline and its memory limit plus 4 x the
    file's size; past either, the refusal is said and the process ends."""
    seconds, mib = _limits.deadline_s, _limits.memory_mib + 4 * size // 2**20
    doing = "loading this model (onnxruntime computes the constant parts of its graph then)"
    with _Watchdog(None, seconds, mib * 2**20,
                   lambda why, how: _refusal(flag, path, doing, seconds, mib, why, how, advice)):
        return make()
