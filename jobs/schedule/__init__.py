"""Running chunks on workers: the one scheduler (a state machine fed typed events), its work
queue and failure policy, the worker, its backends (local processes, Ray actors, the simulator's
fake), the progress bar, the CPUs and GPUs a worker gets, and the plan read back as chunk tasks.

May import: jobs.rundir, extract, jobs.messages, jobs.faults.
"""
