"""Start an untrusted worker process in isolation, and say honestly which isolation holds.

The grader calls ``spawn([sys.executable, "-m", "attnlab.grading.worker"], workdir=..., limits=...)`` and talks to
the worker over ``stdin``/``stdout``. Mechanisms, best first (``ATTNLAB_SANDBOX=bwrap|unshare|setpriv|none|off`` or
``mechanism=`` forces one; ``off`` is ``none``). Each is one subclass of :class:`Mechanism` (``check``: does it work
here; ``start``: the worker in it; attributes and hooks: what it enforces, which ``_report`` turns into the
:class:`IsolationReport`):

- ``bubblewrap`` (:class:`Bubblewrap`): new mount, pid, network, ipc and uts namespaces. The worker sees only what
  Python needs (read-only), ``/proc`` of its own pid namespace, a minimal ``/dev``, and private tmpfs mounts for its
  workdir, ``/tmp`` and ``/dev/shm``.
- ``unshare`` (:class:`Unshare`): the same picture built with util-linux ``unshare`` + ``chroot`` (machines without bwrap).
- ``setpriv-only`` (:class:`SetprivOnly`): root without namespaces (e.g. Docker's default seccomp profile): another
  uid and rlimits only.
- ``none`` (:class:`NoIsolation`): a plain subprocess in a new session with rlimits.

As root, every sandbox runs as its own dedicated uid (default 64000-64255, ``ATTNLAB_SANDBOX_UIDS=FIRST-LAST``), not
as ``nobody``: RLIMIT_NPROC counts per uid (threads included), so parallel workers sharing ``nobody`` would eat each
other's budget, and a uid used by nothing else can be swept clean by ``kill_tree``.

The workdir: in the namespace mechanisms the worker's workdir is a tmpfs of ``disk_bytes`` mounted at the same path,
holding a copy of the host folder at spawn time; what the worker writes there is not copied back (exchange data over
the pipes). In ``setpriv-only`` and ``none`` the worker works in the host folder itself.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import resource
import shlex
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BWRAP, UNSHARE, SETPRIV, NONE = "bubblewrap", "unshare", "setpriv-only", "none"
MECHANISMS = (BWRAP, UNSHARE, SETPRIV, NONE)
_ALIASES = {"bwrap": BWRAP, "bubblewrap": BWRAP, "unshare": UNSHARE, "setpriv": SETPRIV, "setpriv-only": SETPRIV,
            "none": NONE, "off": NONE}
ENV_MECHANISM = "ATTNLAB_SANDBOX"
ENV_UIDS = "ATTNLAB_SANDBOX_UIDS"
_DEFAULT_UIDS = "64000-64255"
# /etc entries the worker may need (dynamic linker, time zone, certificates, fonts for matplotlib, localhost).
_ETC_BASICS = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "hosts", "ssl",
               "ca-certificates", "fonts", "mime.types", "alternatives", "os-release")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_KILL_DEADLINE_S = 10.0
_TAIL_BYTES = 64 * 1024


@dataclass
class Limits:
    memory_bytes: int = 4 * 2**30  # RLIMIT_AS
    cpu_seconds: int = 600  # RLIMIT_CPU
    max_processes: int = 64  # RLIMIT_NPROC (counts threads too)
    file_size_bytes: int = 64 * 2**20  # RLIMIT_FSIZE
    open_files: int = 256  # RLIMIT_NOFILE
    disk_bytes: int = 256 * 2**20  # size of each tmpfs (workdir, /tmp, /dev/shm) in the namespace mechanisms
    network: bool = False

    def __post_init__(self):
        for name in ("memory_bytes", "cpu_seconds", "max_processes", "file_size_bytes", "open_files", "disk_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name}={value!r}: expected a positive int")


@dataclass
class IsolationReport:
    mechanism: str  # one of MECHANISMS
    user: str  # the user the worker runs as
    network_isolated: bool
    filesystem_hidden: bool  # grader files unreadable from the worker
    pid_namespace: bool  # the whole process tree dies with the sandbox
    limits: dict  # Limits field name -> True when enforced
    notes: list[str] = field(default_factory=list)  # what failed or is weak, and why

    def summary(self) -> str:
        held = [name for name, ok in self.limits.items() if ok]
        lost = [name for name, ok in self.limits.items() if not ok]
        parts = [
            f"{self.mechanism} as {self.user}",
            "network isolated" if self.network_isolated else "network OPEN",
            "grader files hidden" if self.filesystem_hidden else "grader files VISIBLE",
            "pid namespace" if self.pid_namespace else "no pid namespace",
            "limits " + (", ".join(held) or "none"),
        ]
        if lost:
            parts.append("not enforced " + ", ".join(lost))
        return "; ".join(parts)


# ---------------------------------------------------------------- what works here


_availability: dict[str, str] = {}  # mechanism -> "" when it works, else why not


def _run_quietly(argv: list[str], timeout: float = 5.0) -> str:
    """'' when argv exits 0, else its last stderr line (or why it could not run)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def _missing(*tools: str) -> str:
    absent = [t for t in tools if shutil.which(t) is None]
    return f"{', '.join(absent)} not found on PATH" if absent else ""


