"""Grading many submissions: which files and keys (`submissions`), a batch with resume and resubmissions
(`batch`), N forked graders (`pool`), shards from Slurm or Kubernetes (`scheduler`) and a live progress line
(`progress`).
"""
