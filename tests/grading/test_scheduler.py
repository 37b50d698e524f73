"""--shard auto: the shard comes from a Slurm array job or a Kubernetes indexed Job, and every submission gets
exactly one row when the shards run as separate processes against one PostgreSQL gradebook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from attnlab.grading.batch import export_gradebook, parse_shard
from attnlab.grading.scheduler import shard_from_environment

from .test_batch import write_submissions
from .test_postgres import pg_server, pg_url  # noqa: F401 - fixtures: a real server on loopback


@pytest.mark.parametrize("environ, spec, expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "1/3"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "3/3"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
      "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "3/3"),  # --array=0-4:2 -> tasks 0, 2, 4
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "5"}, "auto/2", "1/2"),
    ({"JOB_COMPLETION_INDEX": "0", "ATTNLAB_SHARD_COUNT": "4"}, "auto", "1/4"),
    ({"JOB_COMPLETION_INDEX": "3"}, " auto / 4 ", "4/4"),
])
def test_the_shard_comes_from_the_scheduler(environ, spec, expected):
    assert shard_from_environment(spec, environ) == expected


@pytest.mark.parametrize("environ, spec, says", [
    ({}, "auto", "found no scheduler"),
    ({"JOB_COMPLETION_INDEX": "1"}, "auto", "ATTNLAB_SHARD_COUNT"),
    ({"SLURM_ARRAY_TASK_ID": "1"}, "auto", "SLURM_ARRAY_TASK_COUNT"),
    ({"JOB_COMPLETION_INDEX": "x", "ATTNLAB_SHARD_COUNT": "2"}, "auto", "JOB_COMPLETION_INDEX='x'"),
    ({"JOB_COMPLETION_INDEX": "4", "ATTNLAB_SHARD_COUNT": "4"}, "auto", "shard 5 of 4"),
    ({"JOB_COMPLETION_INDEX": "0"}, "automatic", "not 'auto'"),
])
def test_a_missing_or_bad_variable_says_what_to_set(environ, spec, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        shard_from_environment(spec, environ)


def test_parse_shard_reads_auto_from_the_environment(monkeypatch):
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    monkeypatch.setenv("ATTNLAB_SHARD_COUNT", "3")
    assert parse_shard("auto") == (2, 3)
    assert parse_shard("1/2") == (1, 2)


SHARD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from attnlab.grading.batch import grade_batch

    def fake(lab, path):
        score = float(len(Path(path).read_bytes()) % 5)
        return {"submission": str(path), "score": score, "max_score": 4.0, "isolation": "fake",
                "elapsed_s": 0.0, "errors": [], "questions": {"q": {"score": score, "max_score": 4.0, "messages": []}}}

    src, out, gradebook = sys.argv[1:]
    summary = grade_batch("lab01", [src], out_dir=out, shard="auto", gradebook=gradebook, grade_fn=fake,
                          progress=False)
    print(json.dumps([r["key"] for r in summary.results]))
""")


def _run_shards(src, out, url, environs):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JOB_COMPLETION", "ATTNLAB_SHARD"))}
    procs = [subprocess.Popen([sys.executable, "-c", SHARD, str(src), str(out), url], env={**base, **extra},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for extra in environs]
    graded = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=180)
        assert p.returncode == 0, stderr
        graded.append(json.loads(stdout.strip().splitlines()[-1]))
    return graded


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
def test_shards_in_separate_processes_give_every_submission_one_row(scheduler, pg_url, tmp_path):  # noqa: F811
    names = [f"s{i:02d}.ipynb" for i in range(30)]
    src = write_submissions(tmp_path / "subs", {n: b"x" * i for i, n in enumerate(names)})
    if scheduler == "slurm":  # sbatch --array=1-3
        environs = [{"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
                    for i in (1, 2, 3)]
    else:  # an indexed Job with completions: 3
        environs = [{"JOB_COMPLETION_INDEX": str(i), "ATTNLAB_SHARD_COUNT": "3"} for i in (0, 1, 2)]
    graded = _run_shards(src, tmp_path / "out", pg_url, environs)
    assert all(graded), f"a shard graded nothing: {graded}"
    assert sorted(k for keys in graded for k in keys) == names  # disjoint and complete
    assert export_gradebook(pg_url, tmp_path / "all.csv") == 30
    rows = (tmp_path / "all.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == names  # exactly one row each