def _kind(name: str) -> Mechanism:
    """The Mechanism called `name` (an alias such as 'bwrap' or 'off' is accepted)."""
    kind = _KINDS.get(_ALIASES.get(name.lower(), name))
    if kind is None:
        raise ValueError(f"sandbox mechanism {name!r}: expected one of {', '.join(sorted(_ALIASES))}")
    return kind


def available(mechanism: str, refresh: bool = False) -> str:
    """'' when ``mechanism`` works on this machine, else why not (cached)."""
    if refresh or mechanism not in _availability:
        _availability[mechanism] = _kind(mechanism).available_here()
    return _availability[mechanism]


def _choose(mechanism: str | None, refresh: bool = False) -> tuple[Mechanism, list[str]]:
    """The mechanism to use and notes on the better ones that do not work here."""
    forced = mechanism or os.environ.get(ENV_MECHANISM, "").strip()
    if forced:
        name = _ALIASES.get(forced.lower())
        if name is None:
            raise ValueError(f"sandbox mechanism {forced!r}: expected one of {', '.join(sorted(_ALIASES))} "
                             f"(set by mechanism= or ${ENV_MECHANISM})")
        why = available(name, refresh)
        if why:
            raise RuntimeError(f"sandbox mechanism {name} does not work here: {why}. Unset ${ENV_MECHANISM} "
                               f"(or pass mechanism=None) to use the best one that works.")
        return _KINDS[name], []
    notes = []
    for kind in _KINDS.values():  # best first
        why = available(kind.name, refresh) or kind.skipped_when_automatic()
        if not why:
            return kind, notes
        notes.append(f"{kind.name} unavailable: {why}")
    raise AssertionError("mechanism 'none' always works")


def probe(refresh: bool = False, mechanism: str | None = None) -> IsolationReport:
    """What isolation ``spawn`` gives on this machine with default Limits (cached; ``refresh`` re-tests)."""
    kind, notes = _choose(mechanism, refresh)
    root = os.geteuid() == 0
    return _report(kind, Limits(), uid=None if root and kind.dedicated_uid else os.getuid(), notes=notes)


def _report(kind: Mechanism, limits: Limits, *, uid: int | None, notes: list[str]) -> IsolationReport:
    """What `kind` enforces for a worker running as `uid` (None: a dedicated uid not yet claimed)."""
    worker_is_root = os.geteuid() == 0 and not kind.dedicated_uid
    limits_held = {
        "memory_bytes": sys.platform.startswith("linux"),  # macOS accepts RLIMIT_AS but does not enforce it
        "cpu_seconds": True,
        "max_processes": not worker_is_root,
        "file_size_bytes": True,
        "open_files": True,
        "disk_bytes": kind.namespaces,
    }
    notes = list(notes)
    if not limits_held["memory_bytes"]:
        notes.append(f"memory_bytes not enforced: {sys.platform} does not enforce RLIMIT_AS")
    if worker_is_root:
        notes.append("max_processes not enforced: RLIMIT_NPROC does not bind root, and the worker runs as root")
    notes += kind.limit_notes(worker_is_root)
    if not kind.namespaces:
        notes.append("disk_bytes not enforced: the worker writes to the host workdir (file_size_bytes holds "
                     "per file)")
    notes += kind.weaknesses()
    if kind.namespaces and limits.network:
        notes.append("network allowed by Limits.network=True")
    return IsolationReport(mechanism=kind.name, user=_describe_user(kind, uid),
                           network_isolated=kind.namespaces and not limits.network,
                           filesystem_hidden=kind.namespaces, pid_namespace=kind.namespaces, limits=limits_held,
                           notes=notes)


def _describe_user(kind: Mechanism, uid: int | None) -> str:
    if uid is None:
        first, last = _uid_range()[0], _uid_range()[-1]
        return f"a dedicated uid from {first}-{last}"
    if uid == os.getuid():
        return f"{_user_name(uid)} (uid {uid}, the grader's own user){kind.own_user_detail}"
    return f"uid {uid} (dedicated to this sandbox, no login)"


def _others_cannot_run(program: str) -> str:
    """'' when any user can run `program` (needed when setpriv-only switches uid in place), else why not."""
    path = os.path.abspath(shutil.which(program) or program)
    for p in (path, os.path.realpath(path)):
        for folder in reversed(Path(p).parents):
            if not os.stat(folder).st_mode & 0o001:
                return f"{program} is not runnable by other users: {folder} is not searchable by them"
        if not os.stat(p).st_mode & 0o001:
            return f"{program} is not executable by other users"
    return ""


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


# ---------------------------------------------------------------- what the worker may see


def python_paths() -> list[str]:
    """Folders the Python running this grader needs: installation, venv, site-packages, the attnlab package."""
    import attnlab

    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             str(Path(attnlab.__file__).resolve().parent)}
    paths |= {os.path.realpath(p) for p in paths}
    return _outermost(p for p in paths if os.path.exists(p))


