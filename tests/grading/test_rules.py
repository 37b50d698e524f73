"""The course rules (grading/policy/rules.py): every route to a forbidden call the red team found, and the classes
around them, is refused and named; no honest code of any lab (solutions, blank notebooks, catalogue mutants
and variants) is."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest
import torch  # noqa: F401 - the grader process has torch loaded, as rules' module lookups expect

from attnlab.course import load_course
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import HiddenSuite, run_suite
from attnlab.grading.core.mutants import load_catalogue
from attnlab.grading.policy import forbidden_calls, rules
from attnlab.grading.source.notebook_code import python_source, read_cells
from attnlab.grading.worker.api import LocalStudent

ROOT = Path(__file__).resolve().parents[2]
HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
SDPA = "scaled_dot_product_attention"

# name -> (code after HEAD, the text the breach must name)
ROUTES = {
    "alias_of_module": ("_g = F\ny = _g.softmax(x, -1)", "`_g = F`"),
    "alias_of_submodule_path": ("g = torch.nn.functional\ny = g.softmax(x, -1)", "`torch.nn.functional`"),
    "alias_in_a_list": ("g = [F][0]", "`F`"),
    "alias_through_lambda": ("f = (lambda: F)()", "`F`"),
    "alias_through_walrus": ("(g := F).softmax(x)", "`F`"),
    "alias_as_default": ("def f(m=F):\n    return m.softmax", "`F`"),
    "type_of_module": ("t = type(F)", "`F`"),
    "attrgetter": (f"import operator\ny = operator.attrgetter('{SDPA}')(F)", "`import operator`"),
    "methodcaller": ("import operator\ny = operator.methodcaller('mul', 2)(x)", "`import operator`"),
    "inspect": ("import inspect\nm = inspect.getmodule(F.softmax)", "`import inspect`"),
    "object_getattribute": (f"f = object.__getattribute__(F, '{SDPA}')", "__getattribute__"),
    "module_dict": (f"f = F.__dict__['{SDPA}']", "`F.__dict__`"),
    "vars_of_module": (f"f = vars(F)['{SDPA}']", "`vars`"),
    "dir_of_module": ("d = dir(torch)", "`dir`"),
    "globals_builtins": ("b = globals()['__builtins__']", "`globals`"),
    "locals": ("b = locals()", "`locals`"),
    "function_globals": ("def h():\n    pass\nb = h.__globals__['__builtins__']", "`h.__globals__`"),
    "builtins_eval": ("e = __builtins__['eval']", "`__builtins__`"),
    "exec_via_builtins": ("__builtins__.exec('1')", "`__builtins__`"),
    "builtins_module": ("import builtins\nbuiltins.eval('1')", "`import builtins`"),
    "concat_name": ("f = getattr(F, 'scaled_dot' + '_product_attention')", "`getattr`"),
    "fstring_name": ("n = 'scaled_dot'\nf = getattr(F, f'{n}_product_attention')", "`getattr`"),
    "join_name": ("f = getattr(F, ''.join(['scaled_dot', '_product_attention']))", "`getattr`"),
    "variable_name": ("n = 'softmax'\nf = getattr(F, n)", "`getattr`"),
    "getattr_as_value": ("g = getattr\nf = g(nn, 'Linear')", "`getattr`"),
    "reduce_getattr": ("import functools\nf = functools.reduce(getattr, ['nn', 'Linear'], torch)", "`getattr`"),
    "setattr": ("setattr(x, 'y', 1)", "`setattr`"),
    "hasattr_private": ("ok = hasattr(torch, '_C')", "_C"),
    "pickle": ("import pickle\npickle.loads(b'')", "`import pickle`"),
    "torch_load": ("m = torch.load('weights.pt')", "`torch.load`"),
    "codecs": ("import codecs\nexec(codecs.decode('cevag(1)', 'rot13'))", "`import codecs`"),
    "ctypes": ("import ctypes", "`import ctypes`"),
    "os_system": ("import os\nos.system('ls')", "`import os`"),
    "subprocess": ("import subprocess\nsubprocess.run(['ls'])", "`import subprocess`"),
    "sys_modules": ("import sys\nm = sys.modules['attnlab.grading.worker.executor']", "`import sys`"),
    "torch_reexports_sys": ("m = torch.sys.modules", "`torch.sys`"),
    "attnlab_reexports_os": ("import attnlab.kit.device\nattnlab.kit.device.os.system('ls')", "`attnlab.kit.device.os`"),
    "importlib": ("import importlib\nt = importlib.import_module('torch')", "`import importlib`"),
    "dunder_import": ("t = __import__('torch')", "`__import__`"),
    "eval": ("f = eval('lambda x: x')", "`eval`"),
    "exec": ("exec('y = 1')", "`exec`"),
    "compile": ("c = compile('1', 'c', 'eval')", "`compile`"),
    "private_torch": ("y = torch._C._VariableFunctions.mul(x, 2)", "`torch._C`"),
    "torch_ops": ("y = torch.ops.aten.mul(x, 2)", "`torch.ops`"),
    "from_private": ("from torch import _C", "`from torch import _C`"),
    "star_import": ("from torch.nn.functional import *", "`from torch.nn.functional import *`"),
    "relative_import": ("from . import x", "`from . import x`"),
    "grading_import": ("import attnlab.grading.worker.executor as ex", "`import attnlab.grading.worker.executor as ex`"),
    "grading_from": ("from attnlab import grading", "`from attnlab import grading`"),
    "grading_tamper": ("import attnlab.kit.expect\nattnlab.grading.worker.executor.x = 1", "`attnlab.grading`"),
    "patch_library": ("torch.allclose = lambda *a, **k: True", "`torch.allclose`"),
    "delete_from_library": ("del F.softmax", "`F.softmax`"),
    "self_default": ("def f(self=torch):\n    return self._C", "`torch`"),
    "self_rebound": ("def f(self):\n    self = torch\n    return self._C", "`self`"),
    "dunder_method": ("class L(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass",
                      "defining __torch_function__"),
    "class_attribute": ("c = x.__class__", "`x.__class__`"),
    "type_three_args": ("A = type('A', (), {})", "`type`"),
    "metaclass": ("class A(metaclass=abc):\n    pass", "`metaclass=abc`"),
    "match_class_attribute": ("match x:\n    case object(_private=p):\n        pass", "_private"),
    "dunder_name": ("s = __loader__", "`__loader__`"),
    "open_file": ("t = open('/etc/passwd').read()", "`open`"),
    "generator_frame": ("g = (i for i in [1])\nb = g.gi_frame.f_globals['__builtins__']", "gi_frame"),
    "traceback_frame": ("try:\n    1 / 0\nexcept Exception as e:\n    b = e.__traceback__.tb_frame", "__traceback__"),
    "function_code": ("def h():\n    pass\nc = h.__code__", "__code__"),
    "type_hints_eval": ("import typing\ndef h(a: 'F.softmax'):\n    pass\nt = typing.get_type_hints(h)",
                        "get_type_hints"),
    "formatter_get_field": ("import string\nf = string.Formatter().get_field('0.__globals__', [h], {})",
                            "Formatter"),
    "select_by_name": ("fs = [f for f in torch.overrides.get_testing_overrides() if f.__name__ == 'x']",
                       "torch.overrides"),
    "function_name": ("n = F.softmax.__name__", "__name__"),
}


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_route_is_refused_and_named(name):
    code, named = ROUTES[name]
    found = rules.breaches([("cell 7", HEAD + code)])
    text = "; ".join(map(str, found))
    assert found and named.strip("`") in text, text
    assert all(b.where.startswith("cell 7, line ") for b in found)
    assert int(found[0].where.rsplit(" ", 1)[1]) > 3  # within the cell, after the 3 lines of HEAD


def test_a_breach_names_cell_line_code_and_reason():
    found = rules.breaches([("cell 2", "import torch\n"), ("cell 5", "x = 1\nimport os\n")])
    assert [str(b) for b in found] == [
        "cell 5, line 2: `import os` (importing os is not allowed in the graded cells)"]


def test_imports_carry_over_between_cells_and_a_lab_may_add_modules():
    cells = [("cell 1", "import torch.nn.functional as F\n"), ("cell 2", "g = F\n")]
    assert [b.where for b in rules.breaches(cells)] == ["cell 2, line 1"]
    assert rules.breaches([("", "import json\n")])
    assert rules.breaches([("", "import json\n")], allowed_imports=("json",)) == []
    assert rules.breaches([("", "import os\n")], allowed_imports=("json",))


HONEST = HEAD + dedent('''
    from __future__ import annotations
    import math
    from collections import Counter
    from attnlab.kit.expect import expect_close
    from attnlab.kit.training import fit


    class Block(nn.Module):
        """Uses self._private, getattr/hasattr with constant names, type(x)."""

        def __init__(self, d):
            super().__init__()
            self._proj = nn.Linear(d, d)
            self.bias = getattr(self, "bias", None)

        def _scale(self, x):
            return x / math.sqrt(x.shape[-1])

        def __call__(self, x):
            return super().__call__(x)

        def forward(self, x):
            if not hasattr(x, "shape"):
                raise TypeError(f"expected a tensor, got {type(x)}")
            return F.softmax(self._scale(self._proj(x)), dim=-1)


    def scaled_dot_product_attention(q, k, v):  # the student's own, called bare
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return w @ v, w

    out, w = scaled_dot_product_attention(torch.ones(1, 2, 2), torch.ones(1, 2, 2), torch.ones(1, 2, 2))
    counts = Counter("abc")
''')


def test_a_lab_adds_modules_through_its_suite():
    suite = HiddenSuite("lab98", allowed_imports=("json",))
    suite.test("f", name="tf")(lambda student, ref, rng: None)
    review: list[str] = []
    student = LocalStudent.from_code("import json\nf = json.dumps(1)")
    assert run_suite(suite, student, student, seed=0, review=review)["f"]["score"] == 1 and review == []
    strict = HiddenSuite("lab97")
    strict.test("f", name="tf")(lambda student, ref, rng: None)
    assert run_suite(strict, student, student, seed=0, review=review)["f"]["score"] == 0
    assert review == ["the lab's rules (f set to 0): line 1: `import json` (importing json is not allowed in the "
                      "graded cells)"]


def test_checking_imports_nothing_the_student_names():
    import sys

    name = "torch.utils.tensorboard"
    before = name in sys.modules
    assert rules.breaches([("", "import torch\nx = torch.utils.tensorboard\ny = torch.nn\n")])  # torch.nn: a module
    assert (name in sys.modules) == before


def test_a_flood_of_breaches_is_bounded_in_count_and_time():
    import time

    flood = [(f"cell {i}", "import os\n" * 20_000) for i in range(5)]
    start = time.monotonic()
    found = rules.breaches(flood)
    assert time.monotonic() - start < 20  # 100,000 lines; about 1 s on a quiet machine
    assert len(found) == rules.MAX_BREACHES + 1 and "more than 50" in str(found[-1])
    assert found[-1].where == "cell 0"


def test_honest_code_is_not_flagged():
    assert rules.breaches([("cell 1", HONEST)]) == []
    docstring = 'def f(x):\n    """getattr(x, name)(eval(s))"""\n    return x\n'  # nothing the rules allow runs it
    assert rules.breaches([("cell 1", docstring)]) == []
    assert rules.breaches([("cell 1", docstring.replace('"""g', 'y = """g'))])  # a value may be run
    assert rules.breaches([("cell 1", "def f(:\n")]) == []  # does not parse: the worker reports it


def _graded_code():
    """Every honest code of every lab, as the grader reads it (notebook cells, reference plus catalogue entry),
    with the imports the lab's suite allows beside the default ones (lab09: ``regex``)."""
    course = load_course(ROOT)
    for lab in course.labs:
        allowed = load_bundle(lab.autograder_dir).suite.allowed_imports
        for path in (lab.solution_notebook, lab.student_notebook):
            yield str(path.relative_to(ROOT)), [(f"cell {c.index}", python_source(c.source))
                                                for c in read_cells(path)], allowed
        reference = (lab.autograder_dir / "reference.py").read_text()
        mutants, variants = load_catalogue(lab.autograder_dir / "catalogue.py")
        for entry in mutants + variants:
            yield f"{lab.id}:{entry.name}", [("", f"{reference}\n\n{dedent(entry.source)}")], allowed


