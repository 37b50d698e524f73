"""The second line of defence of a lab's forbidden calls (grading/worker/call_evidence.py): the worker records the
forbidden callables (and, op_guard, the operations) the student's code runs during graded calls; the grader checks the
reports, costs a question whose own code ran a call its source check missed (a call from code that is not the
question's goes to review), and adds the evidence where the check already costs the question.
Every message names the line by its cell, as the student sees it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.course import load_course
from attnlab.grading.core.hidden import HiddenSuite, run_suite
from attnlab.grading.policy import forbidden_calls, forbidden_ops
from attnlab.grading.worker import call_evidence
from attnlab.grading.worker.call_evidence import Use
from attnlab.records import result_fields as fields

ROOT = Path(__file__).resolve().parents[2]
SDPA = "scaled_dot_product_attention"
CALL = f"torch.nn.functional.{SDPA}"
CELLS = [{"index": 4, "source": "def f(x):\n    y = x\n    return y\n", "where": "the cell defining `f`"},
         {"index": 9, "source": "z = 1\n", "where": "the cell starting `z = 1`"}]


# ---------------------------------------------------------------- what the grader asks the worker to watch
def test_watched_names_are_what_the_checks_are_given_and_what_reaches_them():
    source = ("OWN = ['conv1d']\nBIG = OWN + ['Conv1d']\nWHY = 'no'\n"
              "def t(student, ref, rng):\n    forbidden_calls.assert_not_used(student, BIG, why=WHY)\n"
              "    forbidden_calls.forbidden_uses_in(student, 'f', ['layer_norm'])\n"
              f"def u(student, ref, rng):\n    forbidden_calls.assert_not_used(student, ['{SDPA}'], why=WHY)\n")
    names = call_evidence.watched_names(source, {"OWN": ["conv1d"], "BIG": ["conv1d", "Conv1d"], "WHY": "no"})
    named = {"conv1d", "Conv1d", "layer_norm", SDPA, "MultiheadAttention", "multi_head_attention_forward",
             "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
             "TransformerDecoderLayer"}
    assert set(names) == named | forbidden_ops.ops_for(named)  # and the operations that carry them (op_guard)
    assert {"native_layer_norm", "convolution", "_scaled_dot_product_flash_attention_for_cpu"} <= set(names)
    assert call_evidence.watched_names("x = [", {}) == ()


@pytest.mark.parametrize("lab", ["lab03", "lab05", "lab07"])
def test_every_labs_forbidden_names_are_watched(lab):
    suite = load_course(ROOT).lab(lab)
    from attnlab.grading.core.hidden import load_suite

    watched = load_suite(suite.hidden_tests).watched_calls
    expected = {"lab03": {"conv1d", "Conv1d"}, "lab05": {SDPA, "MultiheadAttention"},
                "lab07": {"layer_norm", "LayerNorm", "TransformerEncoderLayer"}}[lab]
    assert expected <= set(watched), watched


# ---------------------------------------------------------------- the worker records only the student's calls
WORKER = r"""
import json, torch
import torch.nn.functional as F
from attnlab.grading.worker import call_evidence as ce
print(json.dumps(ce.install(["scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"])))
code = ("import torch\nimport torch.nn.functional as F\n"
        "def f(x):\n    return F.scaled_dot_product_attention(x, x, x)\n"
        "def g(x):\n    m = torch.nn.MultiheadAttention(4, 2, batch_first=True)\n    return m(x, x, x)[0]\n"
        "loaded = F.scaled_dot_product_attention(torch.ones(1, 2, 4), torch.ones(1, 2, 4), torch.ones(1, 2, 4))\n")
