"""Public checks in the student's kernel: run one check, and show its result as something a student can act on.

The generated test files (``attnlab.kit.generated.public_tests.<lab>``) hold one ``PublicCheck`` per test cell of the master.
Otter's ``grader.check("name")`` runs them; ``start_lab`` wraps Otter's grader so that the result reads

    [FAIL] simple_self_attention: 1 of 3 checks failed
    [pass] the weights of the worked example
    [FAIL] rows of the weights sum to 1
       weights: 2 of 4 values off, the worst at index (0, 1): yours 0.5, expected 0.2689 (off by 0.231)

and an unwritten answer gives one line, ``[FAIL] simple_self_attention: not written yet`` (``SelfAttention.__init__:
not written yet`` for a class; ``[FAIL] generate: its checks use MiniGPT.__init__, which is not written yet`` when
the checks stop at an earlier unwritten answer). The marks are plain ASCII (``PASS``, ``FAIL``): an emoji renders
as an empty box where no emoji font is installed. The check's failing statement is shown only on request
(``grader.check("name", show_source=True)``, or ``ATTNLAB_SHOW_SOURCE=1`` in the environment): it is the check's
code, not a hint. Nothing of the kit's plumbing (file names, line numbers of generated files, internal calls) is
shown.

Each check runs on its own copy of the notebook's variables. Its code is compiled so that its line numbers are
those of its verbatim copy in the test file, and registered in ``linecache``: plain Otter (which prints the test
file's line where the failure happened) and tracebacks both show the check's own line.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from otter.test_files import test_case

from attnlab.records.stub_text import NOT_WRITTEN  # the ending of the stubs' NotImplementedError

from .. import settings

PASS = "[pass]"  # plain ASCII: renders in every font (an emoji check mark is an empty box without an emoji font)
FAIL = "[FAIL]"
SHOW_SOURCE_VARIABLE = settings.SHOW_SOURCE
NBGRADER_EXECUTION = "NBGRADER_EXECUTION"  # nbgrader sets it ("validate", "autograde") while it runs the notebook


def source_requested(show_source: bool | None = None) -> bool:
    """Whether a failed check shows its statement: ``show_source`` when given, else ``ATTNLAB_SHOW_SOURCE``."""
    if show_source is not None:
        return bool(show_source)
    return settings.get(SHOW_SOURCE_VARIABLE).strip().lower() in {"1", "true", "yes", "on"}


@dataclass
class Failure:
    """Why a check failed: the statement of the check that failed, the error's type and message."""

    line: str
    kind: str
    message: str

    @property
    def not_written(self) -> bool:
        return self.kind == "NotImplementedError" and self.message.endswith(NOT_WRITTEN)


class PublicCheck(test_case):
    """One public check (an Otter exception-format test case) whose code is the master's test cell."""

    def __init__(self, name: str, *, question: str, index: int, source: str, first_line: int = 1,
                 points=None):
        super().__init__(name=name, points=points, hidden=False)
        self.question = question
        self.index = index
        self.source = source.strip("\n")
        self.first_line = first_line
        self.failure: Failure | None = None

    @property
    def filename(self) -> str:
        return f"<check {self.index + 1} of {self.question}: {self.name}>"

    def _code(self):
        text = "\n" * (self.first_line - 1) + self.source + "\n"
        linecache.cache[self.filename] = (len(text), None, text.splitlines(True), self.filename)
        return compile(text, self.filename, "exec")

    def call_func(self, global_environment: dict[str, Any]):
        """Run the check on a copy of ``global_environment``; record why it failed, then let the error go on
        to Otter (which reads the failing line from the check's own frame, the next one down)."""
        self.failure = None
        try:
            exec(self._code(), dict(global_environment))  # a copy: the check's own variables stay out
        except Exception as exc:
            self.failure = describe_failure(exc, self)
            raise

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["failure"] = None
        return state


def _statement(source: str, lineno: int) -> str:
    """The innermost simple statement of ``source`` that spans line ``lineno`` (all its lines)."""
    lines = source.split("\n")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= lineno <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno and (node.end_lineno or 0) <= (best.end_lineno or 0):
                best = node
    if best is None:
        return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    chosen = lines[best.lineno - 1: best.end_lineno]
    indent = min(len(x) - len(x.lstrip()) for x in chosen if x.strip())
    return "\n".join(x[indent:] for x in chosen).strip("\n")


def describe_failure(exc: BaseException, check: PublicCheck) -> Failure:
    """The check's statement where ``exc`` passed (the deepest frame of the check's code), and the message."""
    lineno = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == check.filename:
            lineno = line
    statement = _statement(check.source, lineno - check.first_line + 1) if lineno else ""
    message = str(exc).strip()
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    return Failure(statement, type(exc).__name__, message)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _failed_check(name: str, f: Failure | None, message: str, show_source: bool) -> str:
    """The lines of one failed check: its name, the statement (on request) and the message."""
    if f is None:  # not one of ours (a hidden case in the autograder's copy): Otter's own message
        return f"{FAIL} {name}\n{_indent(message.replace('❌ Test case failed', '').strip(), '   ')}"
    if f.not_written:
        return f"{FAIL} {name}: {f.message}"
    what = f.message if f.kind == "AssertionError" else f"{f.kind}: {f.message}"
    block = [f"{FAIL} {name}"]
    if f.line and show_source:
        block.append(_indent(f.line, "     "))
    block.append(_indent(what or "(the assert gives no message)", "   "))
    return "\n".join(block)