def test_no_solution_blank_notebook_mutant_or_variant_of_any_lab_is_flagged():
    seen, flagged = 0, []
    for name, cells, allowed in _graded_code():
        seen += 1
        flagged += [f"{name}: {b}" for b in rules.breaches(cells, allowed)]
    assert seen > 9 * 2 + 100 and flagged == []
    assert rules.breaches([("cell 1", "import regex\n")])  # allowed only where a lab's suite says so


def test_a_breach_costs_the_tied_questions_and_fills_review():
    suite = HiddenSuite("lab98", policy_questions=("f",))
    suite.test("f", name="tf")(lambda student, ref, rng: None)
    suite.test("g", name="tg")(lambda student, ref, rng: None)
    student = LocalStudent.from_code("import torch\n_g = torch\nf = _g\ng = 2")
    review: list[str] = []
    res = run_suite(suite, student, student, seed=0, review=review)
    assert res["f"]["score"] == 0 and "line 2: `_g = torch` (torch: a module" in res["f"]["messages"][0]
    assert "the lab's rules" in res["f"]["messages"][0]
    assert res["g"]["score"] == 1  # not tied to the rules
    assert review == ["the lab's rules (f set to 0): line 2: `_g = torch` (torch: a module is used only through "
                      "its attributes: never as a value, never rebound)"]
    clean: list[str] = []
    run_suite(suite, LocalStudent.from_code("f = 1\ng = 2"), student, seed=0, review=clean)
    assert clean == []


