"""The narrow interface: LocalStudent in this process, RemoteStudent against a real worker process and against
small scripted fake workers (protocol edge cases without the cost of importing torch)."""

import json
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from attnlab.grading.worker.api import LocalStudent, ObjectRef, Result, definition_source
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.remote import RemoteStudent, WorkerDied

DEFS = '''
import os
import torch

def double(x):
    return 2 * x

def double(x):  # the last definition wins
    return x + x

def boom(x):
    return x.reshape(5, 7)

def bump(x):
    x.mul_(3)
    return x

def noisy(x):
    print("n" * 3_000_000)
    return x + 1

def ask():
    return input()

def die(code=3):
    os._exit(code)

class Scale(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.weight

def run_model(model, x):
    return model(x) + 1


def fill(model, value):
    with torch.no_grad():
        model.weight.fill_(value)
    return model


class Wrapper(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) - 1
'''


# ---------------------------------------------------------------- LocalStudent


@pytest.fixture(scope="module")
def local():
    return LocalStudent.from_code(DEFS, "<cell 5>")


def test_local_call_returns_a_result_with_int_keyed_grads(local):
    x = torch.randn(3, dtype=torch.float64)
    res = local.call("double", x, grad=True, grad_outputs=[torch.ones(3, dtype=torch.float64)])
    assert isinstance(res, Result)
    assert torch.equal(res.output, 2 * x)
    assert list(res.grads) == [0] and torch.equal(res.grads[0], torch.full((3,), 2.0, dtype=torch.float64))
    assert local.has("double") and not local.has("triple")


def test_local_student_never_shares_tensors_with_the_test(local):
    x = torch.ones(2)
    res = local.call("bump", x)
    assert torch.equal(x, torch.ones(2))  # the student modified its own copy
    assert res.modified == [0] and torch.equal(res.output, torch.full((2,), 3.0))


def test_local_errors_are_student_errors(local):
    with pytest.raises(StudentError, match=r"`boom` raised RuntimeError: shape '\[5, 7\]' is invalid"):
        local.call("boom", torch.ones(3))
    with pytest.raises(StudentError, match="`triple` is not defined in your notebook"):
        local.call("triple", 1)


def test_local_modules(local):
    mod = local.create("Scale", 2)
    assert isinstance(mod, ObjectRef) and mod.name == "Scale"
    assert mod.param_shapes() == {"weight": (2,)}
    assert mod.load_state_dict({"weight": torch.tensor([2.0, 3.0]), "bias": torch.zeros(1)}) == ([], ["bias"])
    assert mod.to(torch.float64) is mod
    res = mod.call(torch.ones(2, dtype=torch.float64), grad=True, grad_outputs=[torch.ones(2, dtype=torch.float64)])
    assert res.output.tolist() == [2.0, 3.0]
    assert res.param_grads["weight"].tolist() == [1.0, 1.0]
    assert res.grads[0].tolist() == [2.0, 3.0]
    assert mod.state_dict()["weight"].dtype == torch.float64


def test_source_finds_the_last_definition(local):
    src = local.source("double")
    assert src == "def double(x):  # the last definition wins\n    return x + x"
    assert local.source("Scale").startswith("class Scale(torch.nn.Module):")
    assert local.source("nothing") is None
    assert local.source(None) == DEFS
    assert definition_source("def f(:\n", "f") is None
    assert definition_source("if True:\n    def f():\n        pass\n", "f") is None  # top level only


def test_source_without_code_uses_inspect_or_says_none():
    def helper(x):
        return x

    student = LocalStudent({"helper": helper, "n": 3})
    assert student.source("helper").strip().startswith("def helper(x):")
    assert student.source("n") is None and student.source("missing") is None and student.source(None) is None


# ---------------------------------------------------------------- RemoteStudent, real worker