def private_paths() -> list[str]:
    """Folders hidden from every worker: the grader's hidden tests, reference and solutions, home folders."""
    import attnlab

    hidden = ["/root", "/home"]
    package = Path(attnlab.__file__).resolve().parent
    if package.parent.name == "src":  # an editable install inside the course repository
        repo = package.parent.parent
        hidden += [str(repo / name) for name in ("autograder", "instructor", "solutions")]
    return hidden


def _outermost(paths) -> list[str]:
    """Sorted absolute paths, without those inside another one of them."""
    kept: list[str] = []
    for p in sorted({os.path.abspath(p) for p in paths}):
        if not any(_inside(p, k) for k in kept):
            kept.append(p)
    return kept


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass
class _Mount:
    dest: str
    kind: str  # ro | symlink | tmpfs | hide | dir | proc | dev, and copy-dir | copy-file | copy-link (workdir)
    source: str = ""  # ro: host path; symlink, copy-link: target; copy-file: the host file
    mode: int = 0o755


def _plan(workdir: str, limits: Limits, hide, readable, dedicated_uid: bool) -> list[_Mount]:
    """The sandbox's file system, as mounts sorted parents first."""
    mounts = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            mounts.append(_Mount(d, "symlink", os.readlink(d)))
        elif os.path.isdir(d):
            mounts.append(_Mount(d, "ro", d))
    etc = [f"/etc/{name}" for name in _ETC_BASICS if os.path.exists(f"/etc/{name}")]
    needed = python_paths()
    extra = [os.path.abspath(p) for p in readable]
    for p in extra:
        if not os.path.exists(p):
            raise FileNotFoundError(f"readable={p!r}: no such file or folder; pass paths that exist")
    shown = _outermost([*etc, *needed, *extra])
    hidden = [os.path.abspath(p) for p in (*private_paths(), *hide)]
    for h in hidden:
        if h in needed:
            raise ValueError(f"hide={h!r}: Python needs this folder to run the worker; hide a narrower path")
    for p in shown:
        if not any(_inside(p, m.dest) for m in mounts):
            mounts.append(_Mount(p, "ro", p))
    for h in hidden:  # only a hidden path inside a visible one needs covering; the rest is never mounted
        if os.path.exists(h) and any(_inside(h, p) and h != p for p in shown):
            mounts.append(_Mount(h, "hide", mode=0o755 if os.path.isdir(h) else 0o644))
    writable = 0o777 if dedicated_uid else 0o700
    mounts += [_Mount("/proc", "proc"), _Mount("/dev", "dev"), _Mount("/dev/shm", "tmpfs", mode=0o1777),
               _Mount("/tmp", "tmpfs", mode=0o1777), _Mount(workdir, "tmpfs", mode=writable)]
    mounts += _copy_in(workdir, limits)
    return sorted(mounts, key=lambda m: Path(m.dest).parts)


def _copy_in(workdir: str, limits: Limits, max_entries: int = 1000) -> list[_Mount]:
    """Mounts that copy the host workdir's files into the sandbox's workdir tmpfs."""
    copies, total = [], 0
    for folder, dirs, files in os.walk(workdir):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                copies.append(_Mount(path, "copy-link", os.readlink(path)))
            elif os.path.isdir(path):
                copies.append(_Mount(path, "copy-dir", mode=0o777))
            elif os.path.isfile(path):
                copies.append(_Mount(path, "copy-file", path, mode=0o666))
                total += os.path.getsize(path)
        if len(copies) > max_entries or total > limits.disk_bytes:
            raise ValueError(f"workdir {workdir!r} holds more than {max_entries} entries or "
                             f"{limits.disk_bytes} bytes (Limits.disk_bytes), more than the sandbox copies into "
                             "its tmpfs; pass big read-only data with readable=")
    return copies


# ---------------------------------------------------------------- command lines


def _setpriv_drop(uid: int) -> list[str]:
    return ["--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
            "--no-new-privs", "--"]


_SETPRIV_CAPS_ONLY = ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def _rlimit_argv(limits: Limits) -> list[str]:
    """prlimit in front of the worker; [] where prlimit is missing (then _set_rlimits runs as preexec_fn)."""
    tool = shutil.which("prlimit")
    if tool is None:
        return []
    return [tool, f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}", f"--nproc={limits.max_processes}",
            f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}", "--core=0", "--"]


