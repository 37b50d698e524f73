"""Grading many submissions: which files and keys (`submissions`), a batch with resume and resubmissions
(`batch`), N forked graders (`pool`), shards from Slurm or Kubernetes (`scheduler`), a live progress line
(`progress`) and a gradebook checked against the submissions (`gradebook_check`).
"""
