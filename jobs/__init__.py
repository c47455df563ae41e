"""How the work is split, run, recovered and merged. Rooms, lowest first: rundir/ (the run
folder), schedule/ (workers and the scheduler), run/ (one run from input to outputs), cluster/
(SLURM). A room imports only rooms below it; messages.py and faults.py, which import nothing of
this project, may be imported from anywhere. At the top are the commands: cli.py (the command
line), runner.py (`run`, `merge`), status.py, verify.py and inspect.py (run-folder glue for
`report`, `show`, `diff`), api.py (`run_job`: `run` from Python). tests/test_codebase.py checks
the rules.

The public face for Python (docs/python.md): `from jobs import run_job`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

PUBLIC = {"run_job": "jobs.api", "RunResult": "jobs.api", "RunRefused": "jobs.api"}
__all__ = list(PUBLIC)


def __getattr__(name: str) -> Any:
    """Imported when first asked for: spawned workers and `import jobs.cli` stay cheap."""
    if name in PUBLIC:
        return getattr(import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'jobs' has no attribute {name!r}")