def _set_rlimits(limits: Limits) -> None:
    for name, value in (("RLIMIT_AS", limits.memory_bytes), ("RLIMIT_CPU", limits.cpu_seconds),
                        ("RLIMIT_NPROC", limits.max_processes), ("RLIMIT_FSIZE", limits.file_size_bytes),
                        ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_CORE", 0)):
        if hasattr(resource, name):
            resource.setrlimit(getattr(resource, name), (value, value))


# ---------------------------------------------------------------- the mechanisms, one class each


@dataclass
class _Job:
    """What spawn hands a mechanism: the worker's command, its workdir and limits, and what it may see."""

    argv: list[str]
    workdir: str
    limits: Limits
    env: dict | None  # variables added to the minimal environment
    hide: tuple
    readable: tuple
    uid: int | None  # the uid claimed for this sandbox (root), else None
    lock_fd: int | None  # holds the claim on `uid`
    report: IsolationReport

    def command(self, *wrapper: str) -> list[str]:
        """`wrapper`, then prlimit (where installed), then the worker's argv."""
        return [*wrapper, *_rlimit_argv(self.limits), *self.argv]

    def preexec(self):
        """Where prlimit is missing, the rlimits are set between fork and exec instead."""
        return None if _rlimit_argv(self.limits) else (lambda: _set_rlimits(self.limits))


class Mechanism:
    """One way to isolate the worker, behind one small interface (Otter has one runner class per language).

    ``check(root)``: '' when it works on this machine, else why not. ``start(job)``: the worker started in it,
    a :class:`Sandboxed`. What it enforces is declared by the attributes and hooks below; ``_report`` turns them
    into the :class:`IsolationReport`, and :class:`Sandboxed` uses ``namespaces`` to find and kill the process
    tree.
    """

    name = ""
    # private mount, pid, network, ipc and uts namespaces: grader files hidden, the process tree dies with the
    # sandbox, disk_bytes holds (tmpfs), and a worker killed by signal N is reported as exit status 128 + N
    namespaces = False
    dedicated_uid = True  # as root, the worker runs as a uid claimed for this sandbox (see _claim_uid)
    linux_only = True
    own_user_detail = ""  # added to the report's user when the worker runs as the grader's own uid

    def available_here(self) -> str:
        if self.linux_only and not sys.platform.startswith("linux"):
            return f"needs Linux (this is {sys.platform})"
        return self.check(os.geteuid() == 0)

    def check(self, root: bool) -> str:
        raise NotImplementedError

    def skipped_when_automatic(self) -> str:
        """Why the automatic choice passes over this mechanism although it works ('' when it does not)."""
        return ""

    def limit_notes(self, worker_is_root: bool) -> list[str]:
        """Notes on limits this mechanism weakens, beyond what the attributes say."""
        return []

    def weaknesses(self) -> list[str]:
        """Notes on what the worker can still reach."""
        return []

    def start(self, job: _Job) -> Sandboxed:
        raise NotImplementedError


class Bubblewrap(Mechanism):
    """bwrap: new namespaces, a root file system built from read-only binds and tmpfs mounts."""

    name, namespaces = BWRAP, True

    def check(self, root: bool) -> str:
        why = _missing("bwrap", "prlimit", *(["setpriv"] if root else []))
        if why:
            return why + " (Debian/Ubuntu: apt-get install bubblewrap util-linux)"
        drop = [shutil.which("setpriv"), *_setpriv_drop(65534)] if root else []
        why = _run_quietly([shutil.which("bwrap"), *self.namespace_flags(root, network=False), "--ro-bind", "/",
                            "/", "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", "65536",
                            "--tmpfs", "/tmp", "--", *drop, "/bin/true"])
        return why + " (needs bubblewrap 0.8 or newer)" if "Unknown option" in why else why

    def start(self, job: _Job) -> Sandboxed:
        mounts = _plan(job.workdir, job.limits, job.hide, job.readable, dedicated_uid=job.uid is not None)
        cmd, opened = self.argv(mounts, job.workdir, job.limits, job.uid)
        try:
            return Sandboxed(job.command(*cmd), kind=self, report=job.report, cwd="/",
                             env=_minimal_env(job.workdir, "/tmp", job.env), pass_fds=[f.fileno() for f in opened],
                             preexec_fn=job.preexec(), uid=job.uid, lock_fd=job.lock_fd)
        finally:
            for f in opened:
                f.close()

    @staticmethod
    def namespace_flags(root: bool, network: bool) -> list[str]:
        if root:  # no user namespace: it would map the worker to uid 0 outside; setpriv switches uid instead
            flags = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                     "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                     "--cap-add", "CAP_SETPCAP"]
            return flags + ([] if network else ["--unshare-net"])
        flags = ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        return flags + (["--share-net"] if network else [])

    def argv(self, mounts: list[_Mount], workdir: str, limits: Limits, uid: int | None) -> tuple[list[str], list]:
        """bwrap command line and the open files it copies in (their fds must be passed to it)."""
        argv = [shutil.which("bwrap"), "--die-with-parent", "--new-session", "--hostname", "sandbox",
                *self.namespace_flags(uid is not None, limits.network)]
        opened = []
        for m in _with_parents(mounts):
            if m.kind == "copy-file":
                opened.append(open(m.source, "rb"))
                argv += ["--perms", f"{m.mode:o}", "--file", str(opened[-1].fileno()), m.dest]
            else:
                argv += self.mount_flags(m, limits)
        argv += ["--chdir", workdir, "--"]
        if uid is not None:
            argv += [shutil.which("setpriv"), *_setpriv_drop(uid)]
        return argv, opened

    @staticmethod
    def mount_flags(m: _Mount, limits: Limits) -> list[str]:
        """The bwrap options for one mount (copy-file needs an open file: see argv)."""
        if m.kind == "ro":
            return ["--ro-bind", m.source, m.dest]
        if m.kind in ("symlink", "copy-link"):
            return ["--symlink", m.source, m.dest]
        if m.kind in ("dir", "copy-dir"):
            return ["--perms", f"{m.mode:o}", "--dir", m.dest]
        if m.kind == "tmpfs":
            return ["--perms", f"{m.mode:o}", "--size", str(limits.disk_bytes), "--tmpfs", m.dest]
        if m.kind == "hide":
            return ["--tmpfs", m.dest] if m.mode == 0o755 else ["--ro-bind", "/dev/null", m.dest]
        if m.kind == "proc":
            return ["--proc", m.dest]
        if m.kind == "dev":
            return ["--dev", m.dest]
        return []


def _with_parents(mounts: list[_Mount]) -> list[_Mount]:
    """Mounts with a 0755 'dir' before each missing parent (bwrap would make it 0700, unreadable after setpriv)."""
    out, made, bound = [], set(), []
    for m in mounts:
        for parent in reversed(Path(m.dest).parents[:-1]):  # without "/"
            p = str(parent)
            if p not in made and not any(_inside(p, b) for b in bound):
                out.append(_Mount(p, "dir"))
                made.add(p)
        out.append(m)
        made.add(m.dest)
        if m.kind in ("ro", "symlink", "proc", "dev", "hide"):
            bound.append(m.dest)
    return out


class Unshare(Mechanism):
    """util-linux unshare + a shell script that mounts the same picture as bubblewrap and chroots into it."""

    name, namespaces = UNSHARE, True
    own_user_detail = ", uid 0 without capabilities inside its user namespace"

    def check(self, root: bool) -> str:
        why = _missing("unshare", "chroot", "setpriv", "prlimit", "env", "mount", "cp")
        if why:
            return why + " (Debian/Ubuntu: apt-get install util-linux coreutils mount)"
        scratch = tempfile.mkdtemp(prefix="attnlab-sandbox-probe-")
        try:
            return _run_quietly([shutil.which("unshare"), *self.flags(root, network=False), "--", "/bin/sh",
                                 "-c", f"mount -t tmpfs -o size=4k attnlab-probe {shlex.quote(scratch)}"])
        finally:
            os.rmdir(scratch)

    def start(self, job: _Job) -> Sandboxed:
        mounts = _plan(job.workdir, job.limits, job.hide, job.readable, dedicated_uid=job.uid is not None)
        newroot = tempfile.mkdtemp(prefix="attnlab-sandbox-root-")  # empty: mounted on only inside
        try:
            cmd = self.argv(mounts, newroot, job.workdir, job.limits, job.uid)
            return Sandboxed(job.command(*cmd), kind=self, report=job.report, cwd="/",
                             env=_minimal_env(job.workdir, "/tmp", job.env), preexec_fn=job.preexec(), uid=job.uid,
                             lock_fd=job.lock_fd, cleanup_dirs=[newroot])
        except BaseException:
            os.rmdir(newroot)
            raise

    @staticmethod
    def flags(root: bool, network: bool) -> list[str]:
        flags = ["--mount", "--pid", "--fork", "--ipc", "--uts", "--kill-child"]
        flags += [] if network else ["--net"]
        return flags if root else ["--user", "--map-root-user", *flags]

    def argv(self, mounts: list[_Mount], newroot: str, workdir: str, limits: Limits, uid: int | None) -> list[str]:
        """unshare + a shell script that builds the new root from `mounts` and chroots into it."""
        lines = ["set -e", "umask 022", f"mount -t tmpfs -o mode=0755,size=1m attnlab-root {shlex.quote(newroot)}"]
        for m in mounts:
            lines += self.mount_lines(m, newroot + m.dest, workdir, limits, uid)
        drop = [shutil.which("setpriv"), *(_setpriv_drop(uid) if uid is not None else _SETPRIV_CAPS_ONLY)]
        inner = [shutil.which("chroot"), newroot, "/usr/bin/env", "-C", workdir, *drop]
        # the shell stays as pid 1 of the namespace, reaping orphans; the worker is its child. A background job's
        # stdin is /dev/null before its redirections apply, hence the copy of the pipe on fd 3.
        lines += ["exec 3<&0", f"{shlex.join(inner)} \"$@\" <&3 3<&- & wait $!"]
        return [shutil.which("unshare"), *self.flags(uid is not None, limits.network), "--", "/bin/sh", "-c",
                "\n".join(lines), "attnlab-sandbox"]

    @staticmethod
    def mount_lines(m: _Mount, target: str, workdir: str, limits: Limits, uid: int | None) -> list[str]:
        """Shell lines that make one mount at `target` (its path under the new root)."""
        q, dest = shlex.quote, shlex.quote(target)
        if m.kind == "ro":
            make = f"mkdir -p {dest}" if os.path.isdir(m.source) else f"mkdir -p $(dirname {dest}); touch {dest}"
            return [make, f"mount --rbind {q(m.source)} {dest}", f"mount -o remount,bind,ro,nosuid,nodev {dest}"]
        if m.kind == "symlink":
            return [f"mkdir -p $(dirname {dest}); ln -s {q(m.source)} {dest}"]
        if m.kind == "tmpfs":
            owner = f",uid={uid},gid={uid}" if uid is not None and m.dest == workdir else ""
            lines = [f"mkdir -p {dest}",
                     f"mount -t tmpfs -o nosuid,nodev,size={limits.disk_bytes},mode={m.mode:o}{owner} attnlab {dest}"]
            if m.dest == workdir:
                lines.append(f"cp -a {q(workdir)}/. {dest}/")
                if uid is not None:
                    lines.append(f"chown -R {uid}:{uid} {dest}")
            return lines
        if m.kind == "hide":
            if m.mode == 0o755:
                return [f"mount -t tmpfs -o size=4k,mode=755 attnlab-hidden {dest}"]
            return [f"mount --bind /dev/null {dest}"]
        if m.kind == "proc":
            return [f"mkdir -p {dest}", f"mount -t proc -o nosuid,nodev,noexec proc {dest}"]
        if m.kind == "dev":
            lines = [f"mkdir -p {dest}"]
            for node in _DEV_NODES:
                lines += [f"touch {dest}/{node}", f"mount --bind /dev/{node} {dest}/{node}"]
            for link, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                             ("stderr", "/proc/self/fd/2")):
                lines.append(f"ln -s {to} {dest}/{link}")
            return lines
        return []  # copy-* entries are the workdir copy, done by cp -a with the workdir's tmpfs


