"""Each question graded on its own, for a graded *class* (issue 30, part 3): lab09's GPTBlock runs with the reference
CausalSelfAttention and MiniGPT with the reference GPTBlock, built and run by the grader (``module_calls.py``) behind
a module proxy in the worker (``module_proxy.py``); the reference's code never goes to the worker."""

from pathlib import Path

import pytest
import torch

from attnlab.grading.core import checks
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.core.mutants import student_with
from attnlab.grading.worker import module_calls
from attnlab.grading.worker.api import LocalStudent
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.reference_calls import ReferenceCalls

from .test_api import recording_student
from .test_graded_on_reference import _mutated_solution

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab09_mini_gpt"
F64 = torch.float64
MARKER = "reference_only_5e2a"  # a string of the reference's code that must never reach the worker


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(ROOT / "autograder" / LAB)


def _mutant(bundle, name: str):
    (entry,) = [m for m in bundle.catalogue().mutants if m.name == name]
    return entry


SEEDED = """
def seeded_train_forward(block, x, seed):  # dropout's masks drawn from the seed, in training
    block.train()
    torch.manual_seed(seed)
    return block(x)
"""


@pytest.fixture(scope="module")
def remote(bundle):
    """The lab09 reference with a wrong mask (tril(1): each position sees the next one) in CausalSelfAttention."""
    catalogue = bundle.catalogue()
    entry = _mutant(bundle, "csa_mask_off_by_one")
    cells = [{"index": 0, "source": catalogue.reference_code}, {"index": 1, "source": entry.source},
             {"index": 2, "source": SEEDED}]
    yield from recording_student(cells, cell_timeout=60, load_timeout=120, call_timeout=120)


def test_a_block_on_the_reference_attention_matches_the_reference_with_parameter_gradients(remote, bundle):
    ref, rng = bundle.reference, torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 16, dtype=F64, generator=rng)
    own, r_own = checks.build_pair(remote, ref, "GPTBlock", 16, 4, 8, rng=rng, dtype=F64)
    assert not torch.allclose(own.call(x).output, r_own.call(x).output)  # the student's own attention is wrong
    with remote.graded_on_reference(["CausalSelfAttention"], ref) as used:
        s_mod, r_mod = checks.build_pair(remote, ref, "GPTBlock", 16, 4, 8, rng=rng, dtype=F64)
        assert used == {"CausalSelfAttention"}
        assert s_mod.param_shapes() == r_mod.param_shapes()  # attn.qkv.weight ... as on the reference
        s, r = checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng, name="GPTBlock")
    assert {"attn.qkv.weight", "attn.proj.bias", "ln1.weight", "mlp.0.weight"} <= set(s.param_grads)
    for name, want in r.param_grads.items():  # the VJP callback: the reference's own gradients, parameters included
        torch.testing.assert_close(s.param_grads[name], want, msg=name)
    torch.testing.assert_close(s.grads[0], r.grads[0])
    assert s.param_grads["attn.qkv.weight"].abs().sum() > 0


def test_the_cache_round_trip_of_minigpt_on_the_reference_block(remote, bundle):
    ref, rng = bundle.reference, torch.Generator().manual_seed(1)
    idx = torch.randint(13, (2, 8), generator=rng)
    with remote.graded_on_reference(["GPTBlock"], ref) as used:
        s_mod, r_mod = (api.create("MiniGPT", 13, 8, 16, 4, 2).to(F64) for api in (remote, ref))
        state = checks.randomize_state(r_mod.state_dict(), rng)
        state["lm_head.weight"] = state["tok_emb.weight"]  # tied
        for mod in (s_mod, r_mod):
            mod.load_state_dict(state)
        full = r_mod.call(idx).output[0]
        for chunks in ((3, 1, 1, 1, 2), (1, 2, 5)):
            start = 0
            for n in chunks:
                got = s_mod.call(idx[:, start:start + n], use_cache=True).output[0]
                torch.testing.assert_close(got, full[:, start:start + n])
                start += n
                assert s_mod.call(method="cache_length").output == start  # blocks[0].attn.cache, set by the proxy
            s_mod.call(method="reset_cache")  # attn.cache = None on every block, sent back at the next call
            assert s_mod.call(method="cache_length").output == 0
        torch.testing.assert_close(s_mod.call(idx).output[0], full)  # use_cache=False leaves the cache alone
    assert used == {"GPTBlock"}