# ---------------------------------------------------------------- a lab's forbidden library functions
NAMES = [SDPA]


def test_forbidden_uses_catches_attribute_import_string_and_match():
    code = ("import torch.nn.functional as F\n"
            f"from torch.nn.functional import {SDPA}\n"
            f"from torch.nn.functional import {SDPA} as sdpa\n"
            "def attention(q, k, v):\n"
            f"    a = F.{SDPA}(q, k, v)\n"
            f"    b = getattr(F, \"{SDPA}\")(q, k, v)\n"
            f"    return torch.nn.functional.{SDPA}(q, k, v)\n"
            "_g = F\n"
            f"c = _g.{SDPA}\n"
            "match F:\n"
            f"    case object({SDPA}=s):\n"
            "        pass\n")
    assert sorted(forbidden_calls.forbidden_uses(code, NAMES)) == [
        f"line 11: {SDPA}=",
        f"line 2: from torch.nn.functional import {SDPA}",
        f"line 3: from torch.nn.functional import {SDPA}",
        f"line 5: .{SDPA}",
        f"line 6: '{SDPA}'",
        f"line 7: .{SDPA}",
        f"line 9: .{SDPA}",
    ]


def test_forbidden_uses_allows_the_students_own_function():
    code = (f"def {SDPA}(q, k, v, mask=None):\n"
            "    return (q @ k.transpose(-2, -1)).softmax(-1) @ v\n"
            f"out = {SDPA}(q, k, v)\n"
            f"# F.{SDPA} is not allowed, says the lab\n"
            f"doc = 'do not call {SDPA} from torch'\n")
    assert forbidden_calls.forbidden_uses(code, NAMES) == []
    assert forbidden_calls.forbidden_uses(None, NAMES) == [] and forbidden_calls.forbidden_uses("", NAMES) == []
    assert forbidden_calls.forbidden_uses("def f(:\n", NAMES) == []


