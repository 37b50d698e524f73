"""The zygote: a process that imports torch and the worker once, then forks a fresh sandboxed child per worker.

Started by the grader (``forked.py``) as ``python -c <boot> FD PACKAGE_ROOT`` with the worker's minimal
environment, before and apart from anything secret: it never reads a bundle, a submission or the grader's
environment, and it never runs student code. FD is its end of a ``SOCK_SEQPACKET`` socket pair, the only way in;
it exits when that grader process does (a pidfd of it), whoever else holds the socket (the batch's forked grader
processes), and its monitors with it.
It imports ``PRELOAD`` (what the worker needs first), says ``{"ok": true}`` (or why it cannot serve: a thread left
running by an import makes forking unsafe), then, warming up and importing ``WHEN_IDLE`` one step at a time while no
request waits (everything imported is frozen for the cycle collector, ``gc.freeze``, so that no worker's full
collection walks it), answers each request (a JSON spec plus the worker's stdin, stdout, stderr and a status pipe, passed
as file descriptors) by forking:

- M, the monitor (root, host namespaces; dies with the zygote): unshares mount, pid, ipc, uts, cgroup and (unless
  the network is allowed) network namespaces, forks I, writes ``pid <I>`` and finally ``exit <status>`` on the
  status pipe.
- I, pid 1 of the new pid namespace (root; dies with M): builds the file system of the plan under an empty
  folder and pivots into it (``newroot.py``), sets the host name, forks W, reaps orphans, and exits with W's
  status (128 + N for a signal, as bwrap does). When I dies, the kernel kills everything in the namespace.
- W, the worker: a new session, the pipes on fds 0-2 and nothing else open, the capability bounding set emptied,
  the claimed uid (real, effective, saved; no groups), ``no_new_privs``, the rlimits, the minimal environment,
  fresh random seeds; it writes ``ready`` and closes the status pipe, then runs the argv
  (``python -c CODE ARGS`` or ``python -m MODULE ARGS``) as that Python would.

A setup step that fails writes ``error <what>`` on the status pipe (the grader then starts the worker cold).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback

from attnlab.grading.worker.sandbox import syscalls as sc
from attnlab.grading.worker.sandbox.newroot import build_root

# What the worker needs before its first cell runs: imported before the zygote says it is ready.
PRELOAD = ("torch", "torch.nn", "torch.nn.functional", "torch.utils.data", "numpy", "attnlab.grading.worker.process",
           "attnlab.grading.worker.executor", "attnlab.grading.worker.wire", "attnlab.grading.worker.deferred_imports",
           "attnlab.grading.worker.reference_proxy", "attnlab.grading.worker.module_proxy",
           "attnlab.grading.worker.call_evidence",
           "attnlab.grading.source.notebook_code", "attnlab.records.safe_text", "attnlab.kit.device", "attnlab.kit.seeding")
# What a worker may use later (the labs' graded cells import tqdm and the kit's modules): imported, like the warm-up,
# while the zygote waits for requests, one step at a time, so that a grader asking for a worker never waits for them.
# Not pyplot: a graded cell's import of it is deferred to first use (deferred_imports), and its import, one long
# step, would hold up the fork a grader asks for.
WHEN_IDLE = ("tqdm.auto", "attnlab.kit.plotting", "attnlab.kit.training", "attnlab.kit.datasets.sentiment",
             "attnlab.kit.datasets.multi30k", "attnlab.kit.datasets.shakespeare")
MAX_REQUEST_BYTES = 1 << 20
_FDS = 4  # stdin (read end), stdout (write end), stderr (write end), status (write end)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _preload() -> str:
    """'' when every module of PRELOAD imported and this process is still single-threaded, else why not."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a missing optional module is not the zygote's failure
            if name.startswith(("torch", "attnlab.grading")):
                return f"import {name} failed: {type(exc).__name__}: {exc}"
    return _stray_threads()


def _stray_threads() -> str:
    """'' when this process is single-threaded (after waiting for threads an import left), else why forking is unsafe."""
    import threading

    for thread in threading.enumerate():  # a timer an import started and cancelled (matplotlib's font cache)
        if thread is not threading.main_thread():
            thread.join(5)
    threads = _threads()
    return "" if threads == 1 else f"{threads} threads after the imports: forking would copy a half-held lock"