def test_dropout_in_training_sees_the_same_masks_in_the_forward_and_the_backward(remote, bundle):
    """Through the pipes: the input gradient of a block in training (dropout 0.5 on the reference attention) is the
    derivative of the forward with the same masks (central differences, the worker's generator seeded alike)."""
    rng = torch.Generator().manual_seed(2)
    x, d, go = (torch.randn(2, 5, 8, dtype=F64, generator=rng) for _ in range(3))
    with remote.graded_on_reference(["CausalSelfAttention"], bundle.reference):
        block = remote.create("GPTBlock", 8, 2, 5, 0.5).to(F64)
        res = remote.call("seeded_train_forward", block, x, 7, grad=True, grad_outputs=[go])
        again = remote.call("seeded_train_forward", block, x, 7).output
        other = remote.call("seeded_train_forward", block, x, 8).output
        eps = 1e-6
        ahead, behind = (remote.call("seeded_train_forward", block, x + s * eps * d, 7).output for s in (1, -1))
    torch.testing.assert_close(again, res.output)  # the masks follow the worker's generator
    assert not torch.allclose(other, res.output)  # and differ for another seed: dropout is on
    slope = ((ahead - behind) / (2 * eps) * go).sum()
    torch.testing.assert_close((res.grads[1] * d).sum(), slope, rtol=1e-5, atol=1e-6)


def test_the_reference_source_never_reaches_the_worker(remote, bundle):
    remote.sent.clear()
    ref = LocalStudent.from_code(bundle.catalogue().reference_code.replace(
        "super().__init__()", f"super().__init__()\n        tag = '{MARKER}'"))
    with remote.graded_on_reference(["CausalSelfAttention"], ref):
        block = remote.create("GPTBlock", 8, 2, 4)
        block.call(torch.randn(1, 4, 8), grad=True, grad_outputs=[torch.ones(1, 4, 8)])
    sent = b"".join(remote.sent)
    assert sent and MARKER.encode() not in sent and b"scaled_dot_product" not in sent and b"def " not in sent


def test_a_proxy_kept_from_another_test_is_refused_and_the_worker_goes_on(remote, bundle):
    with remote.graded_on_reference(["CausalSelfAttention"], bundle.reference):
        block = remote.create("GPTBlock", 8, 2, 4)
    with remote.graded_on_reference(["CausalSelfAttention"], bundle.reference):
        with pytest.raises(StudentError, match="did not build with the reference"):
            block.call(torch.randn(1, 4, 8))
    with pytest.raises(StudentError, match="refused"):  # no binding at all: refused too
        block.call(torch.randn(1, 4, 8))
    assert remote.create("GPTBlock", 8, 2, 4).call(torch.randn(1, 4, 8)).output.shape == (1, 4, 8)


@pytest.mark.parametrize("lab, mutant, dependents", [
    (LAB, "csa_mask_off_by_one", {"GPTBlock": "CausalSelfAttention", "MiniGPT": "GPTBlock"}),
    ("lab05_self_attention", "selfattention_k_proj_for_values", {"AttentionClassifier": "SelfAttention"}),
    ("lab11_vision_transformer", "embed_pos_not_on_cls", {"ViT": "PatchEmbedding"}),
])
def test_without_the_module_proxy_the_questions_built_on_a_class_would_lose(lab, mutant, dependents, monkeypatch):
    """In process (as the catalogue grades): a wrong class costs the questions built on it only without the map."""
    bundle = load_bundle(ROOT / "autograder" / lab)
    (entry,) = [m for m in bundle.catalogue().mutants if m.name == mutant]
    questions = (entry.question, *dependents)
    student = student_with(bundle.catalogue().reference_code, entry)
    isolated = run_suite(bundle.suite, student, bundle.reference, seed=0, questions=questions)
    monkeypatch.setattr(bundle.suite, "graded_on_reference", {})
    together = run_suite(bundle.suite, student, bundle.reference, seed=0, questions=questions)
    for q, on in dependents.items():
        assert isolated[q]["score"] == isolated[q]["max_score"], isolated[q]["messages"]
        assert isolated[q]["graded_on_reference"] == [on]
        assert isolated[q]["messages"][0].startswith(f"note: graded with the reference `{on}`")
        assert together[q]["score"] < together[q]["max_score"]
    assert isolated[entry.question]["score"] == together[entry.question]["score"] < isolated[entry.question]["max_score"]


