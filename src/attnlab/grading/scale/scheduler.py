"""Which shard this process grades when a cluster scheduler started it: ``--shard auto``.

``--shard auto/N`` (what the job files use): the count N is carried in the job file, and the index is the task's
own number, so a task rerun alone (``sbatch --array=K``, whose environment says 1 task, ``MIN=MAX=K``) or requeued
grades the same share as the first time. Slurm: task ``K`` of ``--array=1-N`` is shard ``K/N``
(``SLURM_ARRAY_TASK_ID``; an id outside 1..N is refused). Kubernetes: ``JOB_COMPLETION_INDEX`` (0-based) ``+ 1``.

``--shard auto``: the count from the environment, for a whole array only: Slurm's ``SLURM_ARRAY_TASK_COUNT`` (the
index relative to ``SLURM_ARRAY_TASK_MIN`` and ``_STEP``), or the manifest's ``ATTNLAB_SHARD_COUNT``. A one-task
Slurm array whose id is not 0 or 1 looks like a rerun of one task of a larger array and is refused (give auto/N).
Every shard writes to one PostgreSQL gradebook.

    >>> shard_from_environment("auto", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0",
    ...                                 "SLURM_ARRAY_TASK_COUNT": "4"})
    '4/4'
    >>> shard_from_environment("auto/8", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "3",
    ...                                   "SLURM_ARRAY_TASK_MAX": "3", "SLURM_ARRAY_TASK_COUNT": "1"})
    '3/8'
    >>> shard_from_environment("auto/8", {"JOB_COMPLETION_INDEX": "0"})
    '1/8'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from attnlab import settings

AUTO = re.compile(r"\s*auto\s*(?:/\s*(\d+)\s*)?")


def is_auto(spec) -> bool:
    return spec is not None and AUTO.fullmatch(str(spec)) is not None


def _int(environ: Mapping[str, str], name: str) -> int:
    value = environ[name]
    if not re.fullmatch(r"\s*\d+\s*", value):
        raise ValueError(f"{name}={value!r} is not a whole number; --shard auto reads it as the shard index or count")
    return int(value)


def _slurm(environ: Mapping[str, str], count: int | None) -> tuple[int, int]:
    task = _int(environ, "SLURM_ARRAY_TASK_ID")
    if count is not None:  # auto/N: the task id is the shard, whatever this job's own array (a rerun of one task)
        if not 1 <= task <= count:
            raise ValueError(f"SLURM_ARRAY_TASK_ID={task}: with --shard auto/{count} the array's task ids are the "
                             f"shard numbers 1..{count} (sbatch --array=1-{count}, or --array=K to rerun task K)")
        return task, count
    if environ.get("SLURM_ARRAY_TASK_COUNT", "").strip() == "1" and task not in (0, 1):
        raise ValueError(f"this Slurm job is one task, id {task}: a rerun of one task of a larger array? --shard auto "
                         "would make it 1/1 and grade everything; give the array's count: --shard auto/N")
    first = _int(environ, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in environ else 0
    step = _int(environ, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in environ else 1
    if "SLURM_ARRAY_TASK_COUNT" not in environ:
        raise ValueError("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; give the count: "
                         "--shard auto/N")
    count = _int(environ, "SLURM_ARRAY_TASK_COUNT")
    return (task - first) // max(step, 1) + 1, count


def _kubernetes(environ: Mapping[str, str], count: int | None) -> tuple[int, int]:
    if count is None:
        if not settings.is_set(settings.SHARD_COUNT, environ):
            raise ValueError("JOB_COMPLETION_INDEX is set but the number of shards is not: set ATTNLAB_SHARD_COUNT "
                             "to the Job's completions (see docs/GRADING_AT_SCALE.md), or pass --shard auto/N")
        count = _int(environ, settings.SHARD_COUNT)
    return _int(environ, "JOB_COMPLETION_INDEX") + 1, count


def shard_from_environment(spec: str, environ: Mapping[str, str] | None = None) -> str:
    """``"auto"`` or ``"auto/N"`` -> ``"i/N"`` (1-based) from the scheduler's variables; raises ``ValueError``."""
    environ = os.environ if environ is None else environ
    match = AUTO.fullmatch(str(spec))
    if match is None:
        raise ValueError(f"shard {spec!r} is not 'auto' or 'auto/N'")
    count = int(match.group(1)) if match.group(1) else None
    if "SLURM_ARRAY_TASK_ID" in environ:
        index, count = _slurm(environ, count)
    elif "JOB_COMPLETION_INDEX" in environ:
        index, count = _kubernetes(environ, count)
    else:
        raise ValueError("--shard auto found no scheduler: set by a Slurm array job (SLURM_ARRAY_TASK_ID, "
                         "SLURM_ARRAY_TASK_COUNT) or a Kubernetes indexed Job (JOB_COMPLETION_INDEX with "
                         "ATTNLAB_SHARD_COUNT); elsewhere give the shard as i/N")
    if not 1 <= index <= count:
        raise ValueError(f"the scheduler's task gives shard {index} of {count}, outside 1..{count}: check the "
                         "array range against the shard count")
    return f"{index}/{count}"