def _idle_steps():
    """What the zygote does while no request waits, one short step per ``next``: the warm-up of each float type, then
    WHEN_IDLE's imports. A step that fails only leaves a colder start."""
    import torch

    for dtype in (torch.float64, torch.float32):  # float64 first: most hidden tests compare in it
        try:
            _warm_up(dtype)
        except Exception as exc:  # noqa: BLE001 - a colder start, not a failure
            print(f"warm-up skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        yield
    for name in WHEN_IDLE:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S110 - an optional module: the worker imports it (or fails) itself
            pass
        yield


def _warm_up(dtype) -> None:
    """Run, once, what every worker's first calls would otherwise pay for (torch's lazily built kernels and
    autograd paths, the wire's encoders): the layers the labs use, forward and backward in ``dtype``."""
    import math

    import torch
    import torch.nn.functional as F

    from attnlab.grading.worker import wire

    torch.manual_seed(0)
    layers = torch.nn.ModuleDict({"emb": torch.nn.Embedding(11, 8), "lin": torch.nn.Linear(8, 8),
                                  "norm": torch.nn.LayerNorm(8), "conv": torch.nn.Conv1d(8, 8, 3, padding=1),
                                  "gru": torch.nn.GRU(8, 8, batch_first=True),
                                  "lstm": torch.nn.LSTM(8, 8, batch_first=True),
                                  "mha": torch.nn.MultiheadAttention(8, 2, batch_first=True)}).to(dtype)
    ids = torch.randint(0, 11, (2, 5))
    x = layers["emb"](ids)
    scores = layers["lin"](x) @ x.transpose(-2, -1) / math.sqrt(8)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    y = layers["norm"](scores.masked_fill(causal, float("-inf")).softmax(-1) @ x)
    y = F.dropout(F.gelu(y) + F.relu(y) + torch.tanh(y) + torch.sigmoid(y), 0.1, training=True)
    z = layers["conv"](y.transpose(1, 2)).transpose(1, 2) + layers["gru"](y)[0] + layers["lstm"](y)[0]
    z = z + layers["mha"](y, y, y, key_padding_mask=ids == 0)[0]
    z = z + F.scaled_dot_product_attention(z[:, None], y[:, None], y[:, None], is_causal=True)[:, 0]
    loss = F.cross_entropy(z.reshape(-1, 8), ids.reshape(-1) % 8) + F.mse_loss(z, y) + F.log_softmax(z, -1).mean()
    loss = loss + F.binary_cross_entropy_with_logits(z, torch.rand_like(z))
    torch.autograd.grad(loss, [x, *layers.parameters()], retain_graph=True, allow_unused=True)
    loss.backward()
    probs = scores[0, 0].detach().softmax(-1)
    torch.multinomial(probs, 3, replacement=True, generator=torch.Generator().manual_seed(0))
    torch.topk(z.detach(), 2), torch.argmax(z.detach(), -1), z.detach().clone().allclose(z.detach())
    wire.roundtrip({"t": z.detach(), "s": layers.state_dict(), "i": ids})


def main(argv: list[str]) -> int:
    """``argv``: [program, the socket's fd, the folder put first on sys.path to find attnlab (removed again)]."""
    ctrl = socket.socket(fileno=int(argv[1]))
    why = _preload() or sc.supported()
    if sys.path and sys.path[0] == argv[2]:
        del sys.path[0]
    ctrl.send(json.dumps({"ok": not why, "error": why, "pid": os.getpid()}).encode())
    if why:
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    gc.freeze()  # torch's objects, copied into every worker: its collector never walks them (see _idle_steps)
    idle, unsafe = _idle_steps(), ""
    watched = [ctrl, *_grader()]
    while True:
        ready = select.select(watched, [], [], 0 if idle is not None else None)[0]
        if ready and ready != [ctrl]:  # the grader that started this process is gone: so are the monitors
            return 0
        if idle is not None and not ready:  # nobody waits: one step of the warm-up
            idle = None if next(idle, StopIteration) is StopIteration else idle
            unsafe = unsafe or _stray_threads()
            gc.freeze()
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctrl, MAX_REQUEST_BYTES, _FDS)
        except OSError:
            return 0
        if not data:  # the grader is gone: the monitors die with this process, and their sandboxes with them
            return 0
        ctrl.send(json.dumps(_serve(data, fds, ctrl, unsafe)).encode())


def _grader() -> list[int]:
    """A pidfd of the grader process that started the zygote (readable once it has exited), or none where the
    kernel has no pidfd_open: then the zygote ends when the last process holding its socket does."""
    try:
        return [os.pidfd_open(os.getppid())]
    except (AttributeError, OSError):
        return []


