"""The grader's own memory under hostile callbacks to the reference (``worker/reference_host.py``), and the grading
times beside ``otter run``.

    python benchmarks/reference_bounds.py [--cpu-seconds 2] [--timings] [CASE ...]

Each case is one hidden test graded "with the reference" whose student code asks the reference for something cheap
to send and costly to answer (``HOSTILE``); a correct test follows in the same submission, and a correct submission
after it in the same grading process (as a batch's next submission). Everything runs in a fresh process
(``measure``) through ``RemoteStudent`` and an unsandboxed worker; the figure is the grader's peak resident memory
(``VmHWM``, reset before each test) above its resident memory then, as ``tests/grading/test_hostile.py`` measures
it. The documented bound (docs/GRADING.md, "Bounded cost per submission") is 160 MiB.
``--timings`` adds ``benchmarks/grade_time.py``'s one grade and ``--jobs 2`` batch beside ``otter run`` (lab05).
``tests/grading/test_reference_bounds.py`` runs the same cases through ``measure``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOUND_MIB = 160

REFERENCE = """
import math
import torch
from torch import nn

def attend(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(max(q.shape[-1], 1)), dim=-1)
    return w @ v

def layer(x):
    return attend(x, x, x)

def causal(n):  # n numbers out, n * n inside
    return torch.tril(torch.ones(n, n)).sum(-1)

def add3(a, b, c):
    return a + b + c

class Masked(nn.Module):
    def __init__(self, d, max_len):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.max_len = max_len

    def forward(self, x):
        mask = torch.tril(torch.ones(self.max_len, self.max_len))[: x.shape[-2], : x.shape[-2]]
        return mask @ self.proj(x)

class Wide(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("table", torch.empty(d, d))  # memory without the CPU time of an initialiser

    def forward(self, x):
        return x @ self.table[: x.shape[-1], : x.shape[-1]]
"""
# case -> (the reference names its test is graded with, the student's function: it catches what the proxy raises, so
# that only the grader's budget can cost it the test)
HOSTILE = {
    "zero_size_dim": ("attend", "q = torch.zeros(1, 20000, 0)\n    attend(q, q, q)"),  # 1.6 GB of scores
    "zero_d_size": ("causal", "causal(torch.tensor(20000))"),  # a 0-d tensor, 'one number'
    "int_size": ("causal", "causal(20000)"),  # a small output, a 1.6 GB inside
    "broadcast_cube": ("add3", "n = 600\n    add3(torch.zeros(n, 1, 1), torch.zeros(1, n, 1), torch.zeros(1, 1, n))"),
    "long_max_len": ("Masked", "Masked(4, 20000)(torch.zeros(1, 3, 4))"),
    "many_modules": ("Wide", "kept = [Wide(1400) for _ in range(200)]"),  # 7.8 MB each
    "repeated_calls": ("attend", "q = torch.randn(1, 1000, 64)\n    for _ in range(10_000):\n        attend(q, q, q)"),
}
CORRECT = "def layer(x):\n    return attend(x, x, x)\n"

SCRIPT = textwrap.dedent("""
    import json, subprocess, sys, time
    import torch
    from attnlab.grading.core.hidden import HiddenSuite, run_suite
    from attnlab.grading.worker.api import LocalStudent
    from attnlab.grading.worker.reference_host import ReferenceBudget
    from attnlab.grading.worker.remote import RemoteStudent

    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

    def start_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status("VmRSS")

    spec = json.loads(sys.argv[1])
    ref = LocalStudent.from_code(spec["reference"])
    suite = HiddenSuite("lab98_bounds", graded_on_reference={
        **{case: (on,) for case, (on, _) in spec["hostile"].items()}, "layer": ("attend",)})
    for case in spec["hostile"]:
        @suite.test(case, name=case)
        def hostile(student, ref, rng, case=case):
            x = torch.ones(2, 3)
            assert torch.equal(student.call(case, x).output, x), "not x"
    for i in range(2):
        @suite.test("layer", name=f"layer_{i}")
        def correct(student, ref, rng):
            x = torch.randn(2, 3, 4, generator=rng)
            torch.testing.assert_close(student.call("layer", x).output, ref.call("layer", x).output)

    def grade(code):
        def spawn():
            return subprocess.Popen([sys.executable, "-m", "attnlab.grading.worker.process"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE)
        student = RemoteStudent(spawn, [{"index": 0, "source": code}], code, cell_timeout=30, load_timeout=120,
                                call_timeout=120)
        student._host.budget = ReferenceBudget(cpu_seconds=spec["cpu_seconds"])
        student.start()
        peaks, seconds, base = {}, {}, [start_peak()]

        def on_result(test, passed, message, took):
            peaks[test.name], seconds[test.name] = status("VmHWM") - base[0], round(took, 2)
            base[0] = start_peak()
        try:
            return run_suite(suite, student, ref, seed=0, on_result=on_result), peaks, seconds, student._host.forks
        finally:
            student.close()

    out = {}
    for name, code in (("hostile", spec["student"]), ("correct", spec["correct"])):
        results, peaks, seconds, forks = grade(code)
        out[name] = {"results": results, "peak_mib": peaks, "seconds": seconds, "forks": forks}
    print(json.dumps(out))
""")


def student_code(cases) -> str:
    parts = ["import torch\n", CORRECT]
    for case in cases:
        body = HOSTILE[case][1]
        parts.append(f"def {case}(x):\n    try:\n        {body.replace(chr(10), chr(10) + '    ')}\n"
                     "    except Exception:\n        pass\n    return x\n")
    return "\n".join(parts)


def measure(cases=tuple(HOSTILE), cpu_seconds: int = 2, timeout: float = 600) -> dict:
    """Grade the hostile submission (``cases``, then the correct questions), then a correct one, in a fresh
    process; per submission its results, each test's grader peak (MiB above its start) and seconds."""
    import attnlab

    spec = {"reference": REFERENCE, "hostile": {c: (HOSTILE[c][0], None) for c in cases},
            "student": student_code(cases), "correct": "import torch\n" + CORRECT + "".join(
                f"\ndef {c}(x):\n    return x\n" for c in cases), "cpu_seconds": cpu_seconds}
    env = {**os.environ, "PYTHONPATH": str(Path(attnlab.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, env=env,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _timings() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("grade_time", ROOT / "benchmarks" / "grade_time.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.argv = ["grade_time.py", "--labs", "lab05", "--copies", "6", "--runs", "3", "--otter-runs", "3",
                "--gradescope-runs", "0"]
    module.main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(HOSTILE))
    parser.add_argument("--cpu-seconds", type=int, default=2)
    parser.add_argument("--timings", action="store_true")
    args = parser.parse_args()
    out = measure(args.cases, args.cpu_seconds)
    print(f"load average {os.getloadavg()[0]:.1f}; bound {BOUND_MIB} MiB above the grader's resident memory")
    print("| case | grader peak MiB | test s | score | message |\n|---|---|---|---|---|")
    hostile = out["hostile"]
    for case in args.cases:
        q = hostile["results"][case]
        print(f"| {case} | {hostile['peak_mib'][case]:.0f} | {hostile['seconds'][case]} | {q['score']}/{q['max_score']} "
              f"| {q['messages'][-1][:140]} |")
    for name in ("hostile", "correct"):
        q = out[name]["results"]["layer"]
        print(f"{name} submission, correct question: {q['score']}/{q['max_score']}, peak "
              f"{max(out[name]['peak_mib'].values()):.0f} MiB, reference children forked: {out[name]['forks']}")
    if args.timings:
        _timings()


if __name__ == "__main__":
    main()