CELLS = [
    (10, "import os, sys\nimport torch"),
    (11, "print('x' * 4_000_000)\nsys.stdout.write('y' * 1_000_000)\nsys.__stdout__.write('z' * 1_000_000)\n"
         "os.write(1, b'\\0' * 1_000_000)\nprint('e' * 1_000_000, file=sys.stderr)"),
    (12, "answer = input('your name? ')"),
    (13, "while True:\n    pass"),
    (14, "%matplotlib inline\nMAGIC = 42"),
    (15, "def broken(:\n    pass"),
    (16, DEFS),
    (17, "after_errors = True"),
]
CELL_TIMEOUT = 0.5


class Spawner:
    """Starts workers and remembers them, so that the test can reap them."""

    def __init__(self, argv):
        self.argv, self.procs = argv, []

    def __call__(self):
        proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def reap(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
            for pipe in (p.stdin, p.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass


def recording_student(cells: list[dict], **timeouts):
    """A started ``RemoteStudent`` (an unsandboxed worker) on ``cells`` whose ``sent`` lists every frame the grader
    wrote to it; a generator for a fixture: it yields the student, then closes it and reaps the worker."""
    spawner = Spawner([sys.executable, "-m", "attnlab.grading.worker.process"])
    student = RemoteStudent(spawner, cells, "\n".join(c["source"] for c in cells), **timeouts)
    student.start()
    sent: list[bytes] = []
    write = student._write
    student._write = lambda data, *a: (sent.append(bytes(data)), write(data, *a))[1]
    student.sent = sent
    yield student
    student.close()
    spawner.reap()


@pytest.fixture(scope="module")
def remote():
    spawner = Spawner([sys.executable, "-m", "attnlab.grading.worker.process"])
    student = RemoteStudent(spawner, [{"index": i, "source": s} for i, s in CELLS], DEFS,
                            cell_timeout=CELL_TIMEOUT, load_timeout=120, call_timeout=60)
    started = time.monotonic()
    student.start()
    student.load_seconds = time.monotonic() - started
    student.spawner = spawner
    yield student
    student.close()
    spawner.reap()


def test_remote_load_reports_each_failing_cell_and_runs_the_rest(remote):
    errors = remote.notebook_errors
    assert len(errors) == 3, errors
    # each cell named by what the student sees (its first line, or what it defines), with the line inside it
    assert errors[0].startswith("the cell starting `answer = input('your name? ')`, line 1: EOFError")  # no hang
    assert errors[1] == f"the cell starting `while True:` ran past the {CELL_TIMEOUT:g} s cell limit"
    assert errors[2] == "the cell starting `def broken(:`, line 1: SyntaxError: invalid syntax"
    assert remote.has("after_errors") and remote.has("MAGIC") and not remote.has("answer")
    assert remote.load_seconds < 60


def test_remote_calls_after_megabytes_of_printing(remote):
    x = torch.randn(2, 3, dtype=torch.float64)
    res = remote.call("double", x, grad=True, grad_outputs=[torch.ones(2, 3, dtype=torch.float64)])
    assert torch.equal(res.output, 2 * x)
    assert torch.equal(res.grads[0], torch.full((2, 3), 2.0, dtype=torch.float64))
    res = remote.call("noisy", torch.zeros(2))  # prints 3 MB during the call
    assert torch.equal(res.output, torch.ones(2))


def test_remote_errors(remote):
    with pytest.raises(StudentError, match=r"`boom` raised RuntimeError: shape '\[5, 7\]' is invalid.*"
                                           r"\(in the cell defining `double`, `boom`, `bump` and 7 more, line \d+: "
                                           r"return x.reshape\(5, 7\)\)"):
        remote.call("boom", torch.ones(3))
    with pytest.raises(StudentError, match="`triple` is not defined in your notebook"):
        remote.call("triple", 1)
    started = time.monotonic()
    with pytest.raises(StudentError, match="`ask` raised EOFError"):
        remote.call("ask")
    assert time.monotonic() - started < 10


def test_remote_modules_and_in_place_detection(remote):
    mod = remote.create("Scale", 3)
    assert mod.param_shapes() == {"weight": (3,)}
    mod.load_state_dict({"weight": torch.tensor([1.0, 2.0, 3.0])})
    res = mod.call(torch.ones(3), grad=True, grad_outputs=[torch.ones(3)])
    assert res.output.tolist() == [1.0, 2.0, 3.0] and res.param_grads["weight"].tolist() == [1.0, 1.0, 1.0]
    res = remote.call("bump", torch.ones(2))
    assert res.modified == [0]


def test_a_module_ref_is_passed_to_a_function_as_the_object(local, remote):
    for api in (local, remote):
        mod = api.create("Scale", 2)
        mod.load_state_dict({"weight": torch.tensor([2.0, 3.0])})
        assert api.call("run_model", mod, torch.ones(2)).output.tolist() == [3.0, 4.0]
        assert api.call("run_model", x=torch.ones(2), model=mod).output.tolist() == [3.0, 4.0]
        assert api.call("run_model", mod, torch.ones(2)).output.tolist() == [3.0, 4.0]
        assert api.create("Scale", 3).attr("weight").tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="a Scale built by another StudentAPI cannot be passed here"):
        remote.call("run_model", local.create("Scale", 2), torch.ones(2))


def test_the_forward_calls_of_a_module_are_recorded_through_both_students(local, remote):
    for api in (local, remote):
        mod = api.create("Scale", 2)
        api.call("run_model", mod, torch.ones(2))  # not recorded: before record_forward
        mod.record_forward()
        api.call("run_model", mod, torch.ones(3, 2))
        mod.call(torch.ones(1, 2))
        assert mod.forward_calls() == [{"args": [{"tensor": [3, 2]}], "kwargs": {}},
                                       {"args": [{"tensor": [1, 2]}], "kwargs": {}}]
        api.call("run_model", mod, torch.ones(2))
        assert mod.forward_calls() == []  # the record stopped
        assert api.call("run_model", mod, torch.ones(2)).output.tolist() == [2.0, 2.0]


def test_remote_source_reads_the_trusted_code(remote):
    assert remote.source("double").endswith("return x + x")
    assert remote.source(None) == DEFS


def test_os_exit_is_reported_clearly(remote):
    """Last of the real-worker tests: it kills the worker (a later call would start a fresh one, see the fake
    worker tests below for the restart rules)."""
    proc = remote.proc
    with pytest.raises(WorkerDied, match=r"^your code ended the Python process \(exit code 3\)$"):
        remote.call("die", 3)
    assert remote.proc is None and proc.wait(timeout=5) == 3
    assert remote.dead_reason is None  # not given up: the next call may restart


# ---------------------------------------------------------------- RemoteStudent, scripted fake workers

FAKE = textwrap.dedent('''
    import json, os, struct, sys, time
    mode, log = sys.argv[1], sys.argv[2]
    inp, out = os.fdopen(0, "rb", buffering=0), os.fdopen(1, "wb", buffering=0)

    def exact(n):
        data = b""
        while len(data) < n:
            chunk = inp.read(n - len(data))
            if not chunk:
                sys.exit(0)
            data += chunk
        return data

    CURRENT = [None]

    def request():
        (length,) = struct.unpack("<Q", exact(8))
        body = exact(length)
        (hlen,) = struct.unpack("<I", body[:4])
        header = json.loads(body[4:4 + hlen])
        with open(log, "a") as f:
            f.write(json.dumps(header["v"]) + "\\n")
        CURRENT[0] = dict(header["v"]["__dict__"]).get("id")  # echoed in the reply, as the grader checks
        return header["v"]

    def send(tree, length=None):
        h = json.dumps({"v": tree, "blobs": []}).encode()
        body = struct.pack("<I", len(h)) + h
        out.write(struct.pack("<Q", len(body) if length is None else length) + body)

    def ok(value):
        send({"__dict__": [["ok", True], ["value", value], ["id", CURRENT[0]]]})

    if mode == "exit-at-start":
        sys.exit(3)
    req = request()
    if mode == "progress-then-exit":
        send({"__dict__": [["progress", 7]]})
        os._exit(9)
    if mode == "stop-reading":  # a load reply that the grader before issue 12 accepted too
        ok({"__dict__": [["errors", []], ["failed", 0], ["cells", []], ["names", []]]})
        time.sleep(60)
    if mode in ("cell-errors", "unknown-cell"):  # the grader names the cell; the worker gives index, line, error
        index = 7 if mode == "cell-errors" else 5
        errors = [{"__dict__": [["index", index], ["line", 1], ["error", "NameError: in cell 99, line 4"]]},
                  {"__dict__": [["index", 1], ["line", 40], ["error", "ValueError: v"]]}]
        ok({"__dict__": [["errors", errors], ["failed", 2]]})
    ok({"__dict__": [["errors", []], ["failed", 0]]})
    while True:
        req = request()
        if mode == "exit-on-call":
            os._exit(3)
        if mode == "hang":
            time.sleep(60)
        if mode == "oversize":
            send(None, length=2**31)
        if mode == "not-a-reply":
            send([1, 2, 3])
        if mode == "forged-tree":
            send({"__tuple__": 5})
        if mode == "ok":
            ok({"__dict__": [["output", 1], ["grads", {"__dict__": []}], ["inputs_after", {"__dict__": []}]]})
''')


@pytest.fixture(scope="module")
def fake_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("fake") / "fake_worker.py"
    path.write_text(FAKE)
    return path


def fake_student(fake_script, tmp_path, modes, **kw):
    """A RemoteStudent whose n-th start runs the fake in modes[n] (the last mode repeats)."""
    log = tmp_path / "requests.log"
    spawners = [Spawner([sys.executable, "-I", str(fake_script), m, str(log)]) for m in modes]
    count = {"n": 0}

    def spawn():
        i = min(count["n"], len(spawners) - 1)
        count["n"] += 1
        return spawners[i]()

    cells = [{"index": 1, "source": "a = 1"}, {"index": 7, "source": "import os; os._exit(9)"}]
    options = dict(cell_timeout=1, load_timeout=10, call_timeout=10) | kw
    student = RemoteStudent(spawn, cells, "a = 1", **options)
    student.reap = lambda: [s.reap() for s in spawners]
    student.requests = lambda: [json.loads(line) for line in log.read_text().splitlines()]
    student.spawned = lambda: count["n"]
    return student


def test_cell_errors_name_the_cell_from_the_graders_copy_and_drop_a_line_outside_it(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["cell-errors"])
    try:
        student.start()
        assert student.notebook_errors == [
            "the cell starting `import os; os._exit(9)`, line 1: NameError: in cell 99, line 4",
            "the cell starting `a = 1`: ValueError: v"]  # line 40 of a one-line cell: dropped
    finally:
        student.close()
        student.reap()


def test_a_cell_error_for_a_cell_never_sent_is_a_malformed_reply(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["unknown-cell"])
    try:
        with pytest.raises(WorkerDied, match="malformed reply"):
            student.start()
    finally:
        student.reap()


def test_a_worker_that_cannot_start_fails_fast_with_a_reason(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["exit-at-start"])
    try:
        with pytest.raises(WorkerDied, match=r"could not start your code .*exit code 3"):
            student.start()
        started = time.monotonic()
        for _ in range(3):
            with pytest.raises(WorkerDied, match="not run: the grading process could not start your code"):
                student.call("f")
        assert time.monotonic() - started < 1 and student.spawned() == 1
    finally:
        student.reap()


def test_a_cell_that_kills_the_worker_is_skipped_on_the_next_start(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["progress-then-exit", "ok"])
    try:
        student.start()
        assert student.starts == 2
        assert list(student.fatal_cells) == [7]
        assert student.notebook_errors[0].startswith("the cell starting `import os; os._exit(9)` was skipped: "
                                                     "your code ended the Python process")
        loads = [r for r in student.requests() if isinstance(r, dict) and "__dict__" in r]
        indices = [[c["__dict__"][0][1] for c in dict(loads[i]["__dict__"])["cells"]] for i in range(2)]
        assert indices == [[1, 7], [1]]
        assert student.problems == [{"category": "cell_limit", "cell": "the cell starting `import os; os._exit(9)`",
                                     "message": student.notebook_errors[0]}]
    finally:
        student.reap()


def test_death_during_a_call_restarts_until_max_restarts_then_fails_fast(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["exit-on-call"], max_restarts=1)
    try:
        student.start()
        with pytest.raises(WorkerDied, match=r"your code ended the Python process \(exit code 3\)"):
            student.call("f")
        with pytest.raises(WorkerDied, match=r"exit code 3"):
            student.call("f")  # a fresh worker, which dies too
        assert student.spawned() == 2
        started = time.monotonic()
        with pytest.raises(WorkerDied, match="restarted 1 times; giving up"):
            student.call("f")
        with pytest.raises(WorkerDied, match="not run: "):
            student.call("f")
        assert time.monotonic() - started < 1 and student.spawned() == 2
        assert [p["category"] for p in student.problems] == ["worker_crash"] * 3  # two calls, then giving up
        assert student.problems[-1]["message"].endswith("restarted 1 times; giving up")
    finally:
        student.reap()


def test_a_hanging_call_times_out_and_kills_the_worker(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["hang"], call_timeout=0.5)
    try:
        student.start()
        proc = student.proc
        started = time.monotonic()
        with pytest.raises(WorkerDied, match=r"your code ran past the 0.5 s call limit \(an endless loop, or far too slow"):
            student.call("f")
        assert 0.4 < time.monotonic() - started < 5
        assert proc.wait(timeout=5) is not None
        assert [(p["category"], p["cell"]) for p in student.problems] == [("timeout", None)]
    finally:
        student.reap()


@pytest.mark.parametrize("mode, message", [
    ("oversize", "sent a reply of 2147483648 bytes, over the limit"),
    ("not-a-reply", "the worker sent a malformed reply"),
])
def test_malformed_replies_kill_the_worker(fake_script, tmp_path, mode, message):
    student = fake_student(fake_script, tmp_path, [mode])
    try:
        student.start()
        with pytest.raises(WorkerDied, match=message):
            student.call("f")
    finally:
        student.reap()


def test_a_plain_reply_is_accepted(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["ok"])
    try:
        student.start()
        assert student.call("f").output == 1
    finally:
        student.reap()


def test_a_forged_malformed_reply_is_a_worker_death_not_a_grader_crash(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["forged-tree"])
    try:
        student.start()
        with pytest.raises(StudentError):
            student.call("f")
    finally:
        student.reap()


def test_worker_process_exists_only_while_needed(fake_script, tmp_path):
    student = fake_student(fake_script, tmp_path, ["ok"])
    try:
        student.start()
        proc = student.proc
        student.close()
        assert student.proc is None
        assert proc.wait(timeout=5) is not None
    finally:
        student.reap()


@pytest.mark.parametrize("first", ["attnlab.grading.worker.remote", "attnlab.grading.worker.api"])
def test_remote_student_builds_on_api_whichever_module_is_imported_first(first):
    """``RemoteStudent`` lives in grading/worker/remote.py, which builds on api.py; api.py does not import it back (no
    cycle, tests/test_imports.py), so it has one place to come from, whichever module a process imports first."""
    code = textwrap.dedent(f"""
        import importlib
        importlib.import_module({first!r})
        import attnlab.grading.worker.api as api, attnlab.grading.worker.remote as remote
        from attnlab.grading.worker.remote import RemoteStudent, WorkerDied
        assert issubclass(RemoteStudent, api.StudentAPI) and issubclass(WorkerDied, api.StudentError)
        assert not hasattr(api, "RemoteStudent") and "RemoteStudent" not in api.__all__
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("which", ["local", "remote"])
def test_an_object_can_be_created_around_another_and_a_call_returning_its_argument_gives_its_handle(which, request):
    """lab10: SequenceClassifier(encoder, C) is created around an encoder built by create, and
    load_gpt2_weights(model, sd) returns the model it was given (its handle comes back, not an error)."""
    student = request.getfixturevalue(which)
    model = student.create("Scale", 3)
    res = student.call("fill", model, 2.0)
    assert res.output == model.handle
    wrapper = student.create("Wrapper", model)
    assert torch.equal(wrapper.call(torch.ones(1, 3)).output, torch.ones(1, 3))
    assert student.call("run_model", model, torch.ones(1, 3)).output.tolist() == [[3.0, 3.0, 3.0]]