def _serve(data: bytes, fds: list[int], ctrl: socket.socket, unsafe: str) -> dict:
    """The reply to one request: the monitor forked (its pid), or why not (the grader then starts the worker cold)."""
    try:
        if unsafe:
            return {"ok": False, "pid": None, "error": unsafe}
        pid = _fork_monitor(json.loads(data), fds, ctrl) if len(fds) == _FDS else None
        return {"ok": pid is not None, "pid": pid, "error": "" if pid else f"expected {_FDS} fds"}
    except Exception as exc:  # noqa: BLE001 - a fork that failed is reported, the zygote serves on
        return {"ok": False, "pid": None, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        for fd in fds:
            os.close(fd)


def _fork_monitor(spec: dict, fds: list[int], ctrl: socket.socket) -> int:
    zygote = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # M: never returns
        ctrl.close()
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote:
            os._exit(1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _monitor(spec, fds)
    except BaseException as exc:  # noqa: BLE001
        _say(fds[3], f"error monitor: {type(exc).__name__}: {exc}")
    os._exit(1)


def _say(fd: int, line: str) -> None:
    try:
        os.write(fd, (line.replace("\n", " ")[:2000] + "\n").encode())
    except OSError:
        pass


def _monitor(spec: dict, fds: list[int]) -> None:
    os.setsid()
    flags = sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
    flags |= 0 if spec["network"] else sc.CLONE_NEWNET
    try:
        sc.unshare(flags | sc.CLONE_NEWCGROUP)
    except OSError:
        sc.unshare(flags)  # kernels without cgroup namespaces (bwrap: --unshare-cgroup-try)
    init = os.fork()
    if init == 0:
        _init(spec, fds)
    for fd in fds[:3]:
        os.close(fd)
    _say(fds[3], f"pid {init}")
    _, status = os.waitpid(init, 0)
    _say(fds[3], f"exit {os.waitstatus_to_exitcode(status)}")
    os._exit(0)


def _init(spec: dict, fds: list[int]) -> None:
    """I: pid 1 of the new namespace. Never returns."""
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        os.umask(0o022)
        sc.sethostname("sandbox")
        build_root(spec["newroot"], spec["mounts"], spec["workdir"], spec["disk_bytes"], spec["uid"])
        worker = os.fork()
    except BaseException as exc:  # noqa: BLE001
        _say(fds[3], f"error sandbox set-up: {type(exc).__name__}: {exc}")
        os._exit(126)
    if worker == 0:
        _worker(spec, fds)
    for fd in fds:
        os.close(fd)
    while True:  # reap orphans until the worker is gone; its status is the namespace's
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == worker:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


def _worker(spec: dict, fds: list[int]) -> None:
    """W: drop to the job's uid and limits, then run the argv. Never returns."""
    try:
        os.setsid()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        status = os.dup2(fds[3], 3)
        os.closerange(4, 1 << 16)
        _drop_privileges(spec["uid"], spec["rlimits"])
        os.chdir(spec["workdir"])
        os.environ.clear()
        os.environ.update(spec["env"])
        _fresh_seeds()
    except BaseException as exc:  # noqa: BLE001
        _say(3, f"error worker set-up: {type(exc).__name__}: {exc}")
        os._exit(126)
    _say(status, "ready")
    os.close(status)
    os._exit(_run(spec["argv"]))


def _drop_privileges(uid: int, rlimits: list) -> None:
    import resource

    for cap in range(sc.last_capability() + 1):
        sc.prctl(sc.PR_CAPBSET_DROP, cap)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # without SECBIT_KEEP_CAPS this clears the permitted and effective sets
    with open("/proc/self/status") as f:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k.startswith("Cap")}
    if any(int(caps.get(k, "1"), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")):
        raise PermissionError(f"capabilities left after dropping to uid {uid}: {caps}")
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
    sc.prctl(sc.PR_SET_DUMPABLE, 1)  # as after an exec: /proc/self/fd stays the worker's own
    for name, soft, hard in rlimits:
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _fresh_seeds() -> None:
    """What a new process would draw: the zygote's random states are not handed on."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def _run(argv: list[str]) -> int:
    """Run ``python -c CODE ARGS`` or ``python -m MODULE ARGS`` in this process; its exit status."""
    import atexit
    import runpy
    import types

    code = 0
    try:
        if argv[1] == "-c":
            sys.argv, sys.path[0] = ["-c", *argv[3:]], ""
            main_module = types.ModuleType("__main__")
            sys.modules["__main__"] = main_module
            exec(compile(argv[2], "<string>", "exec"), main_module.__dict__)  # noqa: S102 - in the sandbox
        else:
            sys.argv, sys.path[0] = [argv[2], *argv[3:]], os.getcwd()
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as Python does: the traceback on stderr, status 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException:  # noqa: BLE001
        pass
    return code


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1

