"""docs/scale/grade.sbatch on a real single-node Slurm (Debian's slurm-wlm + munge, bound to loopback, started here
in a temporary folder): the whole array grades every submission once, and ``sbatch --array=K`` reruns task K's share
only (a stand-in grader on SQLite, fast); and the real ``attnlab grade`` on a real PostgreSQL server, every row right
and every log ending with its exit status. Skips where Slurm, munge or root are absent (CI installs none of them: the
variables themselves are tested in test_scheduler.py, exactly as Slurm 22.05 sets them)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.scale.batch import in_shard

from .test_batch import LAB, write_submissions
from .test_postgres import pg_server, pg_url  # noqa: F401 - fixtures: a real server on loopback

TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not all(shutil.which(t) for t in TOOLS),
                                reason="needs root, munge and Slurm (apt-get install slurm-wlm munge)")
SBATCH = Path(__file__).resolve().parents[2] / "docs" / "scale" / "grade.sbatch"

FAKE_ATTNLAB = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from attnlab.grading.scale.batch import grade_batch
    from tests.grading.test_batch import fake_grade

    import time
    while Path(sys.argv[0]).with_name("hold").exists():  # the test requeues the task meanwhile
        time.sleep(0.2)
    args = sys.argv[1:]  # grade LAB SUBMISSIONS --out OUT --jobs J --shard S --gradebook G
    opt = dict(zip(args[3::2], args[4::2]))
    summary = grade_batch({lab!r}, [args[2]], out_dir=opt["--out"], shard=opt["--shard"],
                          gradebook=opt["--gradebook"], grade_fn=fake_grade, progress=False)
    print("shard", opt["--shard"], "graded", *[r["key"] for r in summary.results])
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def slurm(tmp_path):
    """A private cluster of one node: munged, slurmctld and slurmd, stopped by their pids afterwards."""
    d = tmp_path / "slurm"
    for sub in ("state", "spool", "log", "munge"):
        (d / sub).mkdir(parents=True)
    (d / "munge").chmod(0o700)
    (d / "munge" / "munge.key").write_bytes(os.urandom(1024))
    (d / "munge" / "munge.key").chmod(0o400)
    conf = d / "slurm.conf"
    conf.write_text(textwrap.dedent(f"""\
        ClusterName=attnlabtest
        SlurmctldHost=localhost(127.0.0.1)
        SlurmctldPort={_free_port()}
        SlurmdPort={_free_port()}
        AuthType=auth/munge
        CredType=cred/munge
        AuthInfo=socket={d}/munge/munge.sock
        StateSaveLocation={d}/state
        SlurmdSpoolDir={d}/spool
        SlurmctldPidFile={d}/ctld.pid
        SlurmdPidFile={d}/d.pid
        SlurmctldLogFile={d}/log/ctld.log
        SlurmdLogFile={d}/log/d.log
        ProctrackType=proctrack/linuxproc
        TaskPlugin=task/none
        SelectType=select/cons_tres
        SelectTypeParameters=CR_Core
        ReturnToService=2
        SlurmUser=root
        MpiDefault=none
        JobAcctGatherType=jobacct_gather/none
        AccountingStorageType=accounting_storage/none
        NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN
        PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
    """))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    env = {k: v for k, v in env.items() if not k.startswith(("SLURM_ARRAY", "SLURM_JOB", "SLURM_RESTART"))}
    pid_files = [d / "munge" / "munged.pid", d / "ctld.pid", d / "d.pid"]
    try:
        subprocess.run(["munged", "--force", f"--socket={d}/munge/munge.sock", f"--key-file={d}/munge/munge.key",
                        f"--pid-file={pid_files[0]}", f"--log-file={d}/munge/munged.log", f"--seed-file={d}/munge/seed"],
                       check=True, timeout=30)
        subprocess.run(["slurmctld", "-i"], env=env, check=True, timeout=30)
        subprocess.run(["slurmd", "-N", "localhost"], env=env, check=True, timeout=30)
        _wait_for(lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                                   text=True).stdout, 60, d)
        yield env
    finally:
        for pid_file in reversed(pid_files):
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().strip()), 15)
                except (ProcessLookupError, ValueError):
                    pass


def _wait_for(done, seconds: float, d: Path) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            logs = "".join(p.read_text(errors="replace")[-2000:] for p in (d / "log").glob("*.log"))
            raise AssertionError(f"Slurm did not get there in {seconds} s: {logs}")
        time.sleep(0.5)


def _submit(env, course: Path, args: list[str]) -> str:
    return subprocess.run(["sbatch", "--parsable", "--mem=200M", "--cpus-per-task=1", *args, str(SBATCH), LAB,
                          str(course / "subs")], env=env, cwd=course, check=True, capture_output=True, text=True,
                         timeout=60).stdout.strip()


def _run(env, course: Path, args: list[str]) -> str:
    job = _submit(env, course, args)
    _wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True,
                                         text=True).stdout.strip(), 240, Path(env["SLURM_CONF"]).parent)
    return job


def _graded(course: Path, job: str) -> dict[int, list[str]]:
    """Task -> the keys its attnlab graded, from every attempt's log of the array job ``job``."""
    found = {}
    for log in (course / "logs" / f"grading-{LAB}").glob(f"grade-{job}_*-restart0.log"):
        line = [t for t in log.read_text().splitlines() if t.startswith("shard ")][-1].split()
        task = re.search(r"_(\d+)-restart", log.name).group(1)
        assert line[1] == "auto/8"  # the job file's count, whatever this job's own array
        line[1] = f"{task}/8"
        found[int(line[1].split("/")[0])] = line[3:]
    return found