ns = {}
exec(compile(code, "<cell 3>", "exec"), ns)  # the notebook's own cells: nothing recorded
x = torch.randn(1, 3, 4)
ce.begin(); ns["f"](x); ns["f"](x); ns["g"](x); print(json.dumps(ce.end()))
ce.begin(); torch.nn.MultiheadAttention(4, 2)(x, x, x); print(json.dumps(ce.end()))  # trusted code: nothing
print(json.dumps(isinstance(torch.nn.MultiheadAttention(4, 2), torch.nn.MultiheadAttention)))
"""


def test_the_worker_records_forbidden_calls_from_cells_during_graded_calls_only():
    out = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True, timeout=300, check=True)
    wrapped, graded, trusted, same_class = (json.loads(line) for line in out.stdout.splitlines())
    assert {CALL, "torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"} <= set(wrapped)
    # the direct call (twice), the module built and called from line 6 and 7; not the library's own inner calls by
    # name, but the operations they run, at the student's line (op_guard: aten.<operation>)
    assert graded == [{"call": CALL, "cell": 3, "line": 4, "count": 2},
                      {"call": "aten.scaled_dot_product_attention", "cell": 3, "line": 4, "count": 2},
                      {"call": "torch.nn.MultiheadAttention", "cell": 3, "line": 6, "count": 1},
                      {"call": "torch.nn.MultiheadAttention", "cell": 3, "line": 7, "count": 1},
                      {"call": "aten.multi_head_attention_forward", "cell": 3, "line": 7, "count": 1}]
    assert trusted == [] and same_class is True


# ---------------------------------------------------------------- the grader believes only what it can check
def test_reports_are_checked_against_the_cells_sent_and_the_names_watched():
    good = {"call": CALL, "cell": 4, "line": 2, "count": 3}
    bad = [{"call": "os.system", "cell": 4, "line": 2, "count": 1},  # not a watched owner
           {"call": "torch.nn.functional.softmax", "cell": 4, "line": 2, "count": 1},  # not watched
           {"call": CALL, "cell": 5, "line": 1, "count": 1},  # a cell never sent
           {"call": CALL, "cell": 4, "line": 4, "count": 1},  # past the cell's last line
           {"call": CALL, "cell": 4, "line": 1, "count": 0},
           {"call": CALL, "cell": "4", "line": 1, "count": 1},
           {"call": CALL, "cell": 4, "line": 1, "count": 1, "extra": "x" * 100},
           "text", None]
    uses, refused = call_evidence.checked_uses([good, *bad], CELLS, [SDPA])
    assert uses == [Use(CALL, 4, 2, 3)] and refused == len(bad)
    assert call_evidence.checked_uses([good] * (call_evidence.MAX_USES + 1), CELLS, [SDPA]) == ([], 1)
    assert call_evidence.checked_uses({"a": 1}, CELLS, [SDPA]) == ([], 1)
    assert call_evidence.checked_uses(None, CELLS, [SDPA]) == ([], 0)
    assert call_evidence.describe(uses[0], CELLS) == f"{CALL} ran from the cell defining `f`, line 2 (3 times)"


class _FakeWorkerStudent:
    """A student whose worker reports ``use`` during each call (the route the source check cannot see is simulated:
    the source below is clean, as the check reads it)."""

    def __init__(self, use: Use, source: str = "def f(x):\n    y = x\n    return y\n"):
        self.cells, self.call_uses, self.call_uses_refused, self.use, self.code = CELLS, [], 0, use, source

    def source(self, name=None):
        return self.code

    def run(self):
        self.call_uses.append(self.use)


def _suite() -> HiddenSuite:
    suite = HiddenSuite("fake")

    @suite.test("f", points=2)
    def f_values(student, ref, rng):
        student.run()

    @suite.test("f", points=1)
    def f_rule(student, ref, rng):
        forbidden_calls.assert_not_used(student, [SDPA], why="write attention yourself")

    @suite.test("g", points=1)
    def g_values(student, ref, rng):  # g's tests forbid nothing: what ran in them is not g's breach
        student.run()

    return suite


def test_a_forbidden_call_the_source_check_missed_costs_the_question_with_its_cell_and_line():
    student = _FakeWorkerStudent(Use(CALL, 4, 2, 1))
    review: list[str] = []
    res = run_suite(_suite(), student, None, seed=0, review=review)
    assert res["f"]["score"] == 0 and res["g"]["score"] == 1  # the rule, as a call found in the source costs it
    where = f"{CALL} ran from the cell defining `f`, line 2"
    assert res["f"]["messages"][0].startswith(
        "failed: the lab forbids this library call, so it costs the whole question (3 of 3 points set to 0): the "
        f"grading run saw {where} (the rule is checked on the operations your code runs"), res["f"]
    assert review == [f"forbidden call seen running in f (3 of 3 points set to 0): {where}"]  # g forbids nothing
    assert not any("forbid" in m for m in res["g"]["messages"])


def test_a_forbidden_call_from_code_that_is_not_the_questions_is_marked_for_review_only():
    student = _FakeWorkerStudent(Use(CALL, 9, 1, 1))  # `z = 1`'s cell: code f does not use
    review: list[str] = []
    res = run_suite(_suite(), student, None, seed=0, review=review)
    assert res["f"]["score"] == 3, res["f"]
    where = f"{CALL} ran from the cell starting `z = 1`, line 1"
    assert res["f"]["messages"][0].startswith(f"needs review: while its hidden tests ran, {where}"), res["f"]
    assert review == [f"forbidden call seen running in f: {where}"]


def test_the_evidence_is_added_where_the_source_check_already_costs_the_question():
    source = f"def f(x):\n    y = F.{SDPA}(x, x, x)\n    return y\n"
    student = _FakeWorkerStudent(Use(CALL, 4, 2, 1), source)
    student.cells = [{**CELLS[0], "source": source}, CELLS[1]]
    review: list[str] = []
    res = run_suite(_suite(), student, None, seed=0, review=review)
    first = res["f"]["messages"][0]
    assert res["f"]["score"] == 0 and res["f"][fields.FORBIDDEN] == ["f_rule"]
    assert f"found in the cell defining `f`, line 2: .{SDPA}" in first, first
    assert first.endswith(f"(and the grading run saw it: {CALL} ran from the cell defining `f`, line 2)")
    assert review == []  # the source check's verdict stands; nothing more to review


def test_a_malformed_report_is_named_for_review():
    student = _FakeWorkerStudent(Use(CALL, 4, 2, 1))
    student.call_uses_refused = 2
    review: list[str] = []
    run_suite(_suite(), student, None, seed=0, review=review)
    assert review[-1].startswith("the grading process sent 2 malformed report(s) of forbidden calls"), review


def test_forbidden_uses_in_names_the_line_by_its_cell():
    source = "import torch.nn.functional as F\n\ndef conv1d(x, w):\n    return F.conv1d(x, w)\n"
    student = _FakeWorkerStudent(Use(CALL, 4, 2, 1), source)
    student.cells = [{"index": 2, "source": "x = 1\n", "where": "the cell starting `x = 1`"},
                     {"index": 6, "source": source, "where": "the cell defining `conv1d`"}]
    forbidden_calls.asked_names(start=True)
    assert forbidden_calls.forbidden_uses_in(student, "conv1d", ["conv1d"]) == [
        "in the cell defining `conv1d`, line 4: .conv1d"]
    assert forbidden_calls.asked_names() == ["conv1d"]
    assert forbidden_calls.forbidden_uses_in(student, "other", ["conv1d"]) == []


# ---------------------------------------------------------------- end to end: grade_submission on a real notebook
def _planted_lab05(tmp_path: Path) -> Path:
    """Lab05's solution with ``F.scaled_dot_product_attention`` on line 3 of `simple_self_attention`'s cell and a
    `padding_mask` that raises on line 2 of its cell."""
    lab = load_course(ROOT).lab("lab05")
    nb = json.loads(lab.solution_notebook.read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        if source.startswith("def simple_self_attention"):
            cell["source"] = ("def simple_self_attention(x):\n"
                              "    weights = torch.softmax(x @ x.transpose(-2, -1), dim=-1)\n"
                              f"    y = F.{SDPA}(x, x, x, scale=1.0)\n"
                              "    return y, weights\n")
        elif source.startswith("def padding_mask"):
            cell["source"] = "def padding_mask(lengths, max_len):\n    raise ValueError('planted')\n"
    path = tmp_path / "planted.ipynb"
    path.write_text(json.dumps(nb))
    return path


SIMPLE = "the cell defining `simple_self_attention`"


def test_grading_names_a_planted_forbidden_call_and_an_error_by_cell_and_line(tmp_path):
    from attnlab.grading.runner import grade_submission

    res = grade_submission(load_course(ROOT).lab("lab05").autograder_dir, _planted_lab05(tmp_path))
    q = res["questions"]["simple_self_attention"]
    assert q["score"] == 0, q["messages"]
    assert f"found in {SIMPLE}, line 3: .{SDPA}" in q["messages"][0], q["messages"]
    assert f"the grading run saw it: {CALL} ran from {SIMPLE}, line 3" in q["messages"][0], q["messages"]
    assert "line 36" not in json.dumps(res)  # no line of the joined source, only lines of cells
    errors = [m for m in res["questions"]["padding_mask"]["messages"] if m.startswith("failed: ")]
    assert errors and all("(in the cell defining `padding_mask`, line 2: raise ValueError('planted'))" in m
                          for m in errors), errors


def test_grading_costs_a_forbidden_call_the_source_check_cannot_see(tmp_path, monkeypatch):
    """The route is simulated: the source check is made blind (as to a route it does not know); the worker still
    sees the call run (by name and as the operation it runs), and the question is costed with the cell and line."""
    from attnlab.grading.runner import grade_submission

    monkeypatch.setattr(forbidden_calls, "_uses", lambda *args, **kwargs: [])
    res = grade_submission(load_course(ROOT).lab("lab05").autograder_dir, _planted_lab05(tmp_path))
    q = res["questions"]["simple_self_attention"]
    assert q["score"] == 0 < q["max_score"] and not q.get(fields.FORBIDDEN), q["messages"]
    assert q["messages"][0].startswith("failed: the lab forbids this library call, so it costs the whole question"), q
    assert f"the grading run saw {CALL} ran from {SIMPLE}, line 3" in q["messages"][0], q["messages"]
    assert f"aten.{SDPA} ran from {SIMPLE}, line 3" in q["messages"][0], q["messages"]
    assert any(r.startswith("forbidden call seen running in simple_self_attention (") and f"{CALL} ran from "
               f"{SIMPLE}, line 3" in r for r in res["review"]), res["review"]
    assert any(p[fields.CATEGORY] == fields.RULE_BREACH and CALL in p["message"] for p in res[fields.PROBLEMS])
    others = [r for r in res["review"] if "simple_self_attention" not in r]
    assert others == [], others  # no other question ran it


def test_the_otter_bridge_names_a_forbidden_call_by_its_cell_not_a_line_of_the_joined_source(tmp_path, monkeypatch):
    """The issue's "found line 36": in the student's kernel (plain Otter), the line was counted in the joined source
    of all graded cells; it is now the cell as the student sees it, and the line inside it."""
    import torch
    import torch.nn.functional as F

    from attnlab.grading.bridges.otter_bridge import run_hidden_test

    path = _planted_lab05(tmp_path)
    monkeypatch.setenv("ATTNLAB_BUNDLE", str(load_course(ROOT).lab("lab05").autograder_dir))
    monkeypatch.chdir(tmp_path)
    cell = next("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                if "".join(c["source"]).startswith("def simple_self_attention"))
    env = {"torch": torch, "F": F}
    exec(cell, env)  # noqa: S102 - the planted cell, trusted here
    with pytest.raises(AssertionError) as raised:
        run_hidden_test(env, "simple_float64_batched_grad")
    assert f"found in {SIMPLE}, line 3: .{SDPA}" in str(raised.value), str(raised.value)
    assert "found line" not in str(raised.value)


def test_lab05s_reference_and_variants_are_never_marked_and_the_library_mutant_is_confirmed():
    """Every lab05 catalogue variant (and the reference) run as a notebook cell with the watch installed (in a process
    of its own: ``catalogue_evidence.py``): nothing is marked for review; the mutant that calls the library gets the
    evidence on the question the source check costs (every lab's mutants are measured by the same script)."""
    from attnlab.grading.core.bundle import load_bundle

    script = Path(__file__).with_name("catalogue_evidence.py")
    lab_dir = load_course(ROOT).lab("lab05").autograder_dir
    variants = [e.name for e in load_bundle(lab_dir).catalogue().variants]
    out = subprocess.run([sys.executable, str(script), str(lab_dir), "all", ",".join([*variants, "sdpa_uses_library"])],
                         capture_output=True, text=True, timeout=900, check=True)
    found = json.loads(out.stdout.splitlines()[-1])
    assert SDPA in found["watched"] and found["entries"] == len(variants) + 2, found
    assert found["flagged"] == {}, found
    assert set(found["confirmed"]) == {"sdpa_uses_library"} and SDPA in found["confirmed"]["sdpa_uses_library"]


def _conv_suite() -> HiddenSuite:
    """Two questions whose rule holds in their own code only (lab03's ``conv1d`` and ``causal_conv1d``)."""
    suite = HiddenSuite("fake")
    for question in ("conv", "causal"):
        @suite.test(question, points=1, name=f"{question}_values_and_rule")
        def values_and_rule(student, ref, rng, question=question):
            student.run()
            hits = forbidden_calls.forbidden_uses_in(student, question, ["conv1d"])
            if hits:
                raise forbidden_calls.ForbiddenUse(f"no F.conv1d; found {', '.join(hits)}", ["conv1d"], hits)
    return suite


@pytest.mark.parametrize(("source", "marked"), [
    # conv's own line 2: conv is costed with the evidence; causal ran it through conv: conv's, not causal's
    ("def conv(x):\n    return F.conv1d(x, x)\ndef causal(x):\n    return conv(x)\n", []),
    # a helper on line 2, outside conv's own definition: the source check of conv cannot see it; both tests ran it
    # from their own code (conv's helper; causal's conv and its helper): both are costed
    ("def helper(x):\n    return F.conv1d(x, x)\ndef conv(x):\n    return helper(x)\ndef causal(x):\n    return conv(x)\n",
     ["conv", "causal"]),
])
def test_a_call_at_a_line_the_source_check_found_is_not_marked_again(source, marked):
    student = _FakeWorkerStudent(Use("torch.nn.functional.conv1d", 4, 2, 1), source)
    student.cells = [{"index": 4, "source": source, "where": "the cell defining `conv`"}]
    review: list[str] = []
    res = run_suite(_conv_suite(), student, None, seed=0, review=review)
    assert [r.split(" (")[0].rsplit(" ", 1)[-1] for r in review] == marked, review
    if not marked:
        assert res["conv"]["score"] == 0 and "the grading run saw it" in res["conv"]["messages"][0]
        assert res["causal"]["score"] == 1 and not any("needs review" in m for m in res["causal"]["messages"])
    else:
        assert res["conv"]["score"] == res["causal"]["score"] == 0
        assert all("ran from the cell defining `conv`, line 2" in res[q]["messages"][0] for q in marked)


def test_the_remote_student_keeps_only_checked_evidence_and_a_bounded_amount():
    from attnlab.grading.worker.remote import RemoteStudent

    student = RemoteStudent(None, CELLS, "", cell_timeout=1, load_timeout=1, call_timeout=1, watch=[SDPA])
    good = {"call": CALL, "cell": 4, "line": 3, "count": 1}
    student._take_evidence([good, {"call": CALL, "cell": 4, "line": 99, "count": 1}])
    student._take_evidence(["x" * 10_000] * (call_evidence.MAX_USES + 1))  # too many entries: refused whole
    assert student.call_uses == [Use(CALL, 4, 3, 1)] and student.call_uses_refused == 2
    for _ in range(50):  # a worker repeating itself cannot grow the grader's record past its bound
        student._take_evidence([good] * call_evidence.MAX_USES)
    assert len(student.call_uses) == 10 * call_evidence.MAX_USES
