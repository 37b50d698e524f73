"""checks: the comparison helpers hidden tests use; they must catch mistakes and say what differs."""

import pytest
import torch

from attnlab.grading.core import checks
from attnlab.grading.worker.api import LocalStudent

REF = '''
import torch

def f(x, y=None):
    return torch.tanh(x) * 2

def pair(x):
    return x * 2, x.sum(-1)

def with_index(x, idx):
    return x[idx] * 3, idx + 1

def loss(x):
    return (x ** 2).mean()

class Lin(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(self.proj(x))
'''


def student(code=""):
    return LocalStudent.from_code(REF + "\n" + code, "<cell 1>")


@pytest.fixture(scope="module")
def ref():
    return student()


@pytest.fixture
def rng():
    return torch.Generator().manual_seed(123)


def x64(*shape, rng):
    return torch.randn(*shape, dtype=torch.float64, generator=rng)


# ---------------------------------------------------------------- tensors


def test_tolerances_by_dtype():
    assert checks.tolerance(torch.float64) == (1e-6, 1e-8)
    assert checks.tolerance(torch.float32) == (1e-4, 1e-5)
    assert checks.tolerance(torch.int64) == (0.0, 0.0)


@pytest.mark.parametrize("value, kw, message", [
    ([1.0], {}, "out should be a torch.Tensor, got list"),
    (torch.ones(2, 3), {"shape": (3, 2)}, "out has shape (2, 3), expected (3, 2)"),
    (torch.ones(2), {"dtype": torch.float64}, "out has dtype torch.float32, expected torch.float64 (keep the input dtype)"),
    (torch.tensor([1.0, float("nan"), float("inf")]), {}, "out has 2 non-finite values (nan or inf)"),
])
def test_expect_tensor_messages(value, kw, message):
    with pytest.raises(AssertionError) as info:
        checks.expect_tensor(value, name="out", **kw)
    assert str(info.value) == message


def test_tolerance_grows_with_the_size_of_the_values_and_the_depth_in_float32_only():
    eps32 = torch.finfo(torch.float32).eps
    assert checks.tolerance(torch.float32, scale=1.0) == (1e-4, 1e-5)  # small values: the table's atol
    rtol, atol = checks.tolerance(torch.float32, scale=50.0, depth=8)
    assert rtol == 1e-4 and atol == pytest.approx(checks.ROUNDING_SLACK * 8 * eps32 * 50.0)  # 3.1e-3
    assert checks.tolerance(torch.float64, scale=50.0, depth=8) == (1e-6, 1e-8)  # float64 keeps its power
    assert checks.tolerance(torch.int64, scale=50.0) == (0.0, 0.0)


def test_assert_close_float32_error_of_a_deep_computation_on_large_values():
    # a float32 gradient of size ~50 off by 4e-4 (a correct block against a fused kernel): within the depth-8 bound
    # (3.1e-3), outside the table's (1e-5 + 1e-4 * 3 for a value of 3)
    e = torch.tensor([50.0, -20.0, 3.0])
    got = e + torch.tensor([0.0, 0.0, 4e-4])
    checks.assert_close(got, e, name="g", depth=8)
    with pytest.raises(AssertionError, match="1 of 3 values off"):
        checks.assert_close(got, e, name="g", rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match="1 of 3 values off"):  # a real mistake stays caught
        checks.assert_close(e + torch.tensor([0.0, 0.0, 0.1]), e, name="g", depth=8)


def test_compare_module_call_compares_gradients_at_twice_the_depth():
    ref = LocalStudent.from_code("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                                 "        return 50 * x * x\n")
    off = LocalStudent.from_code("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                                 "        return 50 * x * x + (x - x.detach()) * 5e-4\n")
    x = torch.tensor([1.0, 0.0])
    r_mod, s_mod = ref.create("M"), off.create("M")  # equal outputs; input gradients 100 x g, off by 5e-4 g
    rng = torch.Generator().manual_seed(0)  # output gradients g = (1.54, -0.29): expected (154, 0), off by 1.5e-4
    # depth 1: the gradient's bound is 2 * 64 * eps32 * 154 = 4.7e-3, so it passes; the table's atol 1e-5 fails it
    checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng, depth=1)
    with pytest.raises(AssertionError, match="gradient"):
        checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng, rtol=1e-4, atol=1e-5)