class SetprivOnly(Mechanism):
    """Root without namespaces (e.g. Docker's default seccomp profile): another uid and rlimits only."""

    name = SETPRIV

    def check(self, root: bool) -> str:
        if not root:
            return "needs root (there is no other user to switch to)"
        return _missing("setpriv", "prlimit") or _run_quietly(
            [shutil.which("setpriv"), *_setpriv_drop(65534), "/bin/true"])

    def skipped_when_automatic(self) -> str:
        return _others_cannot_run(sys.executable)

    def weaknesses(self) -> list[str]:
        notes = []
        if _others_cannot_run(sys.executable):
            notes.append(f"spawn cannot run this grader's Python: {_others_cannot_run(sys.executable)}")
        notes.append("no namespaces: the worker sees every world-readable file (grader files are protected only "
                     "by their permissions) and can use the network")
        return notes

    def start(self, job: _Job) -> Sandboxed:
        why = _others_cannot_run(job.argv[0])
        if why:
            raise PermissionError(f"setpriv-only runs the worker as uid {job.uid} without a private file system, "
                                  f"and {why}; install Python where other users can read it, or use "
                                  "bubblewrap or unshare")
        os.chown(job.workdir, job.uid, job.uid)
        os.chmod(job.workdir, 0o700)
        for folder, dirs, files in os.walk(job.workdir):
            for entry in dirs + files:
                os.chown(os.path.join(folder, entry), job.uid, job.uid, follow_symlinks=False)
        return Sandboxed(job.command(shutil.which("setpriv"), *_setpriv_drop(job.uid)), kind=self,
                         report=job.report, cwd=job.workdir, env=_minimal_env(job.workdir, job.workdir, job.env),
                         preexec_fn=job.preexec(), uid=job.uid, lock_fd=job.lock_fd, restore_owner=job.workdir)