def test_assert_not_used_reads_the_students_source():
    clean = LocalStudent.from_code("def attention(q, k, v):\n    return q\n")
    forbidden_calls.assert_not_used(clean, NAMES, why="write attention yourself")
    cheat = LocalStudent.from_code("import torch.nn.functional as F\n"
                                   f"def attention(q, k, v):\n    return F.{SDPA}(q, k, v)\n")
    with pytest.raises(AssertionError, match=rf"write attention yourself; found line 3: \.{SDPA}"):
        forbidden_calls.assert_not_used(cheat, NAMES, why="write attention yourself")


def test_assert_not_used_names_the_cell_as_the_student_sees_it():
    class Remote:  # what a RemoteStudent holds: the grader's own copy of the cells, each described
        cells = [{"index": 3, "source": "import torch.nn.functional as F\n", "where": "cell 3"},
                 {"index": 9, "source": f"def attention(q, k, v):\n    return F.{SDPA}(q, k, v)\n",
                  "where": "the cell defining `attention`"}]

    with pytest.raises(AssertionError, match=rf"found in the cell defining `attention`, line 2: \.{SDPA}"):
        forbidden_calls.assert_not_used(Remote(), NAMES, why="write attention yourself")


# a forbidden call reached without writing its name: the class that holds it, a string a library runs as code
REACHED = {
    "layer_holds_it": "layer = nn.TransformerEncoderLayer(8, 2)\nattn = layer.self_attn",
    "decoder_holds_it": "m = torch.nn.Transformer(8, 2)",
    "mha_forward": "y = F.multi_head_attention_forward",
    "timer_string": f"t = Timer(stmt='F.{SDPA}(q, k, v)')",
    "type_hint_string": f"def h(a: 'F.{SDPA}(q, k, v)'):\n    pass",
}


