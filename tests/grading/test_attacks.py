"""Attacks on the grader. Each submission has a WRONG `double` (0 of 2 points when graded honestly) and a
correct `Scale` (1 point), plus one attack. No attack may raise the score above that baseline, and the
grader must answer for each: a row with a score and messages, never an exception.

Every attack is bounded by itself (counts, sizes, sleeps), so that a failing sandbox cannot hurt the
machine running the tests: at most 8 GB touched gradually, 300 processes, 1 GB of disk, 30 s of sleep.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
import threading
from pathlib import Path

import nbformat
import pytest

from attnlab.grading.runner import grade_submission

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
    """Each call finishes within the call limit, but together they exceed the test's time."""
    slow = "import time\n_right = double\ndef double(x):\n    time.sleep(0.8)\n    return x * 2\n"
    res = grade_submission(built_course / "autograder" / LAB, _notebook(tmp_path / "slow.ipynb", slow),
                           cell_timeout=10, call_timeout=10, test_timeout=1.0)
    assert res["questions"]["double"]["score"] == 0
    assert any("ran out of time" in m or "timed out" in m for m in res["questions"]["double"]["messages"])
    assert res["questions"]["Scale"]["score"] == 1.0
