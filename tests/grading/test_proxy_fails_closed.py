"""A module proxy that fails closed (issue 43, part 3): it mirrors the reference's sub-layers and plain public
attributes, so a correct class reading them (``self.embed.patch``, ``self.attn.num_heads``) keeps full marks in every
question graded on a proxied class; where the student's code needs what the proxy cannot give (an attribute the
reference does not hold, a part's own forward), the question is graded on the student's own class, with a note."""

from pathlib import Path

import pytest

from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.diagnosis.diagnose import Recorder
from attnlab.grading.worker.api import LocalStudent

from .test_api import recording_student

ROOT = Path(__file__).resolve().parents[2]

# lab, the reference's line the correct variant replaces, the replacement (reading the proxied part's attributes),
# the questions graded on a proxied class and the class each stands on
READS = [
    ("lab05_self_attention", "        h, _ = self.attention(self.embedding(ids), mask=real[:, None, :])",
     "        assert self.attention.v_proj.out_features == self.classifier.in_features == self.embedding.embedding_dim\n"
     "        assert len(self.attention.q_proj.weight) == self.attention.k_proj.out_features\n"
     "        h, _ = self.attention(self.embedding(ids), mask=real[:, None, :])",
     {"AttentionClassifier": "SelfAttention"}),
    ("lab09_mini_gpt", "        x = x + self.attn(self.ln1(x), use_cache=use_cache)  # (B, T, d)",
     "        assert x.shape[-1] % self.attn.num_heads == 0 and self.attn.qkv.out_features == 3 * x.shape[-1]\n"
     "        assert self.ln1.normalized_shape == (x.shape[-1],) and len(self.mlp) == 4\n"
     "        x = x + self.attn(self.ln1(x), use_cache=use_cache)  # (B, T, d)",
     {"GPTBlock": "CausalSelfAttention"}),
    ("lab09_mini_gpt", "        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, d) + (T, d)",
     "        first = self.blocks[0]\n"
     "        assert first.attn.num_heads >= 1 and first.mlp[0].in_features == first.mlp[-2].out_features\n"
     "        assert first.ln2.normalized_shape[0] == self.tok_emb.embedding_dim\n"
     "        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, d) + (T, d)",
     {"MiniGPT": "GPTBlock"}),
    ("lab12_modern_decoder", "        out = torch.zeros_like(flat)",
     "        assert self.experts[0].w1.in_features == flat.shape[-1] == self.experts[-1].w2.out_features\n"
     "        out = torch.zeros_like(flat)",
     {"MoEFeedForward": "SwiGLU"}),
    ("lab11_vision_transformer", "        x = self.dropout(self.embed(images))  # (B, N + 1, d)",
     "        assert images.shape[-1] % self.embed.patch == 0 and self.embed.proj.out_features == self.norm.weight.numel()\n"
     "        x = self.dropout(self.embed(images))  # (B, N + 1, d)",
     {"ViT": "PatchEmbedding"}),
]


def _graded(lab: str, code: str, questions) -> dict:
    """``run_suite`` of ``questions`` on ``code`` in a worker (where the proxies stand in), wrapped in the diagnosis'
    ``Recorder`` as ``attnlab grade`` wraps it (what the proxy reports must reach the suite through it)."""
    bundle = load_bundle(ROOT / "autograder" / lab)
    remote = recording_student([{"index": 0, "source": code}], cell_timeout=60, load_timeout=120, call_timeout=120)
    student = Recorder(next(remote))
    try:
        return run_suite(bundle.suite, student, bundle.reference, seed=0, questions=tuple(questions))
    finally:
        next(remote, None)  # closes the student and reaps its worker


def _variant(lab: str, *changes: tuple[str, str]) -> str:
    code = load_bundle(ROOT / "autograder" / lab).catalogue().reference_code
    for old, new in changes:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code