def test_the_array_grades_everything_once_and_array_k_reruns_task_ks_share(slurm, tmp_path):
    course = tmp_path / "course"
    names = [f"s{i:02d}.ipynb" for i in range(30)]
    write_submissions(course / "subs", {n: {"softmax": i % 3} for i, n in enumerate(names)})
    fake = course / ".venv" / "bin" / "attnlab"
    fake.parent.mkdir(parents=True)
    script = course / "fake_attnlab.py"
    script.write_text(FAKE_ATTNLAB.format(root=str(Path(__file__).resolve().parents[2]), lab=LAB))
    fake.write_text(f'#!/bin/bash\nexec {sys.executable} {script} "$@"\n')
    fake.chmod(0o755)
    env = {**slurm, "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": str(tmp_path / "gradebook.db")}

    first = _run(env, course, [])
    graded = _graded(course, first)
    assert sorted(graded) == list(range(1, 9))
    assert sorted(k for keys in graded.values() for k in keys) == names  # disjoint and complete
    with open_gradebook(tmp_path / "gradebook.db", create=False) as book:
        assert sorted(r["key"] for r in book.rows(LAB)) == names

    share5 = sorted(n for n in names if in_shard(n, 5, 8))
    other = next(n for n in names if not in_shard(n, 5, 8))
    for name in [*share5, other]:  # task 5's students resubmit, and one of another task's
        write_submissions(course / "subs", {name: {"softmax": 2, "attention": 3}})
    rerun = _run(env, course, ["--array=5"])
    assert _graded(course, rerun) == {5: share5}  # share 5 of 8 only (as 1/1 it would grade `other` too)
    with open_gradebook(tmp_path / "gradebook.db", create=False) as book:
        scores = {r["key"]: r["score"] for r in book.rows(LAB)}
    assert all(scores[n] == 5.0 for n in share5) and scores[other] != 5.0 and len(scores) == 30
    assert (course / f"grading-{LAB}" / "submissions" / share5[0].removesuffix(".ipynb") / "feedback.md").is_file()

    # a requeue of task 3 (a node failure with --requeue, or scontrol requeue): the failed attempt's log stays
    (course / "hold").write_text("")
    job = _submit(env, course, ["--array=3"])
    logs = course / "logs" / f"grading-{LAB}"
    _wait_for(lambda: (logs / f"grade-{job}_3-restart0.log").exists(), 120, Path(env["SLURM_CONF"]).parent)
    subprocess.run(["scontrol", "requeue", f"{job}_3"], env=env, check=True, timeout=30)
    (course / "hold").unlink()
    time.sleep(1)
    subprocess.run(["scontrol", "update", f"jobid={job}_3", "StartTime=now"], env=env, check=True, timeout=30)
    _wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True,
                                         text=True).stdout.strip(), 240, Path(env["SLURM_CONF"]).parent)
    assert sorted(p.name for p in logs.glob(f"grade-{job}_*")) == [f"grade-{job}_3-restart0.log",
                                                                    f"grade-{job}_3-restart1.log"]
    assert "shard auto/8 graded" in (logs / f"grade-{job}_3-restart1.log").read_text()


def test_the_real_grader_on_postgresql_in_slurm_gives_every_row_right(slurm, built_course, pg_url, tmp_path):  # noqa: F811
    """The documented job file, the real grader (this checkout's .venv) and a real PostgreSQL server: 8 tasks grade
    4 submissions of the fixture lab, each row once with its true score; the logs (outside OUT) end with exit 0, and
    ``gradebook --check`` of the gradebook afterwards finds nothing to rerun."""
    import nbformat

    lab = "lab99_demo"
    course = tmp_path / "course"
    shutil.copytree(built_course, course)
    (course / ".venv").symlink_to(Path(sys.executable).parent.parent)  # the checkout's own virtual environment
    subs = course / "subs"
    subs.mkdir()
    solution = nbformat.read(built_course / "solutions" / lab / f"{lab}.ipynb", as_version=4)
    blank = nbformat.read(built_course / "labs" / lab / f"{lab}.ipynb", as_version=4)
    for name, nb in (("ada", solution), ("bea", solution), ("cal", blank), ("dov", solution)):
        nbformat.write(nb, subs / f"{name}.ipynb")
    env = {**slurm, "ATTNLAB_COURSE": str(course), "ATTNLAB_GRADEBOOK": pg_url}
    job = subprocess.run(["sbatch", "--parsable", "--mem=200M", "--cpus-per-task=1", str(SBATCH), lab, str(subs)],
                         env=env, cwd=course, check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    _wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True,
                                         text=True).stdout.strip(), 600, Path(env["SLURM_CONF"]).parent)
    logs = sorted((course / "logs" / f"grading-{lab}").glob(f"grade-{job}_*-restart0.log"))
    assert len(logs) == 8
    for log in logs:
        assert re.match(r"attempt 0 of task \d: attnlab grade exited 0 at ", log.read_text().splitlines()[-1]), \
            log.read_text()[-3000:]
    with open_gradebook(pg_url, create=False) as book:
        rows = {r["key"]: r for r in book.rows(lab)}
    assert {k: (r["score"], r["grader_error"]) for k, r in rows.items()} == {
        "ada.ipynb": (3.0, None), "bea.ipynb": (3.0, None), "cal.ipynb": (0.0, None), "dov.ipynb": (3.0, None)}
    check = subprocess.run([str(course / ".venv" / "bin" / "attnlab"), "gradebook", pg_url, "--check", str(subs)],
                           cwd=course, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.strip().endswith("4 graded and current; 0 missing, 0 stale, "
                                                                   "0 errored"), check.stdout + check.stderr
