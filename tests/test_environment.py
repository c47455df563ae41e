"""What the tool's processes inherit and what leaves the machine (issue 37, items 1 and 2).

The current folder is often the corpus (`cd corpus && phoenix-keypoints run --dataset .`), and
libraries change os.environ when imported (cv2 appends an empty entry, the current folder, to
LD_LIBRARY_PATH). Planted here for real: a shared library built with gcc under a name the dynamic
loader looks up (numpy's OpenBLAS needs libpthread.so.0), with a constructor that writes a marker,
and a `multiprocessing.py` that a spawned interpreter would import from its folder. onnxruntime's
telemetry is watched with strace on the whole process tree, in a network namespace where one can
be made, so even the old code's lookup never leaves this machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import (
    assert_no_traceback,
    careful_env,
    copy_dataset,
    plant_library,
    read_keypoints,
    system_deps,
)

CLI = Path(sys.executable).parent / "phoenix-keypoints"  # the console script a user types
SAFE_PATH = sys.version_info >= (3, 11)  # PYTHONSAFEPATH: 3.10 has no such switch


def _plant(folder: Path, marker: Path, module: bool = False) -> None:
    """Code that writes `marker` if it ever runs: a shared library the loader looks up by name, or
    a module a spawned `python -c` would import from its current folder (a shadowed stdlib module)."""
    if not module:
        plant_library(folder, marker)
        return
    if not SAFE_PATH:
        pytest.skip("Python 3.10 has no PYTHONSAFEPATH: its `python -c` imports from the cwd")
    (folder / "multiprocessing.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(f'module in pid {{os.getpid()}}\\n')\n")
    subprocess.run([sys.executable, "-c", "import multiprocessing"], cwd=folder, check=True,
                   env=careful_env())
    assert "module in pid" in marker.read_text()  # the plant works where the cwd is searched
    marker.unlink()


@pytest.mark.parametrize("estimator, planted", [("wholebody", "library"), ("holistic", "library"),
                                                ("wholebody", "module")])
def test_code_planted_in_the_current_folder_never_runs(estimator: str, planted: str,
                                                       sample_root: Path,
                                                       wholebody_options: list[str],
                                                       tmp_path: Path) -> None:
    """`cd corpus && phoenix-keypoints run --dataset .` with a library or a module planted in the
    corpus: it never runs, in the coordinator, the workers or multiprocessing's resource tracker,
    and the run works (on 2e4d814 the library ran in every worker, the module too, killing them)."""
    corpus = copy_dataset(sample_root, tmp_path / "corpus", writable=True)
    marker = tmp_path / "MARKER"
    _plant(corpus, marker, module=planted == "module")
    options = wholebody_options if estimator == "wholebody" else ["--videos", "cameraman-1"]
    proc = subprocess.run([str(CLI), "run", "--dataset", ".", "--out", str(tmp_path / "run"),
                           "--workers-per-gpu", "2", *options],
                          cwd=corpus, env=careful_env(), capture_output=True, text=True, timeout=600)
    assert not marker.exists(), marker.read_text()
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    table = read_keypoints(tmp_path / "run")
    assert table.num_rows == (82 if estimator == "wholebody" else 16)
    assert set(table["status"].to_pylist()) == {"ok"}


@pytest.mark.slow
def test_ray_actors_load_nothing_from_the_current_folder(sample_root: Path,
                                                          wholebody_options: list[str],
                                                          tmp_path: Path) -> None:
    """`--backend ray` from the corpus folder: the local Ray's processes (raylet, workers, actors)
    inherit the coordinator's environment, cleaned; on 2e4d814 ten of them loaded the library."""
    pytest.importorskip("ray", reason="Ray is not installed (the [ray] extra)")
    corpus = copy_dataset(sample_root, tmp_path / "corpus", writable=True)
    marker = tmp_path / "MARKER"
    _plant(corpus, marker)
    proc = subprocess.run([str(CLI), "run", "--dataset", ".", "--out", str(tmp_path / "run"),
                           "--backend", "ray", "--workers-per-gpu", "2", *wholebody_options],
                          cwd=corpus, env=careful_env(), capture_output=True, text=True, timeout=600)
    assert not marker.exists(), marker.read_text()
    assert proc.returncode == 0, proc.stderr
    assert read_keypoints(tmp_path / "run").num_rows == 82