@pytest.mark.parametrize("name", sorted(REACHED))
def test_forbidden_uses_sees_what_reaches_the_forbidden_call(name):
    found = forbidden_calls.forbidden_uses(HEAD + REACHED[name], NAMES)
    assert found and all(f.startswith("line ") and int(f.split()[1].rstrip(":")) > 3 for f in found), found
    assert forbidden_calls.forbidden_uses(HEAD + "m = nn.TransformerEncoderLayer(8, 2)", ["layer_norm"]) == []


# routes the rules refuse although no forbidden name is written: torch's internal layout, strings run as code
REACH_ROUTES = {
    "internal_layout": ("m = nn.modules.activation.MultiheadAttention(8, 2)", "torch.nn.modules"),
    "internal_module_alias": ("from torch.nn.modules import activation", "torch.nn.modules"),
    "benchmark_timer": ("t = torch.utils.benchmark.Timer(stmt='x')", "torch.utils.benchmark"),
    "reexported_module": ("files = torch.glob.glob('/autograder/**')", "reaches the module glob"),
    "reexported_private": ("c = torch.cpp.nn", "torch._C.cpp"),
    "type_hint_runs_code": ("def h(a: \"__import__('os').system('ls')\"):\n    pass", "__import__"),
    "singledispatch_hint": ("import functools\n@functools.singledispatch\ndef g(x):\n    pass\n"
                            "@g.register\ndef _(x: \"eval('1')\"):\n    pass", "eval"),
    "timer_statement": ("s = 'import os; os.system(1)'", "import os"),
    "ancestor_class": ("base = nn.LSTM.mro()[1]", "mro"),
    # the same through other standard-library modules that turn a string into code or a name into an object
    "timeit_string": ("import timeit\nt = timeit.timeit('x = 1', number=1)", "import timeit"),
    "pydoc_locate": ("import pydoc\nf = pydoc.locate('torch.nn.functional')", "import pydoc"),
    "marshal": ("import marshal\nc = marshal.loads(b'')", "import marshal"),
    "type_hints_imported": ("from typing import get_type_hints", "get_type_hints"),
    "namedtuple_hint": ("import typing\nP = typing.NamedTuple('P', [('a', \"exec('1')\")])", "exec"),
    # paths from data to code: an annotation built at run time (singledispatch evaluates it), unpickling
    "computed_annotation": ("def h(a: \"F.\" + \"layer_norm(x) or int\"):\n    pass", "annotation computed"),
    "fstring_annotation": ("def h(a: f\"{'ev'}al('1')\"):\n    pass", "annotation computed"),
    "computed_return": ("def h(a) -> ''.join(['in', 't']):\n    pass", "annotation computed"),
    "computed_variable_hint": ("v: 'a' + 'b' = 1", "annotation computed"),
    "long_string_hint": (f"def h(a: '{' ' * 10_001}int'):\n    pass", "annotation computed"),
    "npy_allow_pickle": ("a = np.asarray(np.zeros(1), allow_pickle=True)", "allow_pickle= unpickles"),
    "npy_reader": ("a = np.lib.format.read_array(f, True)", "read_array"),
    "weights_only_false": ("m = torch.nn.Module().f(weights_only=False)", "weights_only other than True"),
    "pickle_module": ("m = fetch(pickle_module=p)", "pickle_module= unpickles"),
    "super_with_class": ("class R(nn.LSTM):\n    def __init__(self):\n        super(nn.LSTM, self).__init__('RNN_TANH', "
                         "2, 2)", "super"),
}


