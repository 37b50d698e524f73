"""Executor: the narrow-interface operations on a namespace of student code (shared by both students)."""

import linecache

import pytest
import torch

from attnlab.grading.worker.executor import Executor, StudentError, tensor_leaves
from attnlab.grading.worker.wire import ObjectHandle

STUDENT = '''
import torch

def affine(x, w, scale=1.0):
    return torch.tanh(x @ w) * scale

def pair(x, y):
    return x * y, (x + y).sum()

def with_ints(x, idx):
    return x[idx] * 2

def ignores_y(x, y):
    return x * 2

def as_float(x):
    return float(x.sum())

def bump(x):
    x.add_(1)
    return x

def bump_kw(x, mask=None):
    mask.zero_()
    return x

def divide(x):
    y = x.sum()
    return y / 0 if False else 1 / 0

def boom():
    raise ValueError("shapes do not match: (2, 3) vs (3, 2)")

NOT_A_FUNCTION = 3

class Scale(torch.nn.Module):
    def __init__(self, d, start=1.0):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((d,), float(start)))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.inner = torch.nn.Linear(d, 2)

    def forward(self, x):
        return self.inner(x * self.weight)

    def mode(self, x):
        return torch.tensor(1.0 if self.training else 0.0)

class Broken:
    def __init__(self, d):
        raise RuntimeError(f"cannot build with d={d}")

class NotAModule:
    pass

class Tokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        self._hidden = 1

    @property
    def broken(self):
        return 1 / 0

    def encode(self, s):
        return [self.chars.index(c) for c in s]

    def _secret(self):
        return "private"

def apply_module(model, x, twice=False):
    y = model(x)
    return model.inner(y @ torch.ones(2, model.weight.shape[0])) if twice else y

def pair_counts(ids):
    counts = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts
'''


@pytest.fixture
def ex():
    filename = "<cell 3>"
    linecache.cache[filename] = (len(STUDENT), None, STUDENT.splitlines(True), filename)
    ns = {}
    exec(compile(STUDENT, filename, "exec"), ns)
    return Executor(ns)


def by_hand(fn, args, kwargs, wrt_pos, wrt_kw, gos):
    args = [a.detach().clone().requires_grad_(i in wrt_pos) if isinstance(a, torch.Tensor) else a
            for i, a in enumerate(args)]
    kwargs = {k: v.detach().clone().requires_grad_(k in wrt_kw) if isinstance(v, torch.Tensor) else v
              for k, v in kwargs.items()}
    out = fn(*args, **kwargs)
    leaves = tensor_leaves(out)
    total = sum((o * g).sum() for o, g in zip(leaves, gos) if g is not None)
    targets = [args[i] for i in wrt_pos] + [kwargs[k] for k in wrt_kw]
    return torch.autograd.grad(total, targets)


def test_call_without_grad_returns_detached_output(ex):
    x, w = torch.randn(2, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    res = ex.call("affine", [x, w], {"scale": 2.0})
    assert torch.allclose(res["output"], torch.tanh(x @ w) * 2)
    assert not res["output"].requires_grad
    assert res["grads"] == {} and res["param_grads"] == {} and set(res["inputs_after"]) == {"0", "1"}


def test_call_with_grads_matches_autograd_by_hand(ex):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, dtype=torch.float64, generator=g)
    w = torch.randn(3, 4, dtype=torch.float64, generator=g)
    s = torch.tensor(0.7, dtype=torch.float64)
    go = torch.randn(2, 4, dtype=torch.float64, generator=g)
    res = ex.call("affine", [x, w], {"scale": s}, grad=True, grad_outputs=[go])
    gx, gw, gs = by_hand(ex.namespace["affine"], [x, w], {"scale": s}, [0, 1], ["scale"], [go])
    assert set(res["grads"]) == {"0", "1", "scale"}
    torch.testing.assert_close(res["grads"]["0"], gx)
    torch.testing.assert_close(res["grads"]["1"], gw)
    torch.testing.assert_close(res["grads"]["scale"], gs)
    # the caller's tensors are untouched: the executor differentiates w.r.t. copies
    assert not x.requires_grad and x.grad is None


def test_grads_of_a_tuple_output_with_a_skipped_cotangent(ex):
    x, y = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    go = torch.randn(3, dtype=torch.float64)
    res = ex.call("pair", [x, y], grad=True, grad_outputs=[go, None])
    torch.testing.assert_close(res["grads"]["0"], go * y)
    torch.testing.assert_close(res["grads"]["1"], go * x)
    res = ex.call("pair", [x, y], grad=True, grad_outputs=[None, torch.tensor(2.0, dtype=torch.float64)])
    torch.testing.assert_close(res["grads"]["0"], torch.full((3,), 2.0, dtype=torch.float64))


