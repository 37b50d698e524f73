"""Which shard this process grades when a cluster scheduler started it: ``--shard auto``.

Slurm array jobs set ``SLURM_ARRAY_TASK_ID``, ``SLURM_ARRAY_TASK_MIN``, ``SLURM_ARRAY_TASK_STEP`` and
``SLURM_ARRAY_TASK_COUNT``; Kubernetes indexed Jobs set ``JOB_COMPLETION_INDEX`` (0-based) and leave the count to
the manifest (``ATTNLAB_SHARD_COUNT``, or ``--shard auto/N``). Every shard writes to one PostgreSQL gradebook.

    >>> shard_from_environment("auto", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0",
    ...                                 "SLURM_ARRAY_TASK_COUNT": "4"})
    '4/4'
    >>> shard_from_environment("auto/8", {"JOB_COMPLETION_INDEX": "0"})
    '1/8'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .. import settings

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
    first = _int(environ, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in environ else 0
    step = _int(environ, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in environ else 1
    if count is None:
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