def test_run_job_after_cv2_dirtied_the_environment(sample_root: Path, wholebody_options: list[str],
                                                   tmp_path: Path) -> None:
    """A notebook that imported cv2 (LD_LIBRARY_PATH now ends in `:`) and calls run_job from the
    corpus folder: its workers load nothing from there, and its own os.environ is left as it was."""
    corpus = copy_dataset(sample_root, tmp_path / "corpus", writable=True)
    marker = tmp_path / "MARKER"
    _plant(corpus, marker)
    detector, pose = wholebody_options[3], wholebody_options[5]
    script = tmp_path / "notebook.py"
    script.write_text(textwrap.dedent(f"""\
        import os
        import cv2
        before = os.environ["LD_LIBRARY_PATH"]
        assert before.endswith(":"), before
        from phoenix_keypoints import run_job
        result = run_job(".", {str(tmp_path / "run")!r}, workers=2, estimator="wholebody",
                         detector={detector!r}, pose_model={pose!r})
        assert result.complete, result
        assert os.environ["LD_LIBRARY_PATH"] == before and "PYTHONSAFEPATH" not in os.environ
        print("done")
        """))
    proc = subprocess.run([sys.executable, str(script)], cwd=corpus, env=careful_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    assert not marker.exists(), marker.read_text()


def test_clean_environment_drops_every_entry_that_is_a_relative_folder() -> None:
    """The rules, one variable each: empty and relative entries out (glibc also splits
    LD_LIBRARY_PATH at `;`), bare preload names kept (looked up on the cleaned path), a search path
    left with nothing unset rather than empty, the rest of the environment untouched."""
    from phoenix_keypoints.extract.keypoints.environ import clean_environment

    env = clean_environment({
        "LD_LIBRARY_PATH": "/opt/cv2/../../lib64::lib;/usr/lib;./x:",
        "LD_PRELOAD": "libjemalloc.so.2 ./evil.so /opt/tcmalloc.so:sub/evil.so",
        "LD_AUDIT": "audit/a.so:/abs/a.so",
        "PYTHONPATH": ":/repo:src:.",
        "PATH": "/usr/bin::bin:.",
        "GCONV_PATH": ".",
        "HOME": "/home/me", "CUDA_VISIBLE_DEVICES": "1",
    })
    assert env == {
        "LD_LIBRARY_PATH": "/opt/cv2/../../lib64:/usr/lib",
        "LD_PRELOAD": "libjemalloc.so.2:/opt/tcmalloc.so",
        "LD_AUDIT": "/abs/a.so",
        "PYTHONPATH": "/repo",
        "PATH": "/usr/bin",
        "HOME": "/home/me", "CUDA_VISIBLE_DEVICES": "1",
        "ORT_DISABLE_TELEMETRY": "1", "PYTHONSAFEPATH": "1",
    }


def test_slurm_scripts_start_in_the_run_folder_with_telemetry_off(tmp_path: Path) -> None:
    """sbatch runs a script in the folder it was called from, with the caller's environment: the
    scripts move to the run folder and set what every process of the tool needs, whoever submits."""
    from phoenix_keypoints.jobs.cluster.slurm import SlurmOptions, render_array, render_merge
    from phoenix_keypoints.jobs.rundir.folder import RunDir

    rd = RunDir(tmp_path / "run a")
    for text in (render_array(rd, 4, [0, 1], SlurmOptions()), render_merge(rd, SlurmOptions())):
        lines = text.splitlines()
        assert f'#SBATCH --chdir="{tmp_path / "run a"}"' in lines
        export = lines.index("export ORT_DISABLE_TELEMETRY=1 PYTHONSAFEPATH=1")
        assert export < next(i for i, line in enumerate(lines) if line.startswith("exec "))


# --- nothing leaves the machine ------------------------------------------------------------------
WATCHED = "execve,connect,sendto,sendmsg,sendmmsg"  # execve: each process started shows
_INET = re.compile(r"^(\d+)\s+(\w+)\(.*?\{sa_family=AF_INET6?, ([^}]*)\}", re.M)


def _traced(cmd: list[str], cwd: Path, env: dict[str, str], trace: Path) -> subprocess.CompletedProcess:
    """`cmd` under strace -f (every process it starts), in a network namespace of its own where one
    can be made: a lookup then fails at once, visible all the same, and nothing is sent out."""
    system_deps("strace")
    if subprocess.run(["strace", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode:
        pytest.skip("strace cannot trace here (ptrace not permitted)")
    netns = ["unshare", "--net"] if subprocess.run(["unshare", "--net", "true"],
                                                    capture_output=True).returncode == 0 else []
    return subprocess.run([*netns, "strace", "-f", "-qq", "-e", f"trace={WATCHED}", "-o",
                           str(trace), *cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def _outside_calls(trace: Path) -> list[str]:
    """The calls of the trace that address a DNS server (port 53) or any host but this one."""
    text = trace.read_text()
    return [m.group(0) for m in _INET.finditer(text)
            if "htons(53)" in m.group(3) or not re.search(r'"(127\.|::1"|::ffff:127\.)', m.group(3))]


def _assert_stayed_home(proc: subprocess.CompletedProcess, trace: Path, home: Path,
                        processes: int) -> None:
    assert proc.returncode == 0, proc.stderr
    started = set(re.findall(r"^(\d+) +execve\(", trace.read_text(), re.M))
    assert len(started) >= processes, f"strace saw {len(started)} process(es) start"  # -f follows
    assert _outside_calls(trace) == []
    assert not (home / ".cache" / "Microsoft").exists(), sorted(home.rglob("*"))


@pytest.mark.slow
def test_wholebody_run_longer_than_the_telemetry_delay_stays_on_this_machine(
        sample_root: Path, wholebody_options: list[str], tmp_path: Path) -> None:
    """A whole-body run of about 20 s (the coordinator and a worker each hold onnxruntime well past
    its ~10 s telemetry delay) makes no DNS lookup and no connection out, and writes nothing under
    $HOME/.cache/Microsoft. On 2e4d814 each process resolved mobile.events.data.microsoft.com."""
    home = tmp_path / "home"
    home.mkdir()
    trace = tmp_path / "trace.txt"
    if shutil.which("getent"):  # the watch can fail: a lookup made as a C library makes one shows
        _traced(["getent", "ahosts", "mobile.events.data.microsoft.com"], tmp_path, careful_env(), trace)
        assert any("htons(53)" in call for call in _outside_calls(trace)), trace.read_text()
    env = careful_env({"HOME": str(home), "PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.25"})
    proc = _traced([str(CLI), "run", "--dataset", str(sample_root), "--out", str(tmp_path / "run"),
                    "--workers-per-gpu", "1", *wholebody_options], tmp_path, env, trace)
    assert_no_traceback(proc)
    # the coordinator, the worker, the resource tracker: strace's -f wrote lines for each
    _assert_stayed_home(proc, trace, home, processes=3)
    assert read_keypoints(tmp_path / "run").num_rows == 82


def test_onnxruntime_imported_first_is_said(tmp_path: Path) -> None:
    """Code that imported onnxruntime before the tool could turn its telemetry off is told how to;
    imported the other way round, the variable is there before onnxruntime loads, and no warning."""
    code = ("import warnings, os; warnings.simplefilter('error'); import onnxruntime; "
            "from phoenix_keypoints.extract.families.wholebody import runner")
    late = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=careful_env(),
                          capture_output=True, text=True, timeout=120)
    assert late.returncode == 1 and "RuntimeWarning" in late.stderr
    assert "set ORT_DISABLE_TELEMETRY=1 before importing onnxruntime" in late.stderr
    first = ("import warnings, os; warnings.simplefilter('error'); "
             "from phoenix_keypoints.extract.families.wholebody import runner; import onnxruntime; "
             "assert os.environ['ORT_DISABLE_TELEMETRY'] == '1'")
    ok = subprocess.run([sys.executable, "-c", first], cwd=tmp_path, env=careful_env(),
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.slow
def test_extract_keypoints_in_a_notebook_stays_on_this_machine(sample_root: Path,
                                                                 wholebody_options: list[str],
                                                                 tmp_path: Path) -> None:
    """extract_keypoints(estimator="wholebody") in a process that lives on past the telemetry delay
    (a notebook keeps its kernel): no lookup, nothing under ~/.cache/Microsoft."""
    home = tmp_path / "home"
    home.mkdir()
    frames = next((sample_root / "features" / "fullFrame-210x260px" / "dev").iterdir())
    script = tmp_path / "notebook.py"
    script.write_text(textwrap.dedent(f"""\
        import time
        from phoenix_keypoints import extract_keypoints
        k = extract_keypoints({str(frames)!r}, estimator="wholebody",
                              detector={wholebody_options[3]!r}, pose_model={wholebody_options[5]!r})
        assert len(k.status) == 16, k
        time.sleep(15)
        print("done")
        """))
    trace = tmp_path / "trace.txt"
    proc = _traced([sys.executable, str(script)], tmp_path, careful_env({"HOME": str(home)}), trace)
    assert "done" in proc.stdout, proc.stderr
    _assert_stayed_home(proc, trace, home, processes=1)

