"""One run, from input to merged outputs: which input a folder belongs to (identity.py), the
options asked, planning and re-planning a changed corpus, what is done (done.py, the resume rule)
and what is left to do, putting the extraction together, the merge and its finish, the outputs'
state, and what the start and end of a run say.

May import: jobs.schedule, jobs.rundir, extract, jobs.messages, jobs.faults.
"""