def test_grads_equal_autograd_given_grad_outputs_bit_for_bit(ex):
    """The executor backpropagates one scalar, sum(output * cotangent) (torch would import sympy to check given
    cotangents): the gradients are torch's own with ``grad_outputs``, to the bit, in float32 and float64, tuple
    outputs included."""
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.float64):
        x, w = torch.randn(5, 3, dtype=dtype, generator=g), torch.randn(3, 7, dtype=dtype, generator=g)
        go = torch.randn(5, 7, dtype=dtype, generator=g) * 1e3
        res = ex.call("affine", [x, w], grad=True, grad_outputs=[go])
        xs, ws = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        want = torch.autograd.grad(ex.namespace["affine"](xs, ws), [xs, ws], go)
        assert torch.equal(res["grads"]["0"], want[0]) and torch.equal(res["grads"]["1"], want[1])
        x, y = torch.randn(4, dtype=dtype, generator=g), torch.randn(4, dtype=dtype, generator=g)
        gos = [torch.randn(4, dtype=dtype, generator=g), torch.tensor(-2.5, dtype=dtype)]
        res = ex.call("pair", [x, y], grad=True, grad_outputs=gos)
        xs, ys = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        want = torch.autograd.grad(list(ex.namespace["pair"](xs, ys)), [xs, ys], gos)
        assert torch.equal(res["grads"]["0"], want[0]) and torch.equal(res["grads"]["1"], want[1])


def test_integer_arguments_get_no_gradient_and_unused_ones_get_none(ex):
    x = torch.randn(4, dtype=torch.float64)
    idx = torch.tensor([0, 2])
    res = ex.call("with_ints", [x, idx], grad=True, grad_outputs=[torch.ones(2, dtype=torch.float64)])
    assert set(res["grads"]) == {"0"}
    assert res["grads"]["0"].tolist() == [2.0, 0.0, 2.0, 0.0]
    res = ex.call("ignores_y", [x, x.clone()], grad=True, grad_outputs=[torch.ones(4, dtype=torch.float64)])
    assert res["grads"]["1"] is None and res["grads"]["0"].tolist() == [2.0] * 4


def test_wrong_number_of_outputs_or_shape_is_a_student_error(ex):
    x = torch.ones(3)
    with pytest.raises(StudentError, match=r"returned a float; expected 1 tensor\(s\)"):
        ex.call("as_float", [x], grad=True, grad_outputs=[torch.ones(())])
    with pytest.raises(StudentError, match=r"an output has shape \(3,\), expected \(2,\)"):
        ex.call("ignores_y", [x, x], grad=True, grad_outputs=[torch.ones(2)])


def modified(ex, args, kwargs=None, **options):
    """What the grader concludes from the executor's echo of the arguments (api._result decides, not the executor)."""
    from attnlab.grading.worker.api import _result

    name = options.pop("name")
    sent_args = [a.clone() for a in args]
    sent_kwargs = {k: v.clone() for k, v in (kwargs or {}).items()}
    return _result(ex.call(name, args, kwargs, **options), sent_args, sent_kwargs).modified


def test_in_place_modification_is_detected(ex):
    assert modified(ex, [torch.zeros(3)], name="bump") == [0]
    assert modified(ex, [torch.ones(2)], {"mask": torch.ones(2, dtype=torch.bool)}, name="bump_kw") == ["mask"]
    # with grad=True the integer/bool argument is still watched
    assert modified(ex, [torch.ones(2)], {"mask": torch.ones(2, dtype=torch.bool)}, name="bump_kw", grad=True,
                    grad_outputs=[torch.ones(2)]) == ["mask"]


def test_in_place_on_a_differentiated_input_is_a_student_error(ex):
    with pytest.raises(StudentError, match="`bump` raised RuntimeError"):
        ex.call("bump", [torch.zeros(3)], grad=True, grad_outputs=[torch.ones(3)])


def test_an_untouched_input_with_nan_is_not_reported_modified(ex):
    assert modified(ex, [torch.tensor([float("nan"), 1.0]), torch.ones(2)], name="ignores_y") == []


def test_missing_name_and_non_callable(ex):
    with pytest.raises(StudentError, match=r"`scaled_dot_product_attention` is not defined in your notebook"):
        ex.call("scaled_dot_product_attention", [])
    with pytest.raises(StudentError, match=r"`Missing` is not defined"):
        ex.create("Missing", [])
    with pytest.raises(StudentError, match=r"`NOT_A_FUNCTION` is a int, not a function"):
        ex.call("NOT_A_FUNCTION", [])
    assert ex.has("affine") and not ex.has("Missing")


