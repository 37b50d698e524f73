"""The mechanisms, one class each behind one small interface (:class:`Mechanism`): ``Bubblewrap``, ``Unshare``,
``SetprivOnly`` and ``NoIsolation``; how each checks that it works here, what it enforces, and how it starts the
worker (its command line, its environment, the uid it drops to)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attnlab import settings
from attnlab.grading.worker.sandbox.host import missing_tools, others_cannot_run, run_quietly, user_name
from attnlab.grading.worker.sandbox.limits import Limits, rlimit_argv, set_rlimits
from attnlab.grading.worker.sandbox.mounts import Mount, mount_plan, with_parents
from attnlab.grading.worker.sandbox.sandboxed import Sandboxed

if TYPE_CHECKING:
    from attnlab.grading.worker.sandbox.isolation import IsolationReport

BWRAP, UNSHARE, SETPRIV, NONE = "bubblewrap", "unshare", "setpriv-only", "none"
MECHANISMS = (BWRAP, UNSHARE, SETPRIV, NONE)
_DEV_NODES = ("null", "zero", "full", "random", "urandom")


def _setpriv_drop(uid: int) -> list[str]:
    return ["--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
            "--no-new-privs", "--"]


_SETPRIV_CAPS_ONLY = ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


@dataclass
class Job:
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
        return [*wrapper, *rlimit_argv(self.limits), *self.argv]

    def preexec(self):
        """Where prlimit is missing, the rlimits are set between fork and exec instead."""
        return None if rlimit_argv(self.limits) else (lambda: set_rlimits(self.limits))


class Mechanism:
    """One way to isolate the worker, behind one small interface (Otter has one runner class per language).

    ``check(root)``: '' when it works on this machine, else why not. ``start(job)``: the worker started in it,
    a :class:`Sandboxed`. What it enforces is declared by the attributes and hooks below; ``isolation_report`` turns them
    into the :class:`IsolationReport`, and :class:`Sandboxed` uses ``namespaces`` to find and kill the process
    tree.
    """

    name = ""
    # private mount, pid, network, ipc and uts namespaces: grader files hidden, the process tree dies with the
    # sandbox, disk_bytes holds (tmpfs), and a worker killed by signal N is reported as exit status 128 + N
    namespaces = False
    dedicated_uid = True  # as root, the worker runs as a uid claimed for this sandbox (see claim_uid)
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

    def start(self, job: Job) -> Sandboxed:
        raise NotImplementedError


class Bubblewrap(Mechanism):
    """bwrap: new namespaces, a root file system built from read-only binds and tmpfs mounts."""

    name, namespaces = BWRAP, True

    def check(self, root: bool) -> str:
        why = missing_tools("bwrap", "prlimit", *(["setpriv"] if root else []))
        if why:
            return why + " (Debian/Ubuntu: apt-get install bubblewrap util-linux)"
        drop = [shutil.which("setpriv"), *_setpriv_drop(65534)] if root else []
        why = run_quietly([shutil.which("bwrap"), *self.namespace_flags(root, network=False), "--ro-bind", "/",
                            "/", "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", "65536",
                            "--tmpfs", "/tmp", "--", *drop, "/bin/true"])
        return why + " (needs bubblewrap 0.8 or newer)" if "Unknown option" in why else why

    def start(self, job: Job) -> Sandboxed:
        mounts = mount_plan(job.workdir, job.limits, job.hide, job.readable, dedicated_uid=job.uid is not None)
        cmd, opened = self.argv(mounts, job.workdir, job.limits, job.uid)
        try:
            return Sandboxed(job.command(*cmd), kind=self, report=job.report, cwd="/",
                             env=minimal_env(job.workdir, "/tmp", job.env), pass_fds=[f.fileno() for f in opened],
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

    def argv(self, mounts: list[Mount], workdir: str, limits: Limits, uid: int | None) -> tuple[list[str], list]:
        """bwrap command line and the open files it copies in (their fds must be passed to it)."""
        argv = [shutil.which("bwrap"), "--die-with-parent", "--new-session", "--hostname", "sandbox",
                *self.namespace_flags(uid is not None, limits.network)]
        opened = []
        for m in with_parents(mounts):
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
    def mount_flags(m: Mount, limits: Limits) -> list[str]:
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


class Unshare(Mechanism):
    """util-linux unshare + a shell script that mounts the same picture as bubblewrap and chroots into it."""

    name, namespaces = UNSHARE, True
    own_user_detail = ", uid 0 without capabilities inside its user namespace"

    def check(self, root: bool) -> str:
        why = missing_tools("unshare", "chroot", "setpriv", "prlimit", "env", "mount", "cp")
        if why:
            return why + " (Debian/Ubuntu: apt-get install util-linux coreutils mount)"
        scratch = tempfile.mkdtemp(prefix="attnlab-sandbox-probe-")
        try:
            return run_quietly([shutil.which("unshare"), *self.flags(root, network=False), "--", "/bin/sh",
                                 "-c", f"mount -t tmpfs -o size=4k attnlab-probe {shlex.quote(scratch)}"])
        finally:
            os.rmdir(scratch)

    def start(self, job: Job) -> Sandboxed:
        mounts = mount_plan(job.workdir, job.limits, job.hide, job.readable, dedicated_uid=job.uid is not None)
        newroot = tempfile.mkdtemp(prefix="attnlab-sandbox-root-")  # empty: mounted on only inside
        try:
            cmd = self.argv(mounts, newroot, job.workdir, job.limits, job.uid)
            return Sandboxed(job.command(*cmd), kind=self, report=job.report, cwd="/",
                             env=minimal_env(job.workdir, "/tmp", job.env), preexec_fn=job.preexec(), uid=job.uid,
                             lock_fd=job.lock_fd, cleanup_dirs=[newroot])
        except BaseException:
            os.rmdir(newroot)
            raise

    @staticmethod
    def flags(root: bool, network: bool) -> list[str]:
        flags = ["--mount", "--pid", "--fork", "--ipc", "--uts", "--kill-child"]
        flags += [] if network else ["--net"]
        return flags if root else ["--user", "--map-root-user", *flags]

    def argv(self, mounts: list[Mount], newroot: str, workdir: str, limits: Limits, uid: int | None) -> list[str]:
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
    def mount_lines(m: Mount, target: str, workdir: str, limits: Limits, uid: int | None) -> list[str]:
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
        return missing_tools("setpriv", "prlimit") or run_quietly(
            [shutil.which("setpriv"), *_setpriv_drop(65534), "/bin/true"])

    def skipped_when_automatic(self) -> str:
        return others_cannot_run(sys.executable)

    def weaknesses(self) -> list[str]:
        notes = []
        if others_cannot_run(sys.executable):
            notes.append(f"spawn cannot run this grader's Python: {others_cannot_run(sys.executable)}")
        notes.append("no namespaces: the worker sees every world-readable file (grader files are protected only "
                     "by their permissions) and can use the network")
        return notes

    def start(self, job: Job) -> Sandboxed:
        why = others_cannot_run(job.argv[0])
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
                         report=job.report, cwd=job.workdir, env=minimal_env(job.workdir, job.workdir, job.env),
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
        return [f"max_processes counts every process and thread of {user_name(os.getuid())}, "
                "the grader's own included"]

    def weaknesses(self) -> list[str]:
        return ["no isolation: the worker can read what the grader can read and use the network; "
                "a detached process that also clears its environment can survive kill_tree"]

    def start(self, job: Job) -> Sandboxed:
        token = os.urandom(8).hex()
        env = {**minimal_env(job.workdir, job.workdir, job.env), settings.SANDBOX_TOKEN: token}
        return Sandboxed(job.command(), kind=self, report=job.report, cwd=job.workdir, env=env,
                         preexec_fn=job.preexec(), token=f"{settings.SANDBOX_TOKEN}={token}".encode())


def minimal_env(workdir: str, tmpdir: str, extra) -> dict[str, str]:
    env = {"PATH": f"{os.path.join(sys.prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin", "HOME": workdir,
           "TMPDIR": tmpdir, "LANG": "C.UTF-8", "USER": "sandbox", "LOGNAME": "sandbox"}
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env[{key!r}]={value!r}: keys and values must be str")
        env[key] = value
    return env
