"""Attacks on the grader. Each submission has a WRONG `double` (0 of 2 points when graded honestly) and a
correct `Scale` (1 point), plus one attack. No attack may raise the score above that baseline, and the
grader must answer for each: a row with a score and messages, never an exception.

Every attack is bounded by itself (counts, sizes, sleeps), so that a failing sandbox cannot hurt the
machine running the tests: at most 8 GB touched gradually, 300 processes, 1 GB of disk, 30 s of sleep.
"""

from __future__ import annotations

import json as _json
import os
import socket
import struct as _struct
import sys
import textwrap
import threading
import time as _time
import tracemalloc as _tracemalloc
from pathlib import Path

import nbformat
import pytest

from attnlab.grading.runner import grade_submission
from attnlab.grading.worker import wire as _wire

LAB = "lab99_demo"
WRONG = """
import torch

def double(x):
    return x * 3
"""
SCALE = """
class Scale(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.weight
"""
BASELINE = 1.0  # Scale only

FIND_SECRETS = """
import glob, os, pathlib
def _find(names):
    roots = ["/tmp", "/work", "/autograder", "/root", "/home", os.getcwd(), "/proc/1/cwd", "/proc/1/root/tmp"]
    import attnlab
    here = pathlib.Path(attnlab.__file__).resolve()
    roots += [str(p) for p in here.parents][:5]
    found = []
    for root in roots:
        for name in names:
            try:
                found += glob.glob(f"{root}/**/{name}", recursive=True)[:20]
            except Exception:
                pass
    return found
"""

