"""How the work is split, run, recovered and merged. Rooms, lowest first: rundir/ (the run
folder), schedule/ (workers and the scheduler), run/ (one run from input to outputs), cluster/
(SLURM). A room imports only rooms below it; messages.py and faults.py, which import nothing of
this project, may be imported from anywhere. At the top are the commands: cli.py (the command
line), runner.py (`run`, `merge`), status.py, verify.py and inspect.py (run-folder glue for
`report`, `show`, `diff`), api.py (`run_job`: `run` from Python). tests/test_codebase.py checks
the rules.

The public face for Python (docs/python.md): `from phoenix_keypoints import run_job`.
"""