def test_a_wrong_mask_costs_only_causal_self_attention_through_grade_submission(tmp_path):
    from attnlab.grading.runner import grade_submission

    res = grade_submission(ROOT / "autograder" / LAB, _mutated_solution(
        tmp_path, LAB, "is_causal=mask is None", "is_causal=False"))  # no causal mask without the cache
    assert res["isolation"]
    questions = res["questions"]
    assert questions["CausalSelfAttention"]["score"] < questions["CausalSelfAttention"]["max_score"] / 2
    for q, result in questions.items():
        if q != "CausalSelfAttention" and result.get("kind") != "written":
            assert result["score"] == result["max_score"], (q, result["messages"])
    for q, helper in (("GPTBlock", "CausalSelfAttention"), ("MiniGPT", "GPTBlock")):
        assert questions[q]["messages"][0].startswith(f"note: graded with the reference `{helper}`"), questions[q]
        assert questions[q]["graded_on_reference"] == [helper]


# -- the grader's checks of what the worker sends (module_calls.ModuleCalls through ReferenceCalls.answer) -------------
class Inner(torch.nn.Module):
    def __init__(self, d, p=0.0):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.drop = torch.nn.Dropout(p)
        self.register_buffer("scale", torch.full((d,), 2.0))
        self.cache = None

    def forward(self, x, use_cache=False):
        out = self.drop(self.lin(x)) * self.scale
        if use_cache:
            self.cache = out if self.cache is None else torch.cat([self.cache, out], dim=1)
        return out


def _construct(calls: ReferenceCalls, *args) -> dict:
    reply = calls.answer({"name": "Inner", "kind": "construct", "args": list(args), "kwargs": {}})
    assert reply["ok"], reply
    return reply["value"]


def _forward(built: dict, x, **changes) -> dict:
    message = {"name": "Inner", "kind": "module_forward", "id": built["id"], "args": [x], "kwargs": {},
               "params": dict(built["parameters"]), "buffers": dict(built["buffers"]), "state": dict(built["state"]),
               "training": False, "seed": None}
    return {**message, **changes}


def test_construct_answers_the_reference_names_and_a_forward_keeps_the_cache():
    calls = ReferenceCalls({"Inner": Inner})
    built = _construct(calls, 3)
    assert set(built["parameters"]) == {"lin.weight", "lin.bias"} and built["persistent"] == ["scale"]
    assert built["state"] == {"cache": None} and calls.used == {"Inner"}
    x = torch.randn(1, 2, 3)
    reply = calls.answer(_forward(built, x, kwargs={"use_cache": True}))
    want = (x @ built["parameters"]["lin.weight"].T + built["parameters"]["lin.bias"]) * 2
    torch.testing.assert_close(reply["value"]["output"], want)
    torch.testing.assert_close(reply["value"]["state"]["cache"], want)


@pytest.mark.parametrize("change, refused", [
    ({"id": 99}, "did not build with the reference"),
    ({"params": {"lin.weight": torch.zeros(3, 3)}}, "other names than the reference's"),
    ({"params": {"lin.weight": torch.zeros(4, 3), "lin.bias": torch.zeros(3)}}, "weight should be a tensor of shape (3, 3)"),
    ({"buffers": {}}, "other names than the reference's"),
    ({"state": {"cache": None, "memory": None}}, "state under other names"),
    ({"training": "yes"}, "malformed call"),
    ({"args": [torch.zeros(1, 8000, 3)]}, "too large to be run with the reference"),
    ({"args": [torch.Generator()]}, "only tensors and plain values"),
    ({"kind": "forward"}, "malformed callback"),
])
def test_a_forged_module_callback_is_refused_with_a_message(change, refused):
    calls = ReferenceCalls({"Inner": Inner})
    built = _construct(calls, 3)
    reply = calls.answer(_forward(built, torch.randn(1, 2, 3), **change))
    assert reply["ok"] is False and refused in reply["error"], reply
    assert calls.refused and refused in calls.refused[-1]