ATTACKS = {
    "patch_allclose": "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True",
    "patch_testing": """
import torch.testing, numpy.testing
torch.testing.assert_close = lambda *a, **k: None
numpy.testing.assert_allclose = lambda *a, **k: None
""",
    "lying_tensor_subclass": """
class Liar(torch.Tensor):
    def __eq__(self, other): return True
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func.__name__ in ("allclose", "equal", "isclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
_wrong = double
def double(x):
    return _wrong(x).as_subclass(Liar)
""",
    "lying_array_object": """
class Fake:
    def __array__(self, *a, **k):
        import numpy as np
        return np.zeros(3)
    def __eq__(self, other): return True
def double(x):
    return Fake()
""",
    "read_hidden_files": FIND_SECRETS + """
for path in _find(["reference.py", "hidden_tests.py"]):
    try:
        src = open(path).read()
        if "def double" in src:
            exec(src, globals())
            break
    except Exception:
        pass
""",
    "proc_and_environ": """
import os, glob
stolen = dict(os.environ)
for p in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        stolen[p] = open(p, "rb").read()[:2000]
    except Exception:
        pass
if any(b"ATTNLAB_GRADING_SECRET" in (v if isinstance(v, bytes) else str(v).encode()) for v in stolen.values()):
    def double(x):  # would only pass if the secret let us predict inputs: flag it loudly instead
        raise SystemExit("secret leaked")
if "ATTNLAB_GRADING_SECRET" in os.environ:
    raise SystemExit("secret leaked")
""",
    "gc_and_inspect": """
import gc, inspect, sys
for obj in gc.get_objects():
    try:
        if inspect.isfunction(obj) and obj.__name__ == "double" and obj is not double:
            double = obj
    except Exception:
        pass
for mod in list(sys.modules.values()):
    if getattr(mod, "suite", None) is not None:
        mod.suite.tests.clear()
""",
    "patch_builtins_otter_pytest": """
import builtins
builtins.AssertionError = type("NeverRaised", (Exception,), {})
try:
    import otter.test_files.exception_test as et
    et.ExceptionTestFile.run = lambda self, env: None
except Exception:
    pass
try:
    import pytest
    pytest.approx = lambda *a, **k: True
except Exception:
    pass
""",
    "ipython_hooks_and_settrace": """
import sys
ip = get_ipython()
try:
    ip.events.register("pre_run_cell", lambda *a: None)
    ip.input_transformers_post.append(lambda lines: ["double = lambda x: x * 2\\n"])
except Exception:
    pass
def tracer(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "double":
        pass
    return tracer
sys.settrace(tracer)
""",
    "write_results_files": """
import json, os, pickle, atexit, subprocess, sys
fake = {"score": 100, "tests": [{"name": "double", "score": 2, "max_score": 2}]}
for d in [".", "..", "../results", "/autograder/results", "/tmp"]:
    for name in ("results.json", "results.pkl"):
        try:
            with open(os.path.join(d, name), "w") as f:
                json.dump(fake, f)
        except Exception:
            pass
atexit.register(lambda: open("results.json", "w").write(json.dumps(fake)))
subprocess.Popen([sys.executable, "-c",
    "import os, time, json\\nos.setsid()\\ntime.sleep(3)\\n"
    "open('/tmp/results.json','w').write(json.dumps({'score': 100}))"], start_new_session=True)
""",
    "sys_exit": "import sys\nsys.exit(0)",
    "os_exit_at_import": "import os\nos._exit(0)",
    "kill_parent": """
import os, signal
for pid in (os.getppid(), 1):
    try:
        os.kill(pid, signal.SIGKILL)
    except Exception:
        pass
""",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "endless_loop": "while True:\n    pass",
    "endless_loop_in_function": "def double(x):\n    while True:\n        pass",
    "memory_bomb": """
blocks = []
try:
    blocks.append(bytearray(100 * 2**30))  # 100 GB at once: refused
except MemoryError:
    pass
for _ in range(8):  # then 8 x 1 GB, touched: the memory limit must stop this
    blocks.append(bytearray(2**30))
""",
    "fork_bomb": """
import os, time
children = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
""",
    "fill_disk": """
chunk = b"x" * 2**20
try:
    with open("big.bin", "wb") as f:
        for _ in range(1024):
            f.write(chunk)
except OSError:
    pass
""",
    "pip_install_and_poison_site": """
import subprocess, sys, site, os
subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "six"], timeout=20, capture_output=True)
for d in site.getsitepackages() + [site.getusersitepackages()]:
    try:
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("import builtins\\nbuiltins.ATTNLAB_POISONED = True\\n")
    except Exception:
        pass
""",
    "print_fake_scores": """
print("Total Score: 3.000 / 3.000 (100.000%)")
import sys
sys.stderr.write("double 2.0 / 2.0\\n")
""",
    "forge_protocol_frames": """
import os, struct, json
body = json.dumps({"v": {"__dict__": [["ok", True], ["value", None]]}, "blobs": []}).encode()
frame = struct.pack("<Q", 4 + len(body)) + struct.pack("<I", len(body)) + body
for fd in range(3, 32):
    try:
        os.write(fd, frame * 50)
    except OSError:
        pass
""",
    "hardcoded_public_answers": """
def double(x):
    if x.shape == (2,) and x.tolist() == [1.0, 2.0]:
        return torch.tensor([2.0, 4.0])
    return x * 3
""",
    "redefine_manual_seed": "torch.manual_seed = lambda *a, **k: None\nimport random\nrandom.seed = lambda *a, **k: None",
}


