"""Every ``ATTNLAB_*`` environment variable the kit reads, in one table: its name, its default and its meaning.

Read at call time (``get``), never cached, so a test's ``monkeypatch.setenv`` takes effect at once. A module reads
a variable through ``settings.get(settings.NAME)`` and never through ``os.environ`` (``tests/test_settings.py``
holds every module to that); a name written into a child's environment uses the constant here too.
Standard library only and tiny: the worker imports it inside the sandbox. The table is in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import os
from typing import Mapping, NamedTuple


class Variable(NamedTuple):
    name: str
    default: str  # the value ``get`` returns when the variable is unset ("": unset, the meaning says what then)
    meaning: str


ROOT = "ATTNLAB_ROOT"
DATA = "ATTNLAB_DATA"
DATA_MIRROR = "ATTNLAB_DATA_MIRROR"
DEVICE = "ATTNLAB_DEVICE"
FAST = "ATTNLAB_FAST"
SHOW_SOURCE = "ATTNLAB_SHOW_SOURCE"
BUNDLE = "ATTNLAB_BUNDLE"
GRADING_SECRET = "ATTNLAB_GRADING_SECRET"
GRADER_POOL = "ATTNLAB_GRADER_POOL"
SHARD_COUNT = "ATTNLAB_SHARD_COUNT"
SANDBOX = "ATTNLAB_SANDBOX"
SANDBOX_UIDS = "ATTNLAB_SANDBOX_UIDS"
SANDBOX_TOKEN = "ATTNLAB_SANDBOX_TOKEN"
WORKER_START = "ATTNLAB_WORKER_START"
PYTHON = "ATTNLAB_PYTHON"
DB_CONNECT_TIMEOUT_S = "ATTNLAB_DB_CONNECT_TIMEOUT_S"
DB_READ_TIMEOUT_S = "ATTNLAB_DB_READ_TIMEOUT_S"
DB_RETRIES = "ATTNLAB_DB_RETRIES"
DB_BACKOFF_S = "ATTNLAB_DB_BACKOFF_S"

VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable(ROOT, "", "the course repository (course.find_root); unset: the first parent of the working folder "
             "with instructor/course.yml"),
    Variable(DATA, "", "the data cache folder (datasets.download); unset: ~/.cache/attnlab"),
    Variable(DATA_MIRROR, "", "a mirror the data sets are fetched from first (file:///srv/data, /srv/data or "
             "http://host:8000); unset: the public addresses"),
    Variable(DEVICE, "", "the torch device (cpu, cuda, cuda:1, mps, auto; device.pick_device); unset: the best "
             "one here"),
    Variable(FAST, "", "1 forces the small sizes, 0 the full ones (device.is_fast_mode); unset: small without a "
             "CUDA GPU. The worker sets 1"),
    Variable(SHOW_SOURCE, "", "1/true/yes/on: a failed public check shows its statement (public_check)"),
    Variable(BUNDLE, "", "the grading bundle folder a bridge uses (grading.bundle.find_bundle); unset: searched "
             "upwards from the working folder"),
    Variable(GRADING_SECRET, "", "the secret the grading seeds are derived from (grading.bundle); unset: the "
             "digest of the bundle's hidden tests"),
    Variable(GRADER_POOL, "", "threads: a batch's jobs run as threads of one grader process (grading.pool); "
             "unset: forked processes on Linux"),
    Variable(SHARD_COUNT, "", "the number of shards of a Kubernetes indexed Job for --shard auto "
             "(grading.scheduler)"),
    Variable(SANDBOX, "", "the sandbox mechanism: bwrap, unshare, setpriv, none or off (grading.sandbox); unset: "
             "the best that works here"),
    Variable(SANDBOX_UIDS, "64000-64255", "FIRST-LAST: the uids a root grader gives its workers "
             "(grading.sandbox.uids)"),
    Variable(SANDBOX_TOKEN, "", "set by the grader in an unsandboxed worker's environment, never read from "
             "outside: the token that finds its processes to kill (grading.sandbox.mechanisms)"),
    Variable(WORKER_START, "auto", "auto, fork or cold: how a worker starts (grading.sandbox.forked); auto forks "
             "from a warm zygote where that works"),
    Variable(PYTHON, "/opt/attnlab/bin/python", "the Python the Gradescope run_autograder script runs "
             "(read by that shell script, for local runs; buildchain.transforms.gradescope_zip)"),
    Variable(DB_CONNECT_TIMEOUT_S, "", "seconds a gradebook connection may take to open (grading.connection); "
             "unset: 10"),
    Variable(DB_READ_TIMEOUT_S, "", "seconds a gradebook transaction may wait on a silent server before its "
             "socket is shut and it is retried (grading.connection); unset: 60"),
    Variable(DB_RETRIES, "", "how often a failed gradebook transaction is retried on a new connection "
             "(grading.connection); unset: 5"),
    Variable(DB_BACKOFF_S, "", "the first pause before a retry, doubled each time (grading.connection); unset: 1"),
)}


def get(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of the variable ``name`` in ``environ`` (default ``os.environ``, read now), else its default.

    Raises ``KeyError`` for a name not in ``VARIABLES``: a new variable gets its row first.
    """
    variable = VARIABLES[name]
    return (os.environ if environ is None else environ).get(name, variable.default)


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` (a name in ``VARIABLES``) is in ``environ`` (default ``os.environ``), even empty."""
    return VARIABLES[name].name in (os.environ if environ is None else environ)