def test_expect_tensor_accepts_and_returns():
    t = torch.tensor([1.0, float("inf")])
    assert checks.expect_tensor(t, name="out", shape=(2,), dtype=torch.float32, finite=False) is t
    checks.expect_tensor(torch.tensor([1, 2]), name="ints", finite=True)  # integers are always finite


def test_assert_close_within_and_beyond_tolerance():
    e = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    checks.assert_close(e + 1e-9, e, name="w")
    with pytest.raises(AssertionError) as info:
        checks.assert_close(e + torch.tensor([[0, 0], [0, 0.5]], dtype=torch.float64), e, name="the weights")
    assert str(info.value) == ("the weights differs from the reference: 1 of 4 values off, the largest error 0.5 at "
                               "index (1, 1) (yours 4.5, expected 4; rtol=1e-06, atol=1e-08)")
    checks.assert_close(e + 0.4, e, name="w", atol=0.5)  # explicit tolerances win


def test_assert_close_checks_dtype_shape_and_type_first():
    e = torch.ones(2, 3)
    with pytest.raises(AssertionError, match=r"w has shape \(3, 2\), expected \(2, 3\)"):
        checks.assert_close(torch.ones(3, 2), e, name="w")
    with pytest.raises(AssertionError, match="w has dtype torch.float64, expected torch.float32"):
        checks.assert_close(torch.ones(2, 3, dtype=torch.float64), e, name="w")
    with pytest.raises(AssertionError, match="w should be a torch.Tensor, got tuple"):
        checks.assert_close((e,), e, name="w")
    with pytest.raises(AssertionError, match="w has 1 non-finite values"):
        checks.assert_close(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), name="w")


def test_assert_close_integers_exact_with_position():
    e = torch.tensor([[1, 2, 3], [4, 5, 6]])
    checks.assert_close(e.clone(), e, name="ids")
    with pytest.raises(AssertionError) as info:
        checks.assert_close(torch.tensor([[1, 2, 3], [4, 0, 0]]), e, name="ids")
    assert str(info.value) == "ids differs from the expected values at 2 positions, e.g. index (1, 1): yours 0, expected 5"
    with pytest.raises(AssertionError, match="differs from the expected values"):
        checks.assert_close(torch.tensor([True, True]), torch.tensor([True, False]), name="mask")


def test_assert_close_non_finite_expected_values_must_match_exactly():
    e = torch.tensor([float("-inf"), 1.0, float("inf")])
    checks.assert_close(e.clone(), e, name="scores")
    with pytest.raises(AssertionError, match="1 of 3 values off"):
        checks.assert_close(torch.tensor([-1e9, 1.0, float("inf")]), e, name="scores")
    with pytest.raises(AssertionError, match="values off"):
        checks.assert_close(torch.tensor([float("inf"), 1.0, float("inf")]), e, name="scores")
    with pytest.raises(AssertionError, match="values off"):
        checks.assert_close(torch.tensor([float("nan"), 1.0, float("inf")]), e, name="scores")
    # nan where the reference has nan is accepted
    n = torch.tensor([float("nan"), 1.0])
    checks.assert_close(n.clone(), n, name="w")


def test_assert_close_a_finite_value_where_the_reference_has_nan_fails():
    with pytest.raises(AssertionError, match="values off"):
        checks.assert_close(torch.tensor([0.5, 1.0]), torch.tensor([float("nan"), 1.0]), name="w")