def test_exception_in_student_code_names_type_message_and_cell_line(ex):
    with pytest.raises(StudentError) as info:
        ex.call("boom", [])
    msg = str(info.value)
    assert msg.startswith("`boom` raised ValueError: shapes do not match: (2, 3) vs (3, 2)")
    line = STUDENT.splitlines().index('    raise ValueError("shapes do not match: (2, 3) vs (3, 2)")') + 1
    assert f"(in cell 3, line {line}: raise ValueError(" in msg
    with pytest.raises(StudentError, match=r"`divide` raised ZeroDivisionError: division by zero \(in cell 3"):
        ex.call("divide", [torch.ones(2)])


def test_module_life_cycle(ex):
    h = ex.create("Scale", [3], {"start": 2.0})
    assert isinstance(h, ObjectHandle)
    assert ex.create("Scale", [3]) != h  # each create is a new object
    assert ex.param_shapes(h) == {"weight": (3,), "inner.weight": (2, 3), "inner.bias": (2,)}
    sd = ex.state_dict(h)
    assert set(sd) == {"weight", "calls", "inner.weight", "inner.bias"}
    assert torch.equal(sd["weight"], torch.full((3,), 2.0))
    sd["weight"].fill_(-1.0)  # a copy: the module does not change
    assert torch.equal(ex.state_dict(h)["weight"], torch.full((3,), 2.0))

    new = {"weight": torch.tensor([1.0, 2.0, 3.0]), "extra.thing": torch.ones(1)}
    missing, unexpected = ex.load_state_dict(h, new)
    assert missing == ["calls", "inner.bias", "inner.weight"] and unexpected == ["extra.thing"]
    assert torch.equal(ex.state_dict(h)["weight"], torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(StudentError, match="(?s)load_state_dict raised RuntimeError.*size mismatch for weight"):
        ex.load_state_dict(h, {"weight": torch.ones(5)})

    ex.to(h, torch.float64)
    assert ex.state_dict(h)["weight"].dtype == torch.float64
    assert ex.state_dict(h)["calls"].dtype == torch.int64


def test_module_call_with_param_grads_matches_autograd(ex):
    h = ex.create("Scale", [3])
    ex.to(h, torch.float64)
    module = ex.objects[h.id]
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, dtype=torch.float64, generator=g)
    go = torch.randn(4, 2, dtype=torch.float64, generator=g)
    res = ex.module_call(h, args=[x], grad=True, grad_outputs=[go])
    xr = x.clone().requires_grad_(True)
    params = dict(module.named_parameters())
    grads = torch.autograd.grad((module(xr) * go).sum(), [xr, *params.values()])
    torch.testing.assert_close(res["grads"]["0"], grads[0])
    assert set(res["param_grads"]) == {"weight", "inner.weight", "inner.bias"}
    for name, expected in zip(params, grads[1:]):
        torch.testing.assert_close(res["param_grads"][name], expected)
    assert all(p.grad is None for p in module.parameters())  # autograd.grad, not backward(): nothing accumulates


def test_module_call_train_flag_and_methods(ex):
    h = ex.create("Scale", [2])
    assert ex.module_call(h, method="mode", args=[torch.ones(2)], train=True)["output"].item() == 1.0
    assert ex.module_call(h, method="mode", args=[torch.ones(2)], train=False)["output"].item() == 0.0
    with pytest.raises(StudentError, match="`Scale` has no method `backward_pass`"):
        ex.module_call(h, method="backward_pass", args=[])


def test_module_errors(ex):
    with pytest.raises(StudentError, match=r"`Broken\(\.\.\.\)` raised RuntimeError: cannot build with d=4"):
        ex.create("Broken", [4])
    h = ex.create("NotAModule", [])
    for op in (ex.state_dict, ex.param_shapes):
        with pytest.raises(StudentError, match="`NotAModule` is not an nn.Module"):
            op(h)
    with pytest.raises(StudentError, match="is not an nn.Module"):
        ex.module_call(h, args=[])
    with pytest.raises(StudentError, match="object #99 does not exist"):
        ex.state_dict(ObjectHandle(99))


def test_dispatch_only_known_operations(ex):
    assert ex.dispatch("has", {"name": "affine"}) is True
    out = ex.dispatch("call", {"name": "affine", "args": [torch.zeros(1, 2), torch.zeros(2, 2)], "kwargs": {}})
    assert torch.equal(out["output"], torch.zeros(1, 2))
    for op in ("__init__", "_invoke", "namespace", "objects", "dispatch"):
        with pytest.raises(StudentError, match="unknown operation"):
            ex.dispatch(op, {})


