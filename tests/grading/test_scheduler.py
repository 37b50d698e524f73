"""--shard auto: the shard comes from a Slurm array job or a Kubernetes indexed Job, and every submission gets
exactly one row when the shards run as separate processes against one PostgreSQL gradebook."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from attnlab.grading.scale.batch import in_shard, parse_shard
from attnlab.grading.scale.scheduler import shard_from_environment
from attnlab.report.gradebook_csv import export_gradebook

from .test_batch import write_submissions
from .test_postgres import pg_server, pg_url  # noqa: F401 - fixtures: a real server on loopback


@pytest.mark.parametrize("environ, spec, expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "1/3"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "3/3"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
      "SLURM_ARRAY_TASK_COUNT": "3"}, "auto", "3/3"),  # --array=0-4:2 -> tasks 0, 2, 4
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "2"}, "auto/2", "2/2"),  # auto/N: the task id is the shard
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
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "8"}, "auto/8", r"task ids are the shard numbers 1..8"),
    ({"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_COUNT": "1"}, "auto/8", r"sbatch --array=1-8"),
    # a rerun of task 3 alone with plain auto would grade everything as 1/1: refused, naming auto/N
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "3",
      "SLURM_ARRAY_TASK_COUNT": "1"}, "auto", r"one task, id 3.*--shard auto/N"),
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
    from attnlab.grading.scale.batch import grade_batch

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


# -- rerunning one task: the variables exactly as Slurm 22.05 and Kubernetes set them ------------------------------
def _slurm_task(job: int, task: int, low: int, high: int, restarts: int | None = None) -> dict[str, str]:
    """What sbatch --array=LOW-HIGH gives task TASK of array job JOB (22.05: _set_env_vars of a batch array task);
    SLURM_RESTART_COUNT only after a requeue."""
    env = {"SLURM_JOB_ID": str(job + task), "SLURM_ARRAY_JOB_ID": str(job), "SLURM_ARRAY_TASK_ID": str(task),
           "SLURM_ARRAY_TASK_COUNT": str(high - low + 1), "SLURM_ARRAY_TASK_MIN": str(low),
           "SLURM_ARRAY_TASK_MAX": str(high), "SLURM_ARRAY_TASK_STEP": "1", "SLURM_CPUS_PER_TASK": "2"}
    return env | ({"SLURM_RESTART_COUNT": str(restarts)} if restarts is not None else {})


@pytest.mark.parametrize("k", [1, 3, 8])
def test_auto_n_picks_share_k_of_n_first_time_on_requeue_and_when_rerun_alone(k):
    first = _slurm_task(500, k, 1, 8)  # sbatch --array=1-8
    requeued = _slurm_task(500, k, 1, 8, restarts=1)  # scontrol requeue 500_K (or a node failure with --requeue)
    alone = _slurm_task(600, k, k, k)  # sbatch --array=K: a new job of one task, COUNT=1, MIN=MAX=K
    assert alone["SLURM_ARRAY_TASK_COUNT"] == "1" and alone["SLURM_ARRAY_TASK_MIN"] == alone["SLURM_ARRAY_TASK_MAX"]
    for environ in (first, requeued, alone):
        assert shard_from_environment("auto/8", environ) == f"{k}/8"
    assert shard_from_environment("auto/8", {"JOB_COMPLETION_INDEX": str(k - 1)}) == f"{k}/8"  # an indexed Job


def test_plain_auto_grades_a_whole_array_but_refuses_a_one_task_rerun():
    assert shard_from_environment("auto", _slurm_task(500, 3, 1, 8)) == "3/8"
    with pytest.raises(ValueError, match="auto/N"):
        shard_from_environment("auto", _slurm_task(600, 3, 3, 3))


def test_a_rerun_of_task_k_grades_exactly_task_ks_share():
    keys = [f"s{i:03d}.ipynb" for i in range(200)]
    share = {k: {key for key in keys if in_shard(key, *parse_shard_in(_slurm_task(500, k, 1, 8)))} for k in (1, 2, 3)}
    assert all(share.values()) and not share[1] & share[2]
    assert {key for key in keys if in_shard(key, *parse_shard_in(_slurm_task(600, 2, 2, 2, restarts=0)))} == share[2]


def parse_shard_in(environ):
    index, count = shard_from_environment("auto/8", environ).split("/")
    return int(index), int(count)


JOB_FILES = Path(__file__).resolve().parents[2] / "docs" / "scale"


def test_the_job_files_carry_the_shard_count_and_keep_every_attempts_log():
    sbatch = (JOB_FILES / "grade.sbatch").read_text()
    array = re.search(r"^#SBATCH --array=1-(\d+)$", sbatch, re.M)
    assert array and f"--shard auto/{array.group(1)} " in sbatch
    assert "#SBATCH --open-mode=append" in sbatch and "SLURM_RESTART_COUNT" in sbatch
    manifest = yaml.safe_load((JOB_FILES / "grade-job.yaml").read_text())
    spec = manifest["spec"]
    container = spec["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[command.index("--shard") + 1] == f"auto/{spec['completions']}"
    out = command[command.index("--out") + 1]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = next(m for path, m in mounts.items() if out.startswith(path.rstrip("/") + "/"))
    claims = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert "persistentVolumeClaim" in claims[volume]  # --out outlives the pod


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_sbatch_script_run_as_a_requeued_task_writes_a_new_log_and_passes_auto_n(tmp_path):
    course = tmp_path / "course"
    (course / ".venv" / "bin").mkdir(parents=True)
    fake = course / ".venv" / "bin" / "attnlab"
    fake.write_text('#!/bin/bash\necho "args: $*"\n')
    fake.chmod(0o755)
    base = {"PATH": os.environ["PATH"], "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": "postgresql://h/db"}
    for restarts in (None, 1):
        env = base | _slurm_task(700, 5, 1, 8, restarts=restarts)
        subprocess.run(["bash", str(JOB_FILES / "grade.sbatch"), "lab05", "/subs"], env=env, check=True,
                       capture_output=True, timeout=60)
    logs = sorted(p.name for p in (course / "logs" / "grading-lab05").iterdir())  # outside OUT
    assert logs == ["grade-700_5-restart0.log", "grade-700_5-restart1.log"]  # the failed attempt's log is kept
    args = (course / "logs" / "grading-lab05" / logs[1]).read_text()
    assert "--shard auto/8" in args and f"--out {course}/grading-lab05 " in args
    assert args.splitlines()[-1].startswith("attempt 1 of task 5: attnlab grade exited 0 at ")  # the last line
    assert not (course / "grading-lab05").exists()
    assert shard_from_environment("auto/8", _slurm_task(700, 5, 1, 8, restarts=1)) == "5/8"


def _course_with_fake_attnlab(tmp_path, script: str) -> Path:
    course = tmp_path / "course"
    (course / ".venv" / "bin").mkdir(parents=True)
    fake = course / ".venv" / "bin" / "attnlab"
    fake.write_text("#!/bin/bash\n" + script)
    fake.chmod(0o755)
    return course


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_cancelled_task_leaves_a_last_line(tmp_path):
    """scancel, a requeue or the time limit send the batch script SIGTERM: its log still ends with a line of it."""
    course = _course_with_fake_attnlab(tmp_path, 'echo started; trap "echo attnlab stopped; exit 130" TERM\n'
                                                 "sleep 30 & wait\n")
    env = {"PATH": os.environ["PATH"], "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": "postgresql://h/db",
           **_slurm_task(800, 2, 1, 8)}
    task = subprocess.Popen(["bash", str(JOB_FILES / "grade.sbatch"), "lab05", "/subs"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = course / "logs" / "grading-lab05" / "grade-800_2-restart0.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "started" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    task.send_signal(signal.SIGTERM)
    _, err = task.communicate(timeout=30)
    assert task.returncode == 143
    lines = log.read_text().splitlines()
    assert "attnlab stopped" in lines  # the grader heard it too
    assert lines[-1].startswith("attempt 0 of task 2: stopped by SIGTERM at ") and "sbatch --array=2 " in lines[-1]
    assert lines[-1] in err  # and Slurm's own log has it


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="mounts a small tmpfs: root and unshare")
def test_a_full_out_still_leaves_every_tasks_last_line(tmp_path):
    """OUT on a full 16 KiB tmpfs: every task's log (outside OUT) ends with the exit status its grade gave."""
    course = _course_with_fake_attnlab(tmp_path, 'out=$(echo "$@" | sed "s/.*--out \\([^ ]*\\).*/\\1/")\n'
                                                 'head -c 100000 /dev/zero > "$out/big" 2>/dev/null\n'
                                                 'echo x > "$out/row" || { echo "stopped: disk full"; exit 5; }\n')
    out = course / "grading-lab05"
    out.mkdir()
    base = {"PATH": os.environ["PATH"], "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": "postgresql://h/db"}
    tasks = "; ".join(f"SLURM_ARRAY_JOB_ID=900 SLURM_ARRAY_TASK_ID={k} bash {JOB_FILES / 'grade.sbatch'} lab05 /subs"
                      for k in (1, 2, 3))
    proc = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=16k tmpfs {out} || exit 77; {tasks}"],
                          env=base, capture_output=True, text=True, timeout=120)
    if proc.returncode == 77:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    for k in (1, 2, 3):
        lines = (course / "logs" / "grading-lab05" / f"grade-900_{k}-restart0.log").read_text().splitlines()
        assert lines[-2:] == ["stopped: disk full", lines[-1]]
        assert lines[-1].startswith(f"attempt 0 of task {k}: attnlab grade exited 5 at ")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_first_task_that_finds_the_gradebook_unusable_stops_the_later_ones(tmp_path):
    """Exit 6 (the database does not answer, or its tables changed) in task 1: task 2 of the same array stops at
    once, naming task 1, without starting the grader; a requeued attempt and a new array job try again."""
    course = _course_with_fake_attnlab(tmp_path, 'echo "$SLURM_ARRAY_TASK_ID" >> "$ATTNLAB_COURSE/ran"\n'
                                                 'echo "the gradebook does not answer"; exit 6\n')
    base = {"PATH": os.environ["PATH"], "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": "postgresql://h/db"}

    def task(job, k, restarts=None):
        return subprocess.run(["bash", str(JOB_FILES / "grade.sbatch"), "lab05", "/subs"],
                              env=base | _slurm_task(job, k, 1, 8, restarts=restarts), capture_output=True,
                              text=True, timeout=60)

    assert task(950, 1).returncode == 6
    second = task(950, 2)
    assert second.returncode == 6
    log = (course / "logs" / "grading-lab05" / "grade-950_2-restart0.log").read_text().splitlines()
    assert log[-1].startswith("attempt 0 of task 2: not started: task 1 found the gradebook unusable at ")
    assert "sbatch --array=2 " in log[-1] and log[-1] in second.stderr
    assert (course / "ran").read_text().split() == ["1"]  # task 2 never started the grader
    assert task(950, 3, restarts=1).returncode == 6 and task(951, 4).returncode == 6
    assert (course / "ran").read_text().split() == ["1", "3", "4"]