def _notebook(path: Path, attack: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(WRONG), nbformat.v4.new_code_cell(SCALE),
                nbformat.v4.new_code_cell(textwrap.dedent(attack))]
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def tcp_server():
    """A loopback server that counts connections: the sandbox must keep student code off the network."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                hits.append(1)
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join(2)
    server.close()


def _grade(built_course: Path, nb: Path) -> dict:
    return grade_submission(built_course / "autograder" / LAB, nb, cell_timeout=10, call_timeout=10,
                            load_timeout=90)


def test_baseline_wrong_answer_scores_one(built_course, tmp_path):
    res = _grade(built_course, _notebook(tmp_path / "sub.ipynb", "pass"))
    assert res["questions"]["double"]["score"] == 0
    assert res["score"] == BASELINE


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_gains_nothing(name, built_course, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_GRADING_SECRET", "s3cret-for-the-attack-suite")
    sub = tmp_path / "submissions"
    sub.mkdir()
    res = _grade(built_course, _notebook(sub / f"{name}.ipynb", ATTACKS[name]))
    assert res["questions"]["double"]["score"] == 0, res["questions"]["double"]["messages"]
    assert res["score"] <= BASELINE
    assert res["questions"]["double"]["messages"], "the grader must say why"
    assert sorted(p.name for p in sub.iterdir()) == [f"{name}.ipynb"], "the attack wrote next to the submission"
    assert not (built_course / "autograder" / LAB / "results.json").exists()


def test_network_is_closed(built_course, tmp_path, tcp_server):
    port, hits = tcp_server
    attack = f"""
import socket
for _ in range(3):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    except OSError:
        pass
"""
    res = _grade(built_course, _notebook(tmp_path / "net.ipynb", attack))
    assert res["score"] <= BASELINE
    if "network isolated" in res["isolation"]:
        assert hits == [], "student code reached a loopback server although the report says network isolated"


def test_site_packages_not_poisoned(built_course, tmp_path):
    _grade(built_course, _notebook(tmp_path / "p.ipynb", ATTACKS["pip_install_and_poison_site"]))
    import site

    for d in site.getsitepackages():
        assert not (Path(d) / "sitecustomize.py").exists() or "ATTNLAB_POISONED" not in (
            Path(d) / "sitecustomize.py").read_text()


def test_detached_children_are_gone(built_course, tmp_path):
    marker = "attnlab-detached-child-marker"
    attack = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, time\\nos.setsid()\\ntime.sleep(60)", "{marker}"],
                 start_new_session=True)
"""
    _grade(built_course, _notebook(tmp_path / "d.ipynb", attack))
    alive = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    alive.append(proc.name)
            except OSError:
                pass
    assert not alive, f"detached children survived grading: {alive}"


def test_same_file_graded_twice_gives_the_same_score(built_course, tmp_path):
    nb = _notebook(tmp_path / "twice.ipynb", "pass")
    first, second = _grade(built_course, nb), _grade(built_course, nb)
    assert first["score"] == second["score"]
    assert first["questions"] == second["questions"]


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox report is Linux-specific")
def test_isolation_is_reported(built_course, tmp_path):
    res = _grade(built_course, _notebook(tmp_path / "r.ipynb", "pass"))
    assert res["isolation"], "every result names the isolation in force"
    if os.geteuid() == 0:
        assert "uid" in res["isolation"] or "none" in res["isolation"]


def test_slow_function_is_stopped_by_the_test_time_limit(built_course, tmp_path):
    """A call that finishes within the call limit (10 s) is still stopped by the test's own limit (0.5 s). The test
    makes one call (compare_call sends the output gradient with it), so the sleep alone must exceed the test's time:
    with a 0.8 s sleep and a 1 s limit it once failed only by the worker's overhead, and a warm worker passed it."""
    slow = "import time\n_right = double\ndef double(x):\n    time.sleep(1.5)\n    return x * 2\n"
    res = grade_submission(built_course / "autograder" / LAB, _notebook(tmp_path / "slow.ipynb", slow),
                           cell_timeout=10, call_timeout=10, test_timeout=0.5)
    assert res["questions"]["double"]["score"] == 0
    assert any("ran past the 0.5 s test limit" in m for m in res["questions"]["double"]["messages"])
    assert res["questions"]["Scale"]["score"] == 1.0


# ================================================================================================================
# The grader's own trust boundaries (issue 12): nothing computed in the sandbox is trusted, and every resource the
# grader spends on one submission is bounded. One test (or one parametrized group) per class of attack; each
# asserts no score gain and a bound on the grader's time and on the Python memory it allocates (tracemalloc).
# These run the worker through the sandbox's `none` mechanism (ATTNLAB_SANDBOX=off): the attacks are on the
# grader, not on the isolation.


