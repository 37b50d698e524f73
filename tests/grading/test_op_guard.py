"""The course rule by capability (grading/worker/op_guard.py): the worker sees the forbidden OPERATIONS run during a
graded call, whatever route reached them, at the student's cell and line; a sighting in the question's own code costs
the question as a forbidden name in its source does. Correct code, which runs matmul and softmax, is never seen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attnlab.course import load_course
from attnlab.grading.policy import forbidden_calls, forbidden_ops, rules

ROOT = Path(__file__).resolve().parents[2]

WORKER = r'''
import io, json, sys
import numpy as np
import torch
import torch.nn.functional as F
from attnlab.grading.worker import call_evidence as ce

class Payload:  # what a notebook could carry as data: unpickling it calls the library
    def __reduce__(self):
        return F.layer_norm, (torch.ones(2, 4), (4,))

def npy_bytes():
    buf = io.BytesIO()
    np.save(buf, np.array([Payload()], dtype=object), allow_pickle=True)
    return buf.getvalue()

def pt_bytes():
    buf = io.BytesIO()
    torch.save(Payload(), buf)
    return buf.getvalue()

CELL = """import functools, io
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
def by_getattr(x):
    return getattr(F, "scaled_" + "dot_product_attention")(x, x, x)
def by_ops(x):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(x, x, x)[0]
def by_c(x):
    return torch._C._nn.scaled_dot_product_attention(x, x, x)
def by_module(x):
    return nn.MultiheadAttention(4, 2, batch_first=True)(x[0], x[0], x[0])[0]
def by_alias(x):
    return torch.native_group_norm(x[0], None, None, 2, 2, 4, 1, 1e-5)[0]
def by_annotation(x):
    f = functools.singledispatch(lambda a: a)
    def g(a: "F." + "layer_norm(torch.ones(2, 4), (4,)) is None or int"):
        return a
    f.register(g)
    return x
def by_npy(x):
    return np.load(io.BytesIO(NPY), allow_pickle=True)
def by_torch_load(x):
    return torch.load(io.BytesIO(PT), weights_only=False)
def honest(x):
    w = torch.softmax(x @ x.transpose(-2, -1) / 2.0, dim=-1)
    return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt() + w @ x