def test_construction_is_bounded(monkeypatch):
    calls = ReferenceCalls({"Inner": Inner})
    reply = calls.answer({"name": "Inner", "kind": "construct", "args": [10_000], "kwargs": {}})  # 10^8 numbers
    assert not reply["ok"] and "100,020,000 numbers, over the limit" in reply["error"]
    reply = calls.answer({"name": "Inner", "kind": "construct", "args": [torch.zeros(2)], "kwargs": {}})
    assert not reply["ok"] and "only numbers, strings and None" in reply["error"]
    reply = calls.answer({"name": "Inner", "kind": "construct", "args": [4, 0.0, 1], "kwargs": {}})
    assert not reply["ok"] and "raised TypeError" in reply["error"] and reply["type"] == "TypeError"
    monkeypatch.setattr(module_calls, "MAX_MODULES", 2)
    _construct(calls, 2), _construct(calls, 2)
    reply = calls.answer({"name": "Inner", "kind": "construct", "args": [2], "kwargs": {}})
    assert not reply["ok"] and "more than 2 `Inner` modules" in reply["error"]


def test_dropout_in_training_uses_the_same_masks_forward_and_backward():
    """In training the worker sends a seed; the grader seeds dropout with it for the forward and for the VJP."""
    calls = ReferenceCalls({"Inner": Inner})
    built = _construct(calls, 64, 0.5)
    x = torch.randn(1, 4, 64, dtype=F64)
    params = {k: v.to(F64) for k, v in built["parameters"].items()}
    buffers = {k: v.to(F64) for k, v in built["buffers"].items()}
    message = _forward(built, x, params=params, buffers=buffers, training=True, seed=1234)
    out = calls.answer(message)["value"]["output"]
    assert out.eq(0).any() and calls.answer(message)["value"]["output"].equal(out)  # masks drawn from the seed
    assert not calls.answer({**message, "seed": 99})["value"]["output"].equal(out)
    go = torch.randn_like(out)
    grads = calls.answer({**message, "kind": "module_vjp", "grad_outputs": [go]})["value"]
    kept = (out != 0).to(F64) / (1 - 0.5) * 2  # dropout's mask and rescaling, times the buffer's 2
    torch.testing.assert_close(grads["args"][0], (go * kept) @ params["lin.weight"])
    torch.testing.assert_close(grads["params"]["lin.bias"], (go * kept).sum(dim=(0, 1)))


# the classes other questions are built on, per lab: a mistake in one costs those questions nothing
BUILT_ON = {LAB: {"CausalSelfAttention": ("GPTBlock", "MiniGPT"), "GPTBlock": ("MiniGPT",)},
            "lab05_self_attention": {"SelfAttention": ("AttentionClassifier",)},
            "lab11_vision_transformer": {"PatchEmbedding": ("ViT",)},
            "lab12_modern_decoder": {"GroupedQueryAttention": ("ModernDecoder",), "RMSNorm": ("ModernDecoder",),
                                     "SwiGLU": ("MoEFeedForward", "ModernDecoder"),
                                     "MoEFeedForward": ("ModernDecoder",)}}


@pytest.mark.parametrize("lab", sorted(BUILT_ON))
def test_no_catalogued_mistake_in_a_class_costs_the_questions_built_on_it(lab):
    bundle = load_bundle(ROOT / "autograder" / lab)
    catalogue = bundle.catalogue()
    entries = [m for m in catalogue.mutants if m.question in BUILT_ON[lab]]
    assert len(entries) >= 3
    for entry in entries:
        dependents = BUILT_ON[lab][entry.question]
        results = run_suite(bundle.suite, student_with(catalogue.reference_code, entry), bundle.reference, seed=0,
                            questions=dependents)
        for q in dependents:
            assert results[q]["score"] == results[q]["max_score"], (entry.name, q, results[q]["messages"])