def test_compare_values_structure():
    checks.compare_values((torch.ones(2), [1, "a", 2.0], {"k": torch.zeros(1)}),
                          (torch.ones(2), [1, "a", 2.0 + 1e-12], {"k": torch.zeros(1)}), name="out")
    cases = [
        (torch.ones(2), (torch.ones(2), torch.ones(1)), "out should be a tuple of 2 values, got Tensor"),
        ((torch.ones(2),), (torch.ones(2), torch.ones(1)), "out should have 2 elements, got 1"),
        ((torch.ones(2), torch.ones(2)), (torch.ones(2), torch.ones(1)), r"out\[1\] has shape \(2,\), expected \(1,\)"),
        ({"a": 1}, {"b": 1}, r"out has keys \['a'\], expected \['b'\]"),
        ([1], {"b": 1}, "out should be a dict, got list"),
        (True, 1.0, "out should be a number, got bool"),
        (1.5, 1.0, "out is 1.5, expected 1.0"),
        (1.0, 1, "out is 1.0, expected 1"),
        ("a", "b", "out is 'a', expected 'b'"),
    ]
    for actual, expected, message in cases:
        with pytest.raises(AssertionError, match=message):
            checks.compare_values(actual, expected, name="out")


# ---------------------------------------------------------------- calls


def test_compare_call_passes_for_the_same_and_an_equivalent_function(ref, rng):
    x = x64(3, 4, rng=rng)
    s, r = checks.compare_call(student(), ref, "f", x, grad=True, rng=rng)
    assert torch.equal(s.output, r.output)
    other = student("def f(x, y=None):\n    e = torch.exp(2 * x)\n    return 2 * (e - 1) / (e + 1)")
    checks.compare_call(other, ref, "f", x, grad=True, rng=rng)


def test_compare_call_wrong_output(ref, rng):
    wrong = student("def f(x, y=None):\n    return torch.tanh(x)")
    with pytest.raises(AssertionError, match=r"the output of f differs from the reference: 12 of 12 values off"):
        checks.compare_call(wrong, ref, "f", x64(3, 4, rng=rng))


def test_compare_call_wrong_gradient_with_a_right_forward(ref, rng):
    # same values, but the gradient flows through only half of the expression
    sneaky = student("def f(x, y=None):\n    t = torch.tanh(x)\n    return t + t.detach()")
    checks.compare_call(sneaky, ref, "f", x64(3, rng=rng))  # forward alone cannot tell
    with pytest.raises(AssertionError, match=r"the gradient of f with respect to argument 0 differs from the reference"):
        checks.compare_call(sneaky, ref, "f", x64(3, rng=rng), grad=True, rng=rng)


def test_compare_call_missing_gradient(ref, rng):
    detached = student("def f(x, y=None):\n    return torch.tanh(x.detach()) * 2")
    with pytest.raises(AssertionError, match=r"the gradient of f with respect to argument 0 is missing.*\.detach\(\)"):
        checks.compare_call(detached, ref, "f", x64(3, rng=rng), grad=True, rng=rng)


def test_compare_call_int_outputs_without_grad(ref, rng):
    x = x64(5, rng=rng)
    idx = torch.tensor([4, 0])
    checks.compare_call(student(), ref, "with_index", x, idx)
    bad = student("def with_index(x, idx):\n    return x[idx] * 3, idx")
    with pytest.raises(AssertionError, match=r"the output of with_index\[1\] differs from the expected values"):
        checks.compare_call(bad, ref, "with_index", x, idx)


def test_compare_call_with_grad_on_mixed_float_and_int_outputs(ref, rng):
    x = x64(5, rng=rng)
    s, r = checks.compare_call(student(), ref, "with_index", x, torch.tensor([4, 0]), grad=True, rng=rng)
    assert r.grads[0] is not None


def test_compare_call_in_place_modification(ref, rng):
    inplace = student("def f(x, y=None):\n    x.tanh_()\n    return x * 2")
    with pytest.raises(AssertionError, match=r"f modified its input argument\(s\) \[0\] in place"):
        checks.compare_call(inplace, ref, "f", x64(3, rng=rng))
    checks.compare_call(inplace, ref, "f", x64(3, rng=rng), check_unmodified=False)


