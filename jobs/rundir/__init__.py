"""The run folder: where a run keeps everything (folder.py), run.json as one typed record
(runinfo.py), parts and their trust (parts.py), how they were computed (made_under.py), locks,
the heartbeat, which shards the folder says are complete (shards.py), and which recorded rows'
frames changed on disk (stale.py).

May import: extract, jobs.messages, jobs.faults.
"""