@pytest.mark.parametrize("lab, old, new, dependents", READS, ids=[f"{r[0][:5]}-{next(iter(r[3]))}" for r in READS])
def test_a_correct_class_reading_its_parts_public_attributes_keeps_full_marks(lab, old, new, dependents):
    results = _graded(lab, _variant(lab, (old, new)), dependents)
    for q, on in dependents.items():
        assert results[q]["score"] == results[q]["max_score"], results[q]["messages"]
        assert on in results[q]["graded_on_reference"], results[q]  # through the proxy, not a fallback
        assert not any("graded on your own" in m for m in results[q]["messages"]), results[q]["messages"]


FALLS = [
    ("a part's forward", "        x = self.dropout(self.embed(images))  # (B, N + 1, d)",
     "        tokens = self.embed.proj(patchify(images, self.embed.patch))\n"
     "        cls = self.embed.cls_token.expand(images.shape[0], -1, -1)\n"
     "        x = self.dropout(torch.cat([cls, tokens], dim=1) + self.embed.pos_emb)",
     "calls `proj` of `PatchEmbedding` on its own"),
    ("an attribute the reference lacks", "        x = self.dropout(self.embed(images))  # (B, N + 1, d)",
     "        assert self.embed.n_patches == (images.shape[-1] // self.embed.patch) ** 2\n"
     "        x = self.dropout(self.embed(images))  # (B, N + 1, d)",
     "reads `n_patches`"),
]


@pytest.mark.parametrize("what, old, new, why", FALLS, ids=[f[0] for f in FALLS])
def test_what_the_proxy_cannot_give_grades_the_question_on_the_students_own_class(what, old, new, why):
    lab, own = "lab11_vision_transformer", "        num_patches = (image_size // patch) ** 2\n"
    code = _variant(lab, (own, own + "        self.n_patches = num_patches\n"), (old, new))  # its own keeps n_patches
    vit = _graded(lab, code, ["ViT"])["ViT"]
    assert vit["score"] == vit["max_score"], vit["messages"]
    notes = [m for m in vit["messages"] if m.startswith("note: graded on your own `PatchEmbedding`")]
    assert notes and why in notes[0], vit["messages"]
    assert "PatchEmbedding" not in vit.get("graded_on_reference", [])
    bundle = load_bundle(ROOT / "autograder" / lab)
    local = run_suite(bundle.suite, LocalStudent.from_code(code), bundle.reference, seed=0, questions=("ViT",))
    assert local["ViT"]["score"] == vit["score"]  # in process (the reference's own class bound): the same score


MISTAKES = [  # question, the mistake (old -> new in the reference), the proxied class its tests build on
    ("MoEFeedForward", ("        weights = top_p / top_p.sum(dim=-1, keepdim=True)  # (N, k), rows sum to 1",
                        "        weights = top_p  # (N, k)"), "SwiGLU"),
    ("ModernDecoder", ("        logits = self.lm_head(self.norm(x))  # (B, T, V)",
                       "        logits = self.lm_head(x)  # (B, T, V)"), "RMSNorm"),
]


@pytest.mark.parametrize("question, change, on", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_graded_on_a_proxy_stays_graded_on_the_proxy(question, change, on):
    """A mistaken class built on a proxied one loses its own points and no more, in the worker (the proxy) and in
    process (the in-kernel routes' stand-in, ``reference_calls.counting_class``): the stand-in registering its parts
    (torch's ``add_module`` and ``register_parameter`` probe each name with ``hasattr``) is not a shortfall, so the
    failed tests are not regraded on the student's own class (a stub in a route's sample notebook)."""
    lab = "lab12_modern_decoder"
    code = _variant(lab, change)
    bundle = load_bundle(ROOT / "autograder" / lab)
    local = run_suite(bundle.suite, Recorder(LocalStudent.from_code(code)), bundle.reference, seed=0,
                      questions=(question,))
    for entry in (_graded(lab, code, [question])[question], local[question]):
        assert 0 <= entry["score"] < entry["max_score"], entry["messages"]
        assert on in entry.get("graded_on_reference", []), entry
        assert not any("graded on your own" in m for m in entry["messages"]), entry["messages"]