class NoIsolation(Mechanism):
    """A plain subprocess in a new session with rlimits; its processes are found again by a token in their
    environment."""

    name, dedicated_uid, linux_only = NONE, False, False

    def check(self, root: bool) -> str:
        return ""

    def limit_notes(self, worker_is_root: bool) -> list[str]:
        if worker_is_root:
            return []
        return [f"max_processes counts every process and thread of {_user_name(os.getuid())}, "
                "the grader's own included"]

    def weaknesses(self) -> list[str]:
        return ["no isolation: the worker can read what the grader can read and use the network; "
                "a detached process that also clears its environment can survive kill_tree"]

    def start(self, job: _Job) -> Sandboxed:
        token = os.urandom(8).hex()
        env = {**_minimal_env(job.workdir, job.workdir, job.env), "ATTNLAB_SANDBOX_TOKEN": token}
        return Sandboxed(job.command(), kind=self, report=job.report, cwd=job.workdir, env=env,
                         preexec_fn=job.preexec(), token=f"ATTNLAB_SANDBOX_TOKEN={token}".encode())


_KINDS: dict[str, Mechanism] = {kind.name: kind for kind in (Bubblewrap(), Unshare(), SetprivOnly(), NoIsolation())}
assert tuple(_KINDS) == MECHANISMS, "the mechanisms, best first"


# ---------------------------------------------------------------- dedicated uids (root only)