@pytest.mark.parametrize("name", sorted(REACH_ROUTES))
def test_what_code_reaches_is_refused_without_a_forbidden_name(name):
    code, named = REACH_ROUTES[name]
    found = rules.breaches([("cell 4", HEAD + code)])
    assert found and named in "; ".join(map(str, found)) and not any(b.review_only for b in found), found


def test_a_runtime_name_on_self_is_only_reviewed_and_costs_at_most_nothing():
    code = HEAD + dedent('''
        class BiGRUEncoder(nn.Module):
            def __init__(self, d):
                super().__init__()
                for side in ("fwd", "bwd"):
                    setattr(self, f"proj_{side}", nn.Linear(d, d))
                    self.register_parameter(f"h0_{side}", nn.Parameter(torch.zeros(d)))

            def forward(self, x):
                return getattr(self, "proj_" + "fwd")(x) + getattr(self, "proj_bwd")(x)
        ''')
    found = rules.breaches([("cell 4", code)])
    assert [b.review_only for b in found] == [True, True], found
    assert all("the rule 'no names computed at run time'" in b.why for b in found)
    suite = HiddenSuite("lab98")
    suite.test("BiGRUEncoder", name="tb")(lambda student, ref, rng: None)
    suite.test("other", name="to")(lambda student, ref, rng: None)
    review: list[str] = []
    res = run_suite(suite, LocalStudent.from_code(code + "other = 1\n"), None, seed=0, review=review)
    assert {q: r["score"] for q, r in res.items()} == {"BiGRUEncoder": 1, "other": 1}
    assert len(review) == 2 and all("(no points lost)" in r and "no names computed" in r for r in review)
    assert rules.breaches([("", HEAD + "setattr(torch, 'x', 1)\n")])[0].review_only is False