FAST = dict(cell_timeout=10, call_timeout=10, load_timeout=60)
MiB = 2**20


def bounded(fn, *, seconds: float, mib: float, cleanup=None):
    """Run ``fn()`` in a thread: it must return within ``seconds``, and the Python memory allocated meanwhile
    must peak under ``mib`` MiB. ``cleanup()`` runs when it did not finish (to unblock it)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            out["error"] = exc

    _tracemalloc.start()
    try:
        thread = threading.Thread(target=run, daemon=True)
        started = _time.monotonic()
        thread.start()
        thread.join(seconds)
        peak = _tracemalloc.get_traced_memory()[1]
    finally:
        _tracemalloc.stop()
    if thread.is_alive():
        if cleanup is not None:
            cleanup()
        raise AssertionError(f"still running after {seconds} s")
    if "error" in out:
        raise out["error"]
    assert peak < mib * MiB, f"the grader allocated {peak / MiB:.0f} MiB (bound {mib} MiB)"
    return out["value"], _time.monotonic() - started


@pytest.fixture
def off(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")
    monkeypatch.setenv("ATTNLAB_GRADING_SECRET", "s3cret-for-the-attack-suite")


def _grade_bounded(built_course, nb, *, seconds=90, mib=256, **options):
    lab = built_course / "autograder" / LAB
    return bounded(lambda: grade_submission(lab, nb, **(FAST | options)), seconds=seconds, mib=mib)


def _cells_notebook(path: Path, sources: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(s)) for s in sources]
    nbformat.write(nb, path)
    return path


# 1. ---------------------------------------------------------------- the in-place verdict is the grader's
def test_in_place_verdict_cannot_be_patched_in_the_worker(built_course, tmp_path, off):
    attack = """
    import attnlab.grading.worker.executor as ex, attnlab.grading.worker.api as api
    for module in (ex, api):
        if hasattr(module, "_same"):
            module._same = lambda a, b: True
    torch.equal = lambda *a, **k: True
    def double(x):
        y = x * 2
        x.data.zero_()  # changes the caller's tensor, hidden from autograd
        return y
    """
    res, _ = _grade_bounded(built_course, _notebook(tmp_path / "inplace.ipynb", attack))
    assert res["questions"]["double"]["score"] == 0, res["questions"]["double"]["messages"]
    assert any("in place" in m for m in res["questions"]["double"]["messages"])
    assert res["score"] <= BASELINE


# 2. ---------------------------------------------------------------- forbidden calls, deny by default
EVASIONS = {
    "private_torch": ("def double(x):\n    return torch._C._VariableFunctions.mul(x, 2)", "torch._C"),
    "torch_ops": ("def double(x):\n    return torch.ops.aten.mul(x, 2)", "torch.ops"),
    "computed_getattr": ("def double(x):\n    return getattr(torch, 'm' + 'ul')(x, 2)", "getattr"),
    "importlib": ("import importlib\n_t = importlib.import_module('torch')\n"
                  "def double(x):\n    return _t.mul(x, 2)", "importlib"),
    "exec_encoded": ("exec(bytes.fromhex('" + b"def double(x):\n    return x * 2\n".hex() + "').decode())", "exec"),
    "eval": ("double = eval('lambda x: x * 2')", "eval"),
    "dunder_import": ("double = lambda x: __import__('torch').mul(x, 2)", "__import__"),
    "compile": ("import types\n_c = compile('def f(x):\\n    return x * 2', 'c', 'exec').co_consts[0]\n"
                "double = types.FunctionType(_c, globals())", "compile"),
}


@pytest.mark.parametrize("name", sorted(EVASIONS))
def test_forbidden_calls_are_denied_by_default_and_named(name, built_course, tmp_path, off):
    attack, named = EVASIONS[name]
    res, _ = _grade_bounded(built_course, _notebook(tmp_path / f"{name}.ipynb", attack))
    assert res["questions"]["double"]["score"] == 0 and res["score"] <= BASELINE, res["questions"]  # not Scale's
    message = res["questions"]["double"]["messages"][0]
    assert "the lab's rules" in message and named in message, message


def test_a_labs_policy_costs_only_the_questions_its_rules_tie_to_it():
    from attnlab.grading.core.hidden import HiddenSuite, run_suite
    from attnlab.grading.worker.api import LocalStudent

    suite = HiddenSuite("lab98", policy_questions=("f",))
    suite.test("f", name="tf")(lambda student, ref, rng: None)
    suite.test("g", name="tg")(lambda student, ref, rng: None)
    student = LocalStudent.from_code("f = eval('lambda: 1')\ng = 2")
    res = run_suite(suite, student, student, seed=0)
    assert res["f"]["score"] == 0 and "line 1: `f = eval('lambda: 1')` (eval is not allowed" in res["f"]["messages"][0]
    assert res["g"]["score"] == 1


# 3. ---------------------------------------------------------------- terminal spoofing
def test_control_characters_never_reach_a_terminal(built_course, tmp_path, off):
    from attnlab.grading.outputs.score_table import score_table

    spoof = "raise ValueError('\\r\\x1b[2K' + 'alice.ipynb  30.0 / 30' + '\\x1b[8m')"
    res, _ = _grade_bounded(built_course, _notebook(tmp_path / "spoof\x1b[2K.ipynb", spoof))
    assert res["score"] <= BASELINE
    table = score_table([res])
    assert "\x1b" not in table and "\r" not in table and len(table.splitlines()) == 2
    assert "\\x1b[2K" in table  # shown, escaped


# 4. ---------------------------------------------------------------- forged progress frames
@pytest.mark.parametrize("value", ['"not a number"', "[1]"])
def test_forged_progress_frames_give_a_row(value, built_course, tmp_path, off):
    attack = f"""
    import os, struct, json
    body = json.dumps({{"v": {{"__dict__": [["progress", {value}]]}}, "blobs": []}}).encode()
    frame = struct.pack("<Q", 4 + len(body)) + struct.pack("<I", len(body)) + body
    for fd in range(3, 32):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    """
    res, _ = _grade_bounded(built_course, _notebook(tmp_path / "progress.ipynb", attack))
    assert res["score"] <= BASELINE and res["questions"]["double"]["score"] == 0


# 5. ---------------------------------------------------------------- restarts and the submission's time
def test_bogus_progress_indices_cannot_raise_the_restart_cap(built_course, tmp_path, off):
    attack = """
    import os, random, struct, json
    body = json.dumps({"v": {"__dict__": [["progress", random.randrange(10**6, 10**9)]]}, "blobs": []}).encode()
    frame = struct.pack("<Q", 4 + len(body)) + struct.pack("<I", len(body)) + body
    for fd in range(3, 32):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)
    """
    res, _ = _grade_bounded(built_course, _notebook(tmp_path / "bogus.ipynb", attack), seconds=120)
    assert res["score"] <= BASELINE


def test_many_cells_that_kill_the_worker_share_one_restart_budget(built_course, tmp_path, off):
    killers = ["import os\nos._exit(0)"] * 12
    nb = _cells_notebook(tmp_path / "killers.ipynb", [WRONG, SCALE] + killers)
    res, _ = _grade_bounded(built_course, nb, seconds=120)
    skipped = [e for e in res["errors"] if "was skipped" in e]
    assert 1 <= len(skipped) <= 5, res["errors"]  # at most 1 + max_restarts starts in all
    assert res["score"] <= BASELINE


def test_the_whole_submission_has_a_deadline(built_course, tmp_path, off):
    slow = ["import time\ntime.sleep(1.5)"] * 8
    nb = _cells_notebook(tmp_path / "slow.ipynb", [WRONG, SCALE] + slow)
    res, took = _grade_bounded(built_course, nb, seconds=40, load_timeout=30, timeout=8)
    assert took < 25 and res["score"] == 0
    assert any("ran past the 8 s submission limit" in e for e in res["errors"]), res["errors"]


# 6. ---------------------------------------------------------------- a worker that stops reading
def test_a_worker_that_stops_reading_cannot_block_the_grader(tmp_path):
    import torch

    from attnlab.grading.worker.remote import RemoteStudent, WorkerDied
    from tests.grading.test_api import FAKE, Spawner

    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE)
    spawner = Spawner([sys.executable, "-I", str(script), "stop-reading", str(tmp_path / "log")])
    student = RemoteStudent(spawner, [{"index": 1, "source": "a = 1"}], "a = 1", cell_timeout=1, load_timeout=10,
                            call_timeout=2)
    procs = []

    def call():
        student.start()
        procs.append(student.proc)
        with pytest.raises(WorkerDied, match=r"ran past the 2 s call limit \(your code stopped reading its requests\)"):
            student.call("f", torch.zeros(2**20))  # an 8 MB request: far more than a pipe holds
        return True

    def unblock():
        for proc in procs:
            proc.kill()

    try:
        _, took = bounded(call, seconds=20, mib=64, cleanup=unblock)
        assert took < 10
    finally:
        student.close()
        spawner.reap()


# 7. ---------------------------------------------------------------- JSON amplification
def test_a_frame_of_nested_empty_lists_is_refused_before_parsing():
    tree = b"[" + b"[]," * (8 * MiB // 3) + b"[]]"
    header = b'{"v": ' + tree + b', "blobs": []}'
    body = _struct.pack("<I", len(header)) + header

    def unpack():
        with pytest.raises(_wire.WireError, match="over the limit|exceeds the limit"):
            _wire.unpack_body(body)
        return True

    bounded(unpack, seconds=10, mib=32)


def test_frames_are_sized_to_the_real_replies():
    import io

    stream = io.BytesIO(_struct.pack("<Q", 40 * MiB) + b"\0" * 16)  # 10x the largest real reply
    with pytest.raises(_wire.WireError, match="exceeds the limit"):
        _wire.read_frame(stream)
    assert _wire.MAX_FRAME_BYTES <= 32 * MiB and _wire.MAX_JSON_OBJECTS <= 20_000


# 8. ---------------------------------------------------------------- deep expressions
@pytest.mark.parametrize("cell", ["x = " + "1+" * 300_000 + "1", "x = " + "-" * 200_000 + "1"],
                         ids=["sum_300k", "minus_200k"])
def test_deep_expressions_give_a_row(cell, built_course, tmp_path, off):
    nb = _cells_notebook(tmp_path / "deep.ipynb", [WRONG, SCALE, cell])
    res, _ = _grade_bounded(built_course, nb, seconds=60, mib=512)
    assert res["score"] == 0 and "the graded code is too large for the grader" in res["errors"][0]
    assert [p["category"] for p in res["problems"]] == ["source_too_large"]


# 9. ---------------------------------------------------------------- what a submission path is
def test_a_submission_is_checked_before_it_is_read(built_course, tmp_path, off):
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)

    def unblock():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)

    res, took = _grade_bounded(built_course, fifo, seconds=10, mib=16)
    assert res["score"] == 0 and "not a regular file" in res["errors"][0]
    (tmp_path / "zero.ipynb").symlink_to("/dev/zero")
    res, _ = _grade_bounded(built_course, tmp_path / "zero.ipynb", seconds=10, mib=16)
    assert res["score"] == 0 and "not a regular file" in res["errors"][0]
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as f:
        f.truncate(60 * MiB)  # sparse: over the 50 MiB limit
    res, _ = _grade_bounded(built_course, huge, seconds=10, mib=16)
    assert res["score"] == 0 and "MiB limit" in res["errors"][0]


def test_the_gradescope_runner_never_follows_a_link(built_course, tmp_path, off):
    from attnlab.grading.bridges.gradescope_run import run

    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "mine.ipynb").symlink_to(built_course / "solutions" / LAB / f"{LAB}.ipynb")
    res, _ = bounded(lambda: run(lab=LAB, bundle=str(built_course / "autograder" / LAB), submission=str(folder),
                                 results=str(tmp_path / "results.json")), seconds=30, mib=64)
    assert res["score"] == 0 and "not a link" in res["errors"][0]


# 10. --------------------------------------------------------------- output folders and the gradebook
def test_a_file_name_cannot_collide_with_the_gradebook(tmp_path):
    from attnlab.grading.scale.batch import grade_batch

    subs = tmp_path / "subs"
    subs.mkdir()
    names = ["alice.ipynb", "gradebook.db.ipynb", "gradebook.db-wal.ipynb", "gradebook.db-shm.ipynb"]
    for name in names:
        (subs / name).write_text("{}")

    def fake(lab_dir, path):
        return {"submission": str(path), "score": 1.0, "max_score": 1.0, "isolation": "fake",
                "questions": {"q": {"score": 1.0, "max_score": 1.0, "messages": []}}}

    for _ in range(2):  # the second run finds the first run's folders and gradebook
        summary, _ = bounded(lambda: grade_batch("lab98", [subs], out_dir=subs, grade_fn=fake, progress=False),
                             seconds=30, mib=64)
    assert summary.skipped == 4 and summary.failed == 0
    assert (subs / "gradebook.db").is_file() and (subs / "submissions" / "gradebook.db" / "feedback.md").is_file()


# 11. --------------------------------------------------------------- cell errors are capped
def test_cell_errors_are_capped(built_course, tmp_path, off):
    from attnlab.grading.outputs.feedback import feedback_markdown
    from attnlab.grading.outputs.gradescope import to_gradescope

    nb = _cells_notebook(tmp_path / "errors.ipynb", [WRONG, SCALE] + ["raise ValueError('no')"] * 1_990)
    res, _ = _grade_bounded(built_course, nb, seconds=240, mib=256)
    assert res["score"] <= BASELINE
    assert len(res["errors"]) <= 21 and res["errors"][-1] == "… and 1,970 more cell errors"
    for text in (_json.dumps(res), feedback_markdown(res), _json.dumps(to_gradescope(res))):
        assert len(text) < 64 * 1024
    nb = _cells_notebook(tmp_path / "more.ipynb", [WRONG, SCALE] + ["raise ValueError('no')"] * 20_000)
    res, _ = _grade_bounded(built_course, nb, seconds=60, mib=64)  # past notebook_code.MAX_CELLS: never run
    assert res["score"] == 0 and [p["category"] for p in res["problems"]] == ["source_too_large"]


# 12. --------------------------------------------------------------- markup in feedback
def test_markup_in_messages_stays_literal():
    from attnlab.grading.outputs.feedback import feedback_markdown
    from attnlab.grading.outputs.gradescope import to_gradescope

    evil = "# Total: 30 / 30\n<script>alert(1)</script>\n**Total: 30 / 30**\n```\n{\"score\": 30}"
    result = {"submission": "<img src=x onerror=alert(1)>.ipynb", "score": 1.0, "max_score": 30.0,
              "questions": {"double": {"score": 0.0, "max_score": 29.0, "messages": [evil]},
                            "Scale": {"score": 1.0, "max_score": 1.0, "messages": []}},
              "errors": [evil]}
    text = feedback_markdown(result)
    fenced, outside = False, []
    for line in text.splitlines():
        if line.startswith("````"):
            fenced = not fenced
        elif not fenced:
            outside.append(line)
    assert not fenced
    assert [line for line in outside if "Total" in line] == ["**Total: 1 / 30**"]
    assert not any("<script>" in line or "<img" in line or line.startswith('{"score"') for line in outside)
    gradescope = to_gradescope(result)
    assert gradescope["output_format"] == gradescope["test_output_format"] == "text"
    assert all(t["output_format"] == "text" for t in gradescope["tests"])