def test_objects_built_by_create_can_be_passed_to_functions(ex):
    h = ex.create("Scale", [3], {"start": 2.0})
    module = ex.objects[h.id]
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    out = ex.call("apply_module", [h, x])["output"]
    torch.testing.assert_close(out, module(x).detach())
    out = ex.call("apply_module", [h, x], {"twice": True})["output"]
    assert out.shape == (4, 2)
    kw = ex.call("apply_module", [], {"model": h, "x": x})["output"]  # as a keyword argument too
    torch.testing.assert_close(kw, module(x).detach())
    with pytest.raises(StudentError, match="object #99 does not exist"):
        ex.call("apply_module", [ObjectHandle(99), x])


def test_public_methods_of_plain_objects(ex):
    h = ex.create("Tokenizer", ["hello"])
    assert ex.module_call(h, method="encode", args=["hole"])["output"] == [1, 3, 2, 0]
    for method in ("forward", "_secret", "__init__"):
        with pytest.raises(StudentError, match="`Tokenizer` is not an nn.Module"):
            ex.module_call(h, method=method, args=[])
    with pytest.raises(StudentError, match="`Tokenizer` is not an nn.Module"):
        ex.module_call(h, method="encode", args=["h"], grad=True, grad_outputs=[])
    with pytest.raises(StudentError, match="`Tokenizer` has no method `decode`"):
        ex.module_call(h, method="decode", args=[[0]])


def test_dicts_with_tuple_keys_come_back(ex):
    from attnlab.grading.worker.wire import roundtrip

    out = roundtrip(ex.call("pair_counts", [[97, 97, 97, 98]])["output"])
    assert out == {(97, 97): 2, (97, 98): 1}


def test_public_attributes_of_objects(ex):
    h = ex.create("Tokenizer", ["hello"])
    assert ex.get_attr(h, "vocab_size") == 4
    assert ex.get_attr(h, "chars") == ["e", "h", "l", "o"]
    for name in ("_hidden", "__class__", "__dict__", "a.b", 3):
        with pytest.raises(StudentError, match="only public attributes"):
            ex.get_attr(h, name)
    with pytest.raises(StudentError, match="`Tokenizer` has no attribute `size`"):
        ex.get_attr(h, "size")
    with pytest.raises(StudentError, match="`Tokenizer.broken` raised ZeroDivisionError"):
        ex.get_attr(h, "broken")
    m = ex.create("Scale", [2])
    assert torch.equal(ex.get_attr(m, "weight"), torch.ones(2))  # a parameter comes back detached
    assert not ex.get_attr(m, "weight").requires_grad


def test_forward_calls_are_recorded_while_a_function_uses_the_module(ex):
    h = ex.create("Scale", [3])
    module = ex.objects[h.id]
    x = torch.ones(4, 3)
    ex.call("apply_module", [h, x])  # before the record: not recorded
    assert ex.dispatch("record_forward", {"handle": h}) is None
    ex.call("apply_module", [h, x])
    module.forward(x[:2])  # a direct call of forward is recorded too
    calls = ex.dispatch("forward_calls", {"handle": h})
    assert calls == [{"args": [{"tensor": [4, 3]}], "kwargs": {}}, {"args": [{"tensor": [2, 3]}], "kwargs": {}}]
    assert "forward" not in module.__dict__  # the record stopped: the class's forward again
    ex.call("apply_module", [h, x])
    assert ex.forward_calls(h) == []  # nothing recorded once stopped
    torch.testing.assert_close(ex.call("apply_module", [h, x])["output"], module.inner(x * module.weight).detach())


def test_recorded_arguments_are_described_not_sent(ex):
    ns_code = '''
import torch
class Echo(torch.nn.Module):
    def forward(self, idx, targets=None, use_cache=False):
        return idx
'''
    exec(ns_code, ex.namespace)
    h = ex.create("Echo")
    ex.record_forward(h)
    ex.module_call(h, args=[torch.zeros(2, 5)], kwargs={"use_cache": True, "targets": None})
    ex.module_call(h, args=[torch.zeros(1, 1), None, False])
    ex.module_call(h, args=[torch.zeros(1, 1)], kwargs={"targets": object.__new__(Executor)})
    calls = ex.forward_calls(h)
    assert calls[0] == {"args": [{"tensor": [2, 5]}], "kwargs": {"use_cache": True, "targets": None}}
    assert calls[1] == {"args": [{"tensor": [1, 1]}, None, False], "kwargs": {}}
    assert calls[2]["kwargs"] == {"targets": {"type": "Executor"}}
    plain = ex.create("Tokenizer", ["ab"])
    with pytest.raises(StudentError, match="not an nn.Module"):
        ex.record_forward(plain)
