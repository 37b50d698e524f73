"""The grading core in the student's kernel, for plain Otter (``otter_bridge``) and nbgrader (``nbgrader_bridge``).

A question is scored by the same ``hidden.run_suite`` as ``attnlab grade``, at the same grading seed (the bundle's
secret and the submitted notebook's bytes): each question graded on its own (the reference's version of the graded
names it calls, ``HiddenSuite(graded_on_reference=...)``), partial credit as its tests give it, the same
forbidden-call and course-rule costs, the same zero for an answer not written. What differs is where the student's
code runs: in the kernel that ran the notebook, beside the tests, with that grader's isolation and time limits
rather than attnlab's sandboxed worker (``LocalStudent`` over the notebook's globals).

Both graders call in at a question's check cell, but what is graded is the notebook's final state, as on the other
routes: while a question is graded, each ``def``/``class`` (or assignment of a graded name) that a later cell
redefines, or that only a later cell defines, is bound in the notebook's globals to its last definition in the
notebook (``final_definitions``), and the check-time bindings come back afterwards, so the rest of the notebook runs
as it would have.

``question_result`` runs a question's tests once per kernel and notebook, and keeps the result: Otter asks once per
hidden test case, nbgrader once per test cell. A question that lost points gets the likely mistake named as
`attnlab grade` names it (``diagnose.name_mistakes`` on what its failed tests asked), weighed against the results of
the graded names its code calls, so that a helper's mistake is named on the helper's question only.
"""

from __future__ import annotations

import ast
import hashlib
import re
import threading
from contextlib import contextmanager
from pathlib import Path

from attnlab.grading.core.bundle import grading_seed, load_bundle
from attnlab.grading.core.hidden import LAST_GRADED, run_suite
from attnlab.grading.diagnosis.diagnose import HINT_PREFIX, Recorder, name_mistakes
from attnlab.grading.source.notebook_code import definitions, python_source
from attnlab.grading.worker.api import LocalStudent
from attnlab.records import result_fields as fields

_RESULTS: dict[tuple, dict] = {}  # (kernel namespace, bundle, notebook, question) -> run_suite's entry
_LOCK = threading.RLock()  # re-entered: a question's result asks for those of the graded names it calls
_FINAL: set[int] = set()  # the namespaces that now hold the notebook's final definitions (``final_definitions``)
_ABSENT = object()  # a name the namespace did not hold at the check cell


def question_result(env: dict, bundle_dir: str | Path, data: bytes, code: str | None, cells: list[dict] | None,
                    question: str) -> dict:
    """``run_suite``'s entry for ``question`` (``score``, ``max_score``, ``messages``, ``failed``) with the student's
    code in ``env`` (the notebook's globals), ``code`` and ``cells`` read from the notebook whose bytes are ``data``."""
    bundle = load_bundle(bundle_dir)
    if question not in bundle.suite.questions():
        raise KeyError(f"no hidden tests for a question named {question!r} in {bundle.lab}")
    key = (id(env), str(bundle.directory), hashlib.sha256(data).hexdigest(), question)
    with _LOCK:
        if key not in _RESULTS:
            _RESULTS[key] = {}  # asked again while it runs (two questions calling each other): nothing yet
            with final_definitions(env, cells, bundle.suite.questions()):
                _RESULTS[key] = _graded(env, bundle, data, code, cells, question)
        return _RESULTS[key]


@contextmanager
def final_definitions(env: dict, cells: list[dict] | None, graded=()):
    """``env`` (the notebook's globals at a check cell) holding, while the block runs, the last definition in
    ``cells`` (the notebook's graded cells, ``notebook_code.described_cells``) of each top-level ``def``/``class``,
    or assignment of a ``graded`` name (``split_heads = my_split``), that more than one cell defines or that ``env``
    does not hold yet; the bindings ``env`` had come back after it. A definition whose statement raises (a decorator,
    base class or assigned value the cells bind later) keeps the check-time one."""
    if id(env) in _FINAL or not cells:  # a question graded inside another's grading: already swapped in
        yield
        return
    pairs = [(str(c.get("where", "")), python_source(str(c.get("source", "")))) for c in cells]
    last = sorted(((found[-1], name) for name, found in definitions(pairs, frozenset(graded)).items()
                   if len(found) > 1 or name not in env), key=lambda item: (item[0][0], item[0][1].lineno))
    saved: dict[str, object] = {}
    _FINAL.add(id(env))
    try:
        for (_, node), name in last:
            saved[name] = env.get(name, _ABSENT)
            try:
                exec(compile(ast.Module([node], type_ignores=[]), "<notebook's last definition>", "exec"), env)  # noqa: S102
            except Exception:  # noqa: BLE001 - the student's statement: the binding it had stays
                _restore(env, {name: saved.pop(name)})
        yield
    finally:
        _FINAL.discard(id(env))
        _restore(env, saved)


def _restore(env: dict, saved: dict[str, object]) -> None:
    for name, value in saved.items():
        if value is _ABSENT:
            env.pop(name, None)
        else:
            env[name] = value


def _graded(env: dict, bundle, data: bytes, code: str | None, cells: list[dict] | None, question: str) -> dict:
    """``question``'s entry from ``run_suite``, with ``likely mistake: ...`` added as ``attnlab grade`` adds it."""
    recorder = Recorder(LocalStudent(env, code, cells))
    results = run_suite(bundle.suite, recorder, bundle.reference, seed=grading_seed(bundle, data),
                        questions={question}, on_result=recorder.on_result, review=[])
    entry = results[question]
    if entry["score"] < entry["max_score"]:  # the graded names it calls, as name_mistakes weighs them
        source = recorder.source(question) or ""
        for other in bundle.suite.questions():
            if other != question and re.search(rf"\b{re.escape(other)}\b", source):
                called = question_result(env, bundle.directory, data, code, cells, other)
                if called:
                    results[other] = {**called, "messages": list(called["messages"])}  # a copy: not changed
        name_mistakes(bundle, recorder, results)
    return entry


def test_counted(entry: dict, test: str) -> bool:
    """Whether hidden test ``test`` counts toward its question's score: it passed, and no course rule set the
    question to 0. The points of the tests that count add up to the question's score."""
    return test not in entry.get(fields.FAILED, []) and entry["score"] > 0


def test_message(entry: dict, test: str) -> str:
    """Why ``test`` does not count: its own failure message, after the question's first message when a course
    rule set the whole question to 0."""
    if entry.get(fields.NOT_WRITTEN):  # its messages are the ``not written yet`` lines
        return "\n".join(entry["messages"])
    own = next((m for m in entry["messages"] if m.startswith(f"failed: {test}: ")), "")
    ruled = [m for m in entry["messages"] if m.startswith("failed: the lab")][:1]
    ruled += [m for m in entry["messages"] if m.endswith(LAST_GRADED)]  # a redefined name: which definition counts
    hints = [m for m in entry["messages"] if m.startswith(HINT_PREFIX)]  # the question's likely mistake
    return "\n".join(ruled + ([own] if own else []) + hints) or f"{test}: does not count"