def test_compare_call_grad_needs_rng(ref):
    with pytest.raises(ValueError, match="needs rng="):
        checks.compare_call(ref, ref, "f", torch.ones(2), grad=True)


def test_random_cotangents_are_random_typed_and_skip_integers():
    rng = torch.Generator().manual_seed(0)
    gos = checks.random_like_outputs((torch.ones(2, 3, dtype=torch.float16), torch.ones(2, dtype=torch.int64),
                                      [torch.ones(1, dtype=torch.float64)]), rng)
    assert gos[1] is None
    assert gos[0].shape == (2, 3) and gos[0].dtype == torch.float16
    assert gos[2].dtype == torch.float64
    assert not torch.equal(gos[0], torch.ones(2, 3, dtype=torch.float16))


def test_compare_call_with_grad_on_a_scalar_loss(ref, rng):
    checks.compare_call(student(), ref, "loss", x64(4, rng=rng), grad=True, rng=rng)


# ---------------------------------------------------------------- modules


def test_build_pair_gives_both_the_same_random_parameters(ref, rng):
    s_mod, r_mod = checks.build_pair(student(), ref, "Lin", 4, rng=rng, dtype=torch.float64)
    s_sd, r_sd = s_mod.state_dict(), r_mod.state_dict()
    assert set(s_sd) == {"proj.weight", "proj.bias", "norm.weight", "norm.bias"}
    for k in r_sd:
        assert r_sd[k].dtype == torch.float64 and torch.equal(s_sd[k], r_sd[k]), k
    assert not torch.equal(r_sd["norm.weight"], torch.ones(4, dtype=torch.float64))  # randomized
    checks.compare_module_call(s_mod, r_mod, x64(2, 4, rng=rng), rng=rng, grad=True)


def test_build_pair_parameter_name_mismatch_message(ref, rng):
    renamed = student('''
class Lin(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
    def forward(self, x):
        return self.norm(self.linear(x))
''')
    with pytest.raises(AssertionError) as info:
        checks.build_pair(renamed, ref, "Lin", 4, rng=rng)
    assert str(info.value) == (
        "Lin should have the parameters ['norm.bias', 'norm.weight', 'proj.bias', 'proj.weight']; missing "
        "['proj.bias', 'proj.weight'], unexpected ['linear.bias', 'linear.weight']. Name the sub-layers exactly "
        "as the lab says.")


def test_build_pair_parameter_shape_mismatch(ref, rng):
    wrong = student('''
class Lin(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, 2 * d)
        self.norm = torch.nn.LayerNorm(2 * d)
    def forward(self, x):
        return self.norm(self.proj(x))
''')
    with pytest.raises(AssertionError, match=r"Lin: parameter 'proj.weight' has shape \(8, 4\), expected \(4, 4\)"):
        checks.build_pair(wrong, ref, "Lin", 4, rng=rng)


def test_compare_module_call_catches_a_wrong_forward(ref, rng):
    no_norm = student('''
class Lin(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
    def forward(self, x):
        return self.proj(x)
''')
    s_mod, r_mod = checks.build_pair(no_norm, ref, "Lin", 4, rng=rng, dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"the output of Lin.forward differs from the reference"):
        checks.compare_module_call(s_mod, r_mod, x64(2, 4, rng=rng))


def test_randomize_state_only_touches_floats():
    rng = torch.Generator().manual_seed(5)
    state = {"w": torch.ones(3), "n": torch.tensor(7), "h": torch.zeros(2, dtype=torch.float16)}
    out = checks.randomize_state(state, rng, scale=0.5)
    assert out["n"] is state["n"]
    assert out["w"].dtype == torch.float32 and not torch.equal(out["w"], state["w"])
    assert out["h"].dtype == torch.float16 and out["h"].abs().max() < 5