def _uid_range() -> range:
    raw = os.environ.get(ENV_UIDS, _DEFAULT_UIDS)
    try:
        first, last = (int(x) for x in raw.split("-"))
        if not 0 < first <= last:
            raise ValueError
    except ValueError:
        raise ValueError(f"{ENV_UIDS}={raw!r}: expected FIRST-LAST, a range of unused uids such as "
                         f"{_DEFAULT_UIDS}") from None
    return range(first, last + 1)


def _claim_uid() -> tuple[int, int]:
    """A uid no account and no process uses, locked for this sandbox: (uid, lock fd)."""
    busy = {p.uid for p in _processes(with_uid=True).values()}
    lock_dir = "/run/attnlab-sandbox" if os.path.isdir("/run") else os.path.join(tempfile.gettempdir(),
                                                                                  "attnlab-sandbox")
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    for uid in _uid_range():
        if uid in busy or uid == os.getuid():
            continue
        try:
            pwd.getpwuid(uid)
            continue  # a real account
        except KeyError:
            pass
        fd = os.open(os.path.join(lock_dir, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return uid, fd
        except BlockingIOError:
            os.close(fd)
    r = _uid_range()
    raise RuntimeError(f"no free sandbox uid in {r[0]}-{r[-1]} (all used by accounts, processes or other "
                       f"sandboxes); set {ENV_UIDS}=FIRST-LAST to a larger range of unused uids")


# ---------------------------------------------------------------- processes


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    uid: int | None  # real uid; None when not asked for
    zombie: bool


def _processes(with_uid: bool = False) -> dict[int, _Proc]:
    """Every process visible in /proc ({} where there is no /proc)."""
    procs = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return procs
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            uid = None
            if with_uid:  # the real uid, which a process cannot change without capabilities
                with open(f"/proc/{name}/status", "rb") as f:
                    uid = int(f.read().split(b"\nUid:")[1].split()[0])
        except OSError:
            continue  # exited meanwhile
        state, ppid, pgid, sid = stat[stat.rindex(b")") + 2:].split()[:4]
        procs[int(name)] = _Proc(int(name), int(ppid), int(pgid), int(sid), uid, state == b"Z")
    return procs


def _descendants(pid: int, procs: dict[int, _Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return token in f.read().split(b"\0")
    except OSError:
        return False


# ---------------------------------------------------------------- the sandboxed process


class Sandboxed:
    """A worker in its sandbox; Popen-like. ``pid`` is the process the grader started (bwrap or unshare in the
    namespace mechanisms). As with Popen, ``wait()`` returns -N when the worker died of signal N."""

    def __init__(self, argv, *, kind: Mechanism, report: IsolationReport, cwd: str | None, env: dict,
                 pass_fds=(), preexec_fn=None, uid: int | None = None, lock_fd: int | None = None,
                 token: bytes | None = None, cleanup_dirs=(), restore_owner: str | None = None):
        self.report = report
        self.mechanism = kind.name
        self._namespaces = kind.namespaces
        self.uid = uid
        self._lock_fd, self._token = lock_fd, token
        self._cleanup_dirs, self._restore_owner = list(cleanup_dirs), restore_owner
        self._killed = False
        self._kill_lock = threading.Lock()
        self._popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       cwd=cwd, env=env, pass_fds=tuple(pass_fds), start_new_session=True,
                                       preexec_fn=preexec_fn)
        self.pid = self._popen.pid
        self.stdin, self.stdout = self._popen.stdin, self._popen.stdout
        self._stderr_tail = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        try:
            for chunk in iter(lambda: self._popen.stderr.read1(65536), b""):
                self._stderr_tail += chunk
                del self._stderr_tail[:-_TAIL_BYTES]
        except (OSError, ValueError):  # closed by __exit__
            pass

    def stderr_tail(self) -> bytes:
        """The last 64 KiB the worker wrote to stderr (stderr is drained so that the worker never blocks on it)."""
        return bytes(self._stderr_tail)

    def _status(self, code: int | None) -> int | None:
        # bwrap and the unshare script report a worker killed by signal N as 128 + N
        if code is not None and self._namespaces and 128 < code < 128 + signal.NSIG:
            return -(code - 128)
        return code

    @property
    def returncode(self) -> int | None:
        return self._status(self._popen.returncode)

    def poll(self) -> int | None:
        return self._status(self._popen.poll())

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises subprocess.TimeoutExpired after `timeout` seconds (then call kill_tree)."""
        return self._status(self._popen.wait(timeout))

    def _members(self, started: bool) -> set[int]:
        """Live processes of this sandbox, the started process itself excluded. `started`: it is still unreaped,
        so its descendants are the sandbox's (in a pid namespace, orphans are adopted by the namespace's init)."""
        # without namespaces, a uid claimed for this sandbox is used by this sandbox only
        by_uid = not self._namespaces and self.uid is not None and self.uid != os.getuid()
        procs = _processes(with_uid=by_uid)
        members = _descendants(self.pid, procs) if started else set()
        if not self._namespaces and started:
            members |= {p.pid for p in procs.values() if self.pid in (p.pgid, p.sid)}
        if by_uid:
            members |= {p.pid for p in procs.values() if p.uid == self.uid}
        if self._token is not None:
            members |= {pid for pid in procs if _has_token(pid, self._token)}
        members -= {self.pid, os.getpid(), 1}
        return {pid for pid in members if not procs[pid].zombie}

    def _sweep(self, started: bool) -> None:
        deadline = time.monotonic() + _KILL_DEADLINE_S
        while time.monotonic() < deadline:
            victims = self._members(started)
            if not victims:
                return
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def kill_tree(self) -> None:
        """Kill the worker and everything it started, detached children included. Idempotent."""
        with self._kill_lock:
            if self._killed:
                return
            # bwrap and unshare exit only after the namespace's init, whose death kills the whole namespace: once
            # they are gone nothing is left. Without a pid namespace, orphans are found by uid or token.
            running = self._popen.poll() is None
            if running:
                self._sweep(started=True)
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._popen.poll() is None:
                self._popen.kill()
            self._popen.wait()
            if not self._namespaces:
                self._sweep(started=False)
            self._killed = True
            self._release()

    def _release(self) -> None:
        if self.stdin and not self.stdin.closed:
            try:
                self.stdin.close()
            except OSError:
                pass
        if self._restore_owner is not None:  # setpriv-only: give the workdir back to the grader
            os.chown(self._restore_owner, os.getuid(), os.getgid())
        for d in self._cleanup_dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Sandboxed:
        return self

    def __exit__(self, *exc) -> None:
        self.kill_tree()
        self._stderr_thread.join(1)
        for pipe in (self.stdout, self._popen.stderr):
            if pipe and not pipe.closed:
                pipe.close()


def _minimal_env(workdir: str, tmpdir: str, extra) -> dict[str, str]:
    env = {"PATH": f"{os.path.join(sys.prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin", "HOME": workdir,
           "TMPDIR": tmpdir, "LANG": "C.UTF-8", "USER": "sandbox", "LOGNAME": "sandbox"}
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env[{key!r}]={value!r}: keys and values must be str")
        env[key] = value
    return env


def spawn(argv, *, workdir, limits: Limits | None = None, env=None, hide=(), readable=(),
          mechanism: str | None = None) -> Sandboxed:
    """Start `argv` in the best sandbox that works here (or `mechanism`, or $ATTNLAB_SANDBOX).

    `workdir`: an existing folder, the worker's cwd and HOME (see the module docstring for what it sees).
    `env`: variables added to a minimal environment; nothing of the grader's environment is passed.
    `hide`: more paths the worker must not read (grader temp dirs, other submissions); the repository's
    autograder/, instructor/, solutions/, /root and /home are always hidden.
    `readable`: more paths the worker may read (read-only), e.g. a data set cache.
    """
    limits = limits or Limits()
    argv = [str(a) for a in argv]
    workdir = os.path.abspath(workdir)
    if not os.path.isdir(workdir):
        raise NotADirectoryError(f"workdir={workdir!r}: not a folder; create it before spawn()")
    kind, notes = _choose(mechanism)
    uid, lock_fd = _claim_uid() if os.geteuid() == 0 and kind.dedicated_uid else (None, None)
    report = _report(kind, limits, uid=uid if uid is not None else os.getuid(), notes=notes)
    job = _Job(argv, workdir, limits, env, tuple(hide), tuple(readable), uid, lock_fd, report)
    try:
        return kind.start(job)
    except BaseException:
        if lock_fd is not None:
            os.close(lock_fd)
        raise


def _read_bounded(pipe, out: bytearray, limit: int) -> None:
    for chunk in iter(lambda: pipe.read1(65536), b""):
        out += chunk[: max(0, limit - len(out))]  # keep reading past the limit so the writer never blocks


def run_once(argv, *, workdir, limits: Limits | None = None, timeout: float, input: bytes = b"", env=None,
             hide=(), readable=(), mechanism: str | None = None,
             max_output: int = 2**20) -> tuple[int, bytes, bytes, bool]:
    """Run `argv` once in a sandbox: (returncode, stdout, stderr tail, timed_out). Output is cut at `max_output`
    bytes; after the worker exits (or `timeout` seconds), everything it started is killed."""
    with spawn(argv, workdir=workdir, limits=limits, env=env, hide=hide, readable=readable,
               mechanism=mechanism) as box:
        out = bytearray()
        reader = threading.Thread(target=_read_bounded, args=(box.stdout, out, max_output), daemon=True)
        reader.start()

        def feed():
            try:
                box.stdin.write(input)
                box.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass

        threading.Thread(target=feed, daemon=True).start()
        try:
            rc, timed_out = box.wait(timeout), False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        box.kill_tree()  # also ends detached children holding stdout open
        rc = box.wait() if rc is None else rc
        reader.join(5)
        box._stderr_thread.join(5)
        return rc, bytes(out), box.stderr_tail(), timed_out
