"""Each question graded on its own (issue 30, part 3): a question that builds on another graded function runs with the
reference's version of it (HiddenSuite(graded_on_reference=...)), through a callback from the worker's proxy to the
grader; the reference's code never goes to the worker."""

import json
import math
from pathlib import Path

import pytest
import torch

from attnlab.grading.runner import grade_submission
from attnlab.grading.worker import reference_calls
from attnlab.grading.worker.api import LocalStudent
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.reference_calls import MAX_CALLBACKS, ReferenceCalls

from .test_api import recording_student

ROOT = Path(__file__).resolve().parents[2]
MARKER = "reference_only_7c1f"  # a string of the reference's code that must never reach the worker

REFERENCE = f'''
import math
import torch

def attend(q, k, v):
    tag = "{MARKER}"
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w

def layer(x):
    return attend(x, x, x)[0]

def draw(p, generator=None):
    return torch.multinomial(p, 3, replacement=True, generator=generator)
'''
STUDENT = '''
import torch

def attend(q, k, v):  # wrong: no scaling
    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w

def layer(x):  # right, on top of attend
    return attend(x, x, x)[0]

def inlined(x):  # its own attention, written out: graded on it
    w = torch.softmax(x @ x.transpose(-2, -1), dim=-1)
    return w @ x

def renames_the_proxy(x):  # asks the grader for a name this test does not grade on the reference
    attend.__name__ = "layer"
    return attend(x, x, x)[0]

def loops(x):
    for _ in range(LIMIT + 5):
        attend(x, x, x)
    return x

def too_large(x):  # two long sequences: a 200,000 x 200,000 score matrix
    q = torch.zeros(1, 200_000, 1)
    return attend(q, q, q)[0].shape

def sends_an_object(x):
    return attend(x, x, [torch.Generator()])  # travels on the wire, refused by the grader: not a function's own argument

def draw(p, generator=None):  # wrong: never draws
    return torch.zeros(p.shape[0], 3, dtype=torch.long)

def draws_thrice(p, seed):  # right, on top of draw: one generator, three calls
    g = torch.Generator().manual_seed(seed)
    return torch.stack([draw(p, generator=g), draw(p, g), torch.randint(0, 1000, (p.shape[0], 3), generator=g)])
'''.replace("LIMIT", str(MAX_CALLBACKS))


@pytest.fixture(scope="module")
def remote():
    yield from recording_student([{"index": 0, "source": STUDENT}], cell_timeout=30, load_timeout=120,
                                 call_timeout=120)


@pytest.fixture(scope="module")
def ref():
    return LocalStudent.from_code(REFERENCE)


def expected_layer(x):
    w = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return w @ x