def test_measured_atol_follows_the_library_own_float32_error_where_it_exceeds_the_size_rule():
    from attnlab.grading.core.checks import MEASURED_SLACK, measured_atol, tolerance

    exact = torch.tensor([1e-3, -2e-3], dtype=torch.float64)
    # the library's own float32 answer is off by 5e-6, more than the rule allows for values of size 2e-3
    library = (exact + torch.tensor([5e-6, 0.0], dtype=torch.float64)).to(torch.float32)
    own = float((library.double() - exact).abs().max())
    assert tolerance(torch.float32, scale=2e-3, depth=1)[1] < MEASURED_SLACK * own
    assert measured_atol(exact, library) == pytest.approx(MEASURED_SLACK * own)
    # where the library is exact to rounding, the rule decides
    rounded = exact.to(torch.float32)
    assert measured_atol(exact, rounded, depth=4) == tolerance(torch.float32, scale=2e-3, depth=4)[1]


def _param_result(**param_grads):
    from attnlab.grading.worker.api import Result
    return Result(output=torch.zeros(1), grads={}, param_grads=param_grads, modified=[])


def test_a_parameter_gradient_that_is_zero_exactly_allows_the_rounding_of_its_terms():
    """lab06 at seed 100006: a key bias's gradient is exactly zero (softmax ignores a constant added to a row), so
    in float32 both sides hold rounding alone (1.9e-6 against 1.7e-5). Its atol
    follows the largest gradient of the same backward pass; a real difference there still fails."""
    w = torch.full((4, 4), 2.0)  # the largest gradient of the pass: atol 64 * 2 * eps * 2 = 3e-5
    ref = _param_result(**{"k_proj.weight": w, "k_proj.bias": torch.tensor([1.7e-5, 0.0, 0.0, 0.0])})
    ok = _param_result(**{"k_proj.weight": w.clone(), "k_proj.bias": torch.tensor([1.9e-6, 0.0, 0.0, 0.0])})
    checks._compare_grads(ok, ref, name="m", rtol=None, atol=None, depth=2)  # before: atol 1e-5 failed it
    wrong = _param_result(**{"k_proj.weight": w.clone(), "k_proj.bias": torch.tensor([0.05, 0.0, 0.0, 0.0])})
    with pytest.raises(AssertionError, match="k_proj.bias"):
        checks._compare_grads(wrong, ref, name="m", rtol=None, atol=None, depth=2)
    inf = _param_result(**{"k_proj.weight": torch.full((4, 4), float("inf")), "k_proj.bias": torch.ones(4)})
    with pytest.raises(AssertionError):  # a non-finite gradient does not widen the others' tolerance
        checks._compare_grads(_param_result(**{"k_proj.weight": torch.full((4, 4), float("inf")),
                                               "k_proj.bias": torch.zeros(4)}), inf, name="m", rtol=None, atol=None,
                              depth=2)


def test_expect_student_error_wants_the_error_raised_in_student_code_naming_the_bad_value():
    student = LocalStudent.from_code('''
def strict(n):
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    return n

def vague(n):
    raise ValueError("bad input")

def wrong_kind(n):
    raise TypeError(f"n={n}")
''')
    checks.expect_student_error(lambda: student.call("strict", -3), "ValueError", what="strict(-3)", mentions=("-3",))
    with pytest.raises(AssertionError, match=r"vague\(-3\): the ValueError message should name -3; got 'bad input'"):
        checks.expect_student_error(lambda: student.call("vague", -3), "ValueError", what="vague(-3)",
                                    mentions=("-3",))
    with pytest.raises(AssertionError, match=r"wrong_kind\(-3\) should raise ValueError, but it .*TypeError"):
        checks.expect_student_error(lambda: student.call("wrong_kind", -3), "ValueError", what="wrong_kind(-3)")
    with pytest.raises(AssertionError, match=r"strict\(2\) should raise ValueError, but it returned normally"):
        checks.expect_student_error(lambda: student.call("strict", 2), "ValueError", what="strict(2)")