def test_a_breach_costs_the_question_it_appears_in_and_those_that_use_it():
    suite = HiddenSuite("lab98")
    for q in ("f", "g", "h"):
        suite.test(q, name="t" + q)(lambda student, ref, rng: None)
    code = HEAD + "def helper():\n    return eval('1')\ndef f():\n    return helper()\n" \
        "def g():\n    return exec('1')\ndef h():\n    return 2\n"
    review: list[str] = []
    res = run_suite(suite, LocalStudent.from_code(code), None, seed=0, review=review)
    assert {q: r["score"] for q, r in res.items()} == {"f": 0, "g": 0, "h": 1}
    assert "`return eval('1')`" in res["f"]["messages"][0] and "exec" not in res["f"]["messages"][0]
    assert review[0].startswith("the lab's rules (f set to 0): line 5:"), review
    everything = run_suite(suite, LocalStudent.from_code(code + "exec('h = 3')\n"), None, seed=0)
    assert {q: r["score"] for q, r in everything.items()} == {"f": 0, "g": 0, "h": 0}  # binds nothing: anything


# ---------------------------------------------------------------- end to end through grade_submission
def test_an_aliased_forbidden_call_loses_the_points_and_is_reviewed(tmp_path):
    from attnlab.grading.runner import grade_submission

    lab = load_course(ROOT).lab("lab05")
    nb = json.loads(lab.solution_notebook.read_text())
    cells = nb["cells"]
    i = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
             and "".join(c["source"]).startswith("def simple_self_attention"))
    cells[i]["source"] = ("def simple_self_attention(x):\n"
                          "    _g = F\n"
                          "    out = _g.scaled_dot_product_attention(x, x, x, scale=1.0)\n"
                          "    return out, torch.softmax(x @ x.transpose(-2, -1), dim=-1)\n")
    path = tmp_path / "alias.ipynb"
    path.write_text(json.dumps(nb))
    res = grade_submission(lab.autograder_dir, path)
    q = res["questions"]["simple_self_attention"]
    assert q["score"] == 0 and "`_g = F`" in q["messages"][0], q["messages"]
    where = "the cell defining `simple_self_attention`, line 2"  # the cell as the student sees it
    assert res["review"] and all(where in r for r in res["review"]), res["review"]
    others = {name: (r["score"], r["max_score"]) for name, r in res["questions"].items()
              if name in ("causal_mask", "padding_mask")}  # the questions that do not check the forbidden call
    assert len(others) == 2 and all(score == top > 0 for score, top in others.values()), others  # not the lab


def test_a_correct_encoder_registering_parameters_by_built_names_keeps_its_marks(tmp_path):
    """Lab04's bidirectional GRU with ``setattr``/``register_parameter`` under names built at run time: correct,
    only suspicious (rule 6), so it keeps every point and goes to a person, the review naming the rule."""
    from attnlab.grading.runner import grade_submission

    lab = load_course(ROOT).lab("lab04")
    nb = json.loads(lab.solution_notebook.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code"
                and "".join(c["source"]).startswith("class BiGRUEncoder"))
    lines = "".join(cell["source"]).splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "self.weight_ih_l0, self.weight_hh_l0 =" in line)
    lines[first:first + 4] = [
        '        for suffix in ("", "_reverse"):\n',
        '            setattr(self, "weight_ih_l0" + suffix, uniform(3 * H, input_size))\n',
        '            setattr(self, "weight_hh_l0" + suffix, uniform(3 * H, H))\n',
        '            self.register_parameter("bias_ih_l0" + suffix, uniform(3 * H))\n',
        '            self.register_parameter("bias_hh_l0" + suffix, uniform(3 * H))\n']
    cell["source"] = "".join(lines)
    path = tmp_path / "setattr.ipynb"
    path.write_text(json.dumps(nb))
    res = grade_submission(lab.autograder_dir, path)
    awaiting = res.get("awaiting_points", 0)  # the lab's written questions wait for a person: not this test's
    assert res["score"] == res["max_score"] - awaiting > 0, {q: r["score"] for q, r in res["questions"].items()}
    assert len(res["review"]) == 2, res["review"]
    assert all("no points lost" in r and "the rule 'no names computed at run time'" in r
               and "the cell defining `BiGRUEncoder`, line " in r for r in res["review"]), res["review"]