def format_result(question: str, result, show_source: bool | None = None) -> str:
    """What ``grader.check(question)`` shows: one line per check, the message below a failed one (its statement
    too when ``source_requested(show_source)``); one line when nothing is written yet."""
    rows = list(getattr(result, "test_case_results", []))
    if not rows:
        return f"{question}: no checks"
    failures = [(r, getattr(r.test_case.body, "failure", None)) for r in rows if not r.passed]
    if not failures:
        return f"{PASS} {question}: all {len(rows)} checks passed"
    if len(failures) == len(rows) and all(f is not None and f.not_written for _, f in failures):
        # one line: the question's own stub when it is among them; else the earlier, unwritten answer its checks
        # call (generate's checks build a MiniGPT), named as such so that the student looks at the right cell
        messages = [f.message for _, f in failures]
        own = [m for m in messages if m.split(":")[0] == question or m.startswith(question + ".")]
        if own:
            return f"{FAIL} {own[0]}"
        other = messages[0].removesuffix(NOT_WRITTEN).rstrip(": ")
        return f"{FAIL} {question}: its checks use {other}, which is not written yet"
    show = source_requested(show_source)
    out = [f"{FAIL} {question}: {len(failures)} of {len(rows)} checks failed"]
    for r in rows:
        if r.passed:
            out.append(f"{PASS} {r.test_case.name}")
        else:
            out.append(_failed_check(r.test_case.name, getattr(r.test_case.body, "failure", None),
                                     r.message or "", show))
    return "\n".join(out)


class CheckResult:
    """Otter's result of ``grader.check``, shown with ``format_result``; every attribute is Otter's."""

    def __init__(self, question: str, result, show_source: bool | None = None):
        self._question = question
        self._result = result
        self._show_source = show_source

    def __getattr__(self, name):
        return getattr(self._result, name)

    def __repr__(self) -> str:
        return format_result(self._question, self._result, self._show_source)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}</pre>"


class Grader:
    """Otter's ``Notebook`` with ``check`` showing ``format_result``; everything else (``export``, ...) is Otter's.

    While nbgrader runs the notebook, ``check`` is nbgrader's test cell instead: while it validates, it raises when
    a public check fails (``require_checks``); while it autogrades, it returns ``autograde(env, lab_id, question)``,
    the question's score from the hidden tests of ``lab_id``. The kit knows no grader: ``start_lab`` passes the one
    nbgrader's bridge gives (``labkit.py``).
    """

    def __init__(self, notebook, lab_id: str | None = None,
                 autograde: Callable[[dict, str, str], float] | None = None):
        self._notebook = notebook
        self._lab_id = lab_id
        self._autograde = autograde

    def __getattr__(self, name):
        return getattr(self._notebook, name)

    def check(self, question: str, global_env: dict | None = None, show_source: bool | None = None):
        """Run ``question``'s public checks; ``show_source=True`` also shows each failed check's statement."""
        import inspect

        if global_env is None:
            frame = inspect.currentframe().f_back
            global_env = frame.f_globals
        if self._lab_id and os.environ.get(NBGRADER_EXECUTION):
            return self._grade_cell(question, global_env)
        result = self._notebook.check(question, global_env)
        return CheckResult(question, result, show_source)

    def _grade_cell(self, question: str, env: dict):
        """``check`` while nbgrader runs the notebook. Validate: the public checks must pass (``require_checks``).
        Autograde: the question's score from its hidden tests, as ``attnlab grade`` gives it, returned as the cell's
        value, which nbgrader reads as partial credit; the public checks are not run, so a failed one never zeroes
        the cell by itself."""
        if os.environ.get(NBGRADER_EXECUTION) != "autograde":
            require_checks(self._notebook, question, env)
            return None
        if self._autograde is None:
            raise AssertionError(f"{question}: nbgrader autogrades, but this grader was given no hidden tests to run "
                                 "(start the notebook with start_lab)")
        import warnings
        from contextlib import redirect_stderr

        with warnings.catch_warnings(), redirect_stderr(sys.stdout):  # anything on stderr scores the cell 0
            warnings.simplefilter("ignore")
            return self._autograde(env, self._lab_id, question)


def require_checks(notebook, question: str, env: dict) -> None:
    """Run Otter's ``notebook.check(question)`` on ``env``; raise ``AssertionError`` naming the question if any
    public check fails, so that nbgrader's Validate and autograde see the failure (a plain ``check`` shows it)."""
    result = notebook.check(question, env)
    failed = [r for r in result.test_case_results if not r.passed and not r.test_case.hidden]
    if failed:
        raise AssertionError(f"{len(failed)} check(s) of {question} do not pass yet:\n"
                             + format_result(question, result, show_source=False))
    # Printed to stdout (nbgrader's Validate counts anything on stderr as a failure), not returned.
    print(f"{question}: all {len(result.test_case_results)} checks pass")