@pytest.mark.parametrize("kind", ["remote", "local"])
def test_the_dependent_function_runs_on_the_reference_with_gradients(kind, remote, ref, request):
    student = remote if kind == "remote" else LocalStudent.from_code(STUDENT)
    x = torch.randn(2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    own = student.call("layer", x).output
    assert not torch.allclose(own, expected_layer(x))  # the student's own helper is wrong
    with student.graded_on_reference(["attend"], ref) as used:
        assert used == set()
        res = student.call("layer", x, grad=True, grad_outputs=[torch.ones(2, 3, 4, dtype=torch.float64)])
        assert used == {"attend"}
    torch.testing.assert_close(res.output, expected_layer(x))
    want = x.clone().requires_grad_(True)
    expected_layer(want).sum().backward()
    torch.testing.assert_close(res.grads[0], want.grad)  # the VJP callback: the reference's gradient
    torch.testing.assert_close(student.call("layer", x).output, own)  # the student's own helper is back


@pytest.mark.parametrize("kind", ["remote", "local"])
def test_a_helper_graded_on_the_reference_draws_from_the_students_generator_and_advances_it(kind, remote, ref):
    """The reference draws from the generator the student's code passes (its state travels), and the reply brings the
    state after the draws back, so the generator goes on as if the reference had run in the student's process: the
    second call draws other numbers, and a later draw of the student's own code continues the same stream."""
    student = remote if kind == "remote" else LocalStudent.from_code(STUDENT)
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    with student.graded_on_reference(["draw"], ref) as used:
        got = student.call("draws_thrice", p, 1234).output
    assert used == {"draw"}
    g = torch.Generator().manual_seed(1234)
    want = torch.stack([torch.multinomial(p, 3, replacement=True, generator=g),
                        torch.multinomial(p, 3, replacement=True, generator=g),
                        torch.randint(0, 1000, (2, 3), generator=g)])
    assert torch.equal(got, want)
    assert not torch.equal(got[0], got[1])  # the state came back: the second call did not repeat the first


def test_a_student_who_inlined_the_helper_is_graded_on_it_and_no_callback_is_recorded(remote, ref):
    x = torch.randn(1, 3, 2, dtype=torch.float64)
    with remote.graded_on_reference(["attend"], ref) as used:
        out = remote.call("inlined", x).output
    assert used == set()
    assert not torch.allclose(out, expected_layer(x))


def test_the_grader_refuses_a_callback_for_a_name_not_bound(remote, ref):
    x = torch.randn(1, 2, 2, dtype=torch.float64)
    with remote.graded_on_reference(["attend"], ref):
        calls = remote._reference
        with pytest.raises(StudentError, match="does not grade on the reference: refused"):
            remote.call("renames_the_proxy", x)
    assert calls.refused and "`layer`" in calls.refused[0] and calls.used == set()
    with pytest.raises(StudentError, match="only tensors and plain values"):  # and arguments that are objects
        with remote.graded_on_reference(["attend"], ref):
            remote.call("sends_an_object", x)
    with pytest.raises(StudentError, match="would return 160,000,800,000 bytes"):  # before the reference runs
        with remote.graded_on_reference(["attend"], ref):
            remote.call("too_large", x)
    # a callback with no binding at all is refused too (the grader's side, as the read loop answers it)
    reply = ReferenceCalls({}).answer({"name": "attend", "kind": "forward", "args": [x, x, x], "kwargs": {}})
    assert reply["ok"] is False and "refused" in reply["error"]


def test_callbacks_are_bounded_per_test(remote, ref, monkeypatch):
    monkeypatch.setattr(reference_calls, "MAX_CALLBACKS", 20)  # the bound, lowered to keep the test short
    remote._host.stop()  # the reference's child is forked again, with the lowered bound (reference_host)
    x = torch.randn(1, 2, 2)
    with pytest.raises(StudentError, match="more than 20 times"):
        with remote.graded_on_reference(["attend"], ref):
            remote.call("loops", x)
    assert remote.call("layer", x).output.shape == (1, 2, 2)  # the worker goes on, with the student's own code


def test_the_reference_source_never_reaches_the_worker(remote, ref):
    remote.sent.clear()
    x = torch.randn(2, 3, 4)
    with remote.graded_on_reference(["attend"], ref):
        remote.call("layer", x, grad=True, grad_outputs=[torch.ones(2, 3, 4)])
    sent = b"".join(remote.sent)
    assert sent and MARKER.encode() not in sent and b"softmax" not in sent and b"def " not in sent


# -- end to end, through grade_submission's (sandboxed) worker, on the real labs -----------------------------------------
def _mutated_solution(tmp_path: Path, lab: str, old: str, new: str) -> Path:
    nb = json.loads((ROOT / "solutions" / lab / f"{lab}.ipynb").read_text())
    hits = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and old in source:
            cell["source"] = source.replace(old, new)
            hits += 1
    assert hits == 1, f"{old!r} found in {hits} cells of {lab}"
    path = tmp_path / f"{lab}.ipynb"
    path.write_text(json.dumps(nb))
    return path


# dependents: question -> the reference it is graded with (a class built on the helper runs as the reference's class:
# test_module_proxy.py)
@pytest.mark.parametrize("lab, helper, old, new, dependents", [
    ("lab05_self_attention", "scaled_dot_product_attention", "q @ k.transpose(-2, -1) / math.sqrt(d_k)",
     "q @ k.transpose(-2, -1)", {"SelfAttention": "scaled_dot_product_attention", "AttentionClassifier": "SelfAttention"}),
    ("lab11_vision_transformer", "patchify", "x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 4, 2, 1, 3, 5)",
     {"PatchEmbedding": "patchify", "ViT": "PatchEmbedding"}),
    ("lab09_mini_gpt", "sample_next", "logits = logits / temperature", "logits = logits * temperature",
     {"generate": "sample_next"}),  # the reference samples with the student's generator
    ("lab04_recurrent_networks", "rnn_cell", "return torch.tanh(x_t @ W_ih.T", "return torch.relu(x_t @ W_ih.T",
     {"ElmanRNN": "rnn_cell"}),  # a function called once per time step, with gradients through time
    ("lab07_transformer_block", "FeedForward", "return self.linear2(hidden)", "return self.linear2(hidden).relu()",
     {"TransformerEncoderBlock": "FeedForward"}),
    ("lab10_pretrained_transformers", "BertEncoder",
     "x = self.drop(self.norm(self.tok_emb(ids) + self.pos_emb(positions)))",
     "x = self.drop(self.tok_emb(ids) + self.pos_emb(positions))", {"SequenceClassifier": "BertEncoder"}),
])
def test_a_wrong_helper_costs_only_its_own_question(tmp_path, lab, helper, old, new, dependents):
    res = grade_submission(ROOT / "autograder" / lab, _mutated_solution(tmp_path, lab, old, new))
    assert res["isolation"]  # graded in the worker (sandboxed where the machine has bubblewrap, as CI does)
    questions = res["questions"]
    assert questions[helper]["score"] < questions[helper]["max_score"], questions[helper]
    for q, result in questions.items():
        if q != helper and result.get("kind") != "written":
            assert result["score"] == result["max_score"], (q, result["messages"])
    for q, on in dependents.items():
        assert questions[q]["messages"][0].startswith(f"note: graded with the reference `{on}`"), questions[q]
        assert questions[q]["graded_on_reference"] == [on]
    assert not questions[helper].get("graded_on_reference")


def test_without_the_reference_the_dependents_would_lose(monkeypatch):
    """The isolation is what keeps the dependents' points: the same wrong helper with the suite's map emptied costs
    SelfAttention and AttentionClassifier too (in process, as the catalogue grades)."""
    from attnlab.grading.core.bundle import load_bundle
    from attnlab.grading.core.hidden import run_suite
    from attnlab.grading.core.mutants import student_with

    bundle = load_bundle(ROOT / "autograder" / "lab05_self_attention")
    (entry,) = [m for m in bundle.catalogue().mutants if m.name == "sdpa_no_scale"]
    questions = ("scaled_dot_product_attention", "SelfAttention", "AttentionClassifier")
    student = student_with(bundle.reference_code, entry)
    isolated = run_suite(bundle.suite, student, bundle.reference, seed=0, questions=questions)
    monkeypatch.setattr(bundle.suite, "graded_on_reference", {})
    together = run_suite(bundle.suite, student, bundle.reference, seed=0, questions=questions)
    for q, on in (("SelfAttention", "scaled_dot_product_attention"), ("AttentionClassifier", "SelfAttention")):
        assert isolated[q]["score"] == isolated[q]["max_score"]
        assert isolated[q]["messages"][0].startswith(f"note: graded with the reference `{on}`")
        assert together[q]["score"] < together[q]["max_score"] and "graded_on_reference" not in together[q]
    assert isolated["scaled_dot_product_attention"] == together["scaled_dot_product_attention"]