"""
ce.install(["scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward", "layer_norm"])
ns = {"NPY": npy_bytes(), "PT": pt_bytes()}
exec(compile(CELL, "<cell 5>", "exec"), ns)
x = torch.randn(1, 2, 2, 4)
seen = {}
for name in ("by_getattr", "by_ops", "by_c", "by_module", "by_alias", "by_annotation", "by_npy", "by_torch_load",
             "honest"):
    ce.begin()
    ns[name](x)
    seen[name] = sorted({(u["call"], u["line"]) for u in ce.end()})
ce.begin(); torch.nn.functional.layer_norm(x, (4,)); seen["trusted"] = ce.end()  # no cell on the stack: nobody's
seen["imported"] = sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules)
print(json.dumps(seen))
'''

# route -> (an operation it must be seen running, the line of the cell that reached it)
ROUTES = {
    "by_getattr": ("aten.scaled_dot_product_attention", 7),  # getattr(F, "scaled_" + "dot_product_attention")
    "by_ops": ("aten._scaled_dot_product_flash_attention_for_cpu", 9),  # torch.ops.aten, the operator registry
    "by_c": ("aten.scaled_dot_product_attention", 11),  # torch._C._nn
    "by_module": ("aten.multi_head_attention_forward", 13),  # nn.MultiheadAttention: the library's own call inside
    "by_alias": ("aten.native_group_norm", 15),  # torch.native_group_norm, an alias no list named
    "by_annotation": ("aten.native_layer_norm", 20),  # functools.singledispatch evaluating a built string annotation
    "by_npy": ("aten.native_layer_norm", 23),  # numpy's .npy loader with allow_pickle: unpickling calls the library
    "by_torch_load": ("aten.native_layer_norm", 25),  # torch.load without weights_only
}


def test_the_guard_sees_forbidden_operations_through_every_route_at_the_students_line():
    out = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    for route, (operation, line) in ROUTES.items():
        assert [operation, line] in seen[route], (route, seen[route])
        assert all(at == line for _, at in seen[route]), (route, seen[route])  # only the student's line
    assert seen["honest"] == [] and seen["trusted"] == [], seen  # matmul, softmax, mean, var: not forbidden
    # the dispatch mode never pulls in torch's compiler (hundreds of modules, imported again in each fresh worker)
    assert seen["imported"] == [], seen["imported"]


def test_families_name_operations_no_correct_answer_needs():
    every = forbidden_ops.ops_for(forbidden_ops.FAMILIES)
    assert not every & {"matmul", "bmm", "softmax", "_softmax", "linear", "addmm", "mean", "var", "tanh", "sigmoid",
                        "unfold", "einsum", "masked_fill", "lstm", "mkldnn_rnn_layer"}  # lab04 allows nn.LSTM
    assert {"native_layer_norm", "native_group_norm"} <= forbidden_ops.ops_for(["layer_norm"])
    assert "_scaled_dot_product_flash_attention_for_cpu" in forbidden_ops.ops_for(["MultiheadAttention"])
    assert forbidden_ops.ops_for(["lstm_cell"]) & {"lstm", "gru_cell"} == set()


def test_the_source_check_refuses_an_operations_name_as_its_first_line():
    source = "def layer_norm(x):\n    return torch.native_group_norm(x, None, None, 1, 4, 1, 1, 1e-5)[0]\n"
    assert forbidden_calls.forbidden_uses(source, ["layer_norm"]) == ["line 2: .native_group_norm"]
    assert "native_group_norm" in forbidden_calls.reaching(["layer_norm"])


# ---------------------------------------------------------------- end to end: routes the source check cannot see
LAB05_ROUTES = {  # question -> (its cell, the route on line 2, the operation the grading run must name)
    "simple_self_attention": (
        "def simple_self_attention(x):\n"
        "    y = getattr(F, 'scaled_' + 'dot_product_attention')(x, x, x, scale=1.0)\n"
        "    return y, torch.softmax(x @ x.transpose(-2, -1), dim=-1)\n", "aten.scaled_dot_product_attention"),
    "scaled_dot_product_attention": (
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    out = torch.ops.aten.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
        "    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
        "    w = torch.softmax(s if mask is None else s.masked_fill(~mask, float('-inf')), dim=-1)\n"
        "    return out, w\n", "aten.scaled_dot_product_attention"),
}


def _planted(tmp_path: Path, lab_id: str, cells: dict) -> Path:
    nb = json.loads(load_course(ROOT).lab(lab_id).solution_notebook.read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        for question, (code, _) in cells.items():
            if source.startswith(f"def {question}("):
                cell["source"] = code
    path = tmp_path / f"{lab_id}-routes.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _blind(monkeypatch) -> None:
    """The source check and the course rules made blind, as to a route they do not know: only the guard sees."""
    monkeypatch.setattr(forbidden_calls, "_uses", lambda *args, **kwargs: [])
    monkeypatch.setattr(rules, "breaches", lambda *args, **kwargs: [])


def _assert_costed(res: dict, routes: dict) -> None:
    for question, (_, operation) in routes.items():
        q = res["questions"][question]
        where = f"the cell defining `{question}`, line 2"
        assert q["score"] == 0 < q["max_score"], (question, q["messages"])
        assert q["messages"][0].startswith("failed: the lab forbids this library call, so it costs the whole "
                                           "question"), (question, q["messages"])
        assert f"{operation} ran from {where}" in q["messages"][0], (question, q["messages"])


def test_lab05_routes_the_source_check_cannot_see_cost_their_questions(tmp_path, monkeypatch):
    from attnlab.grading.runner import grade_submission

    _blind(monkeypatch)
    res = grade_submission(load_course(ROOT).lab("lab05").autograder_dir, _planted(tmp_path, "lab05", LAB05_ROUTES))
    _assert_costed(res, LAB05_ROUTES)
    full = {q: v["score"] == v["max_score"] for q, v in res["questions"].items()
            if q not in LAB05_ROUTES and v.get("kind") != "written"}
    assert all(full.values()), full  # the other questions, correct, keep full marks


LAB07_ROUTES = {  # the alias: group norm with one group is layer norm
    "layer_norm": ("def layer_norm(x, weight, bias, eps=1e-5):\n"
                   "    y = torch.native_group_norm(x.reshape(-1, 1, x.shape[-1]), None, None, x.reshape(-1, "
                   "x.shape[-1]).shape[0], 1, x.shape[-1], 1, eps)[0]\n"
                   "    return y.reshape(x.shape) * weight + bias\n", "aten.native_group_norm"),
}


def test_lab07_an_unlisted_alias_costs_the_question(tmp_path, monkeypatch):
    from attnlab.grading.runner import grade_submission

    _blind(monkeypatch)
    res = grade_submission(load_course(ROOT).lab("lab07").autograder_dir, _planted(tmp_path, "lab07", LAB07_ROUTES))
    _assert_costed(res, LAB07_ROUTES)
