"""Past one node: the `slurm` command (plan, then an sbatch array and a merge job), one array
task's run, and the claims through which shards share the chunks on a shared filesystem.

May import: jobs.run, jobs.schedule, jobs.rundir, extract, jobs.messages, jobs.faults.
"""
