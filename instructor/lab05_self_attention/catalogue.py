"""Lab 05 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` is run after the reference code and redefines one or more graded names; the
rest of the reference picks the new definition up (``SelfAttention`` calls whatever
``scaled_dot_product_attention`` is defined). A mutant must lose points on ``question``; a variant must
keep full marks on every question.
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, SLIP, Entry

_SA_ATTEND = "return scaled_dot_product_attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), mask)"


def _self_attention(forward: str = _SA_ATTEND, *, signature: str = "d_model, d_k=None, d_v=None, bias=True",
                    keep: str = "", bias: str = ", bias=bias") -> str:
    """A SelfAttention that differs from a correct one only in what is given: the ``forward`` lines, the
    ``signature`` of __init__, a line ``keep`` that stores something more, the projections' ``bias`` argument."""
    keep = f"        {keep}\n" if keep else ""
    return f'''
class SelfAttention(nn.Module):
    def __init__(self, {signature}):
        super().__init__()
{keep}        self.q_proj = nn.Linear(d_model, d_k or d_model{bias})
        self.k_proj = nn.Linear(d_model, d_k or d_model{bias})
        self.v_proj = nn.Linear(d_model, d_v or d_model{bias})

    def forward(self, x, mask=None):
        {forward}
'''


_CLS_ATTEND = "real = ids != 0\n        h, _ = self.attention(self.embedding(ids), mask=real[:, None, :])"
_CLS_POOL = "m = real.unsqueeze(-1).to(h.dtype)\n        logits = self.classifier((h * m).sum(1) / m.sum(1))"


def _classifier(attend: str = _CLS_ATTEND, pool: str = _CLS_POOL,
                returns: str = "return logits.squeeze(-1) if self.num_classes == 1 else logits") -> str:
    """An AttentionClassifier (the reference's, whose layers it keeps) whose forward differs from a correct one only
    in the lines given: ``attend`` (``h`` (B, L, D), keys masked by ``real``), ``pool`` (``logits``) and
    ``returns``."""
    return f'''
class AttentionClassifier(AttentionClassifier):
    def forward(self, ids):
        {attend}
        {pool}
        {returns}
'''


# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # simple_self_attention
    Entry("simple_scaled", "simple_self_attention", '''
def simple_self_attention(x):
    w = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return w @ x, w
''', "scales by 1/sqrt(d) although simple self-attention has no scaling",
      hint="your weights look scaled by 1/sqrt(d): simple self-attention uses the raw scores x x^T, with no scaling",
      loses=MOST),
    Entry("simple_softmax_dim_minus2", "simple_self_attention", '''
def simple_self_attention(x):
    w = torch.softmax(x @ x.transpose(-2, -1), dim=-2)
    return w @ x, w
''', "softmax over the queries (columns sum to 1, not rows); symmetric scores hide it in the output shape",
      hint=("your weights look like the softmax taken over the queries (dim=-2) instead of over the keys "
            "(dim=-1): each row must sum to 1"), loses=MOST),
    Entry("simple_bmm_3d_only", "simple_self_attention", '''
def simple_self_attention(x):
    w = torch.softmax(torch.bmm(x, x.transpose(1, 2)), dim=-1)
    return torch.bmm(w, x), w
''', "torch.bmm only accepts exactly three dimensions: no unbatched input, no extra leading dimensions",
      hint=("your code seems to work only for exactly three dimensions: the product and the transpose must act on the"
            " last two dimensions, whatever the leading ones"), loses=PART),
    Entry("simple_naive_softmax", "simple_self_attention", '''
def simple_self_attention(x):
    e = torch.exp(x @ x.transpose(-2, -1))
    w = e / e.sum(-1, keepdim=True)
    return w @ x, w
''', "hand-written softmax without subtracting the max: overflows (inf/inf = nan) for large inputs",
      hint=("your softmax overflows for large scores (exp of a large number is inf): use torch.softmax, which "
            "subtracts the maximum first"), loses=PART),
    Entry("simple_returns_scores", "simple_self_attention", '''
def simple_self_attention(x):
    scores = x @ x.transpose(-2, -1)
    return torch.softmax(scores, dim=-1) @ x, scores
''', "returns the raw scores instead of the softmax weights",
      hint="you return the raw scores x x^T as the weights: return the softmax of the scores", loses=MOST),

    # scaled_dot_product_attention
    Entry("sdpa_no_scale", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "forgets the 1/sqrt(d_k) scale",
      hint="your scores look unscaled: divide q k^T by sqrt(d_k)", loses=MOST),
    Entry("sdpa_scale_by_dk", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "divides by d_k instead of sqrt(d_k)",
      hint="your scores look divided by d_k instead of sqrt(d_k)", loses=MOST),
    Entry("sdpa_scale_by_dv", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "takes the scale from the values' width d_v instead of d_k",
      hint=("your scale seems to come from the values' width d_v: the scale belongs to the dot products of queries "
            "and keys, so it is their width d_k"), loses=MOST),
    Entry("sdpa_softmax_dim_minus2", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-2)
    return w @ v, w
''', "softmax over the queries (dim=-2) instead of the keys",
      hint="your weights look like the softmax taken over the queries (dim=-2) instead of over the keys (dim=-1)",
      loses=MOST),
    Entry("sdpa_softmax_dim1", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=1)
    return w @ v, w
''', "softmax over dim=1, right only for unbatched 2-D input",
      hint=("your softmax runs over dim=1, which is the keys only for 2-D input: use dim=-1 so it works with "
            "batch dimensions"), loses=MOST),
    Entry("sdpa_inverted_mask", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "uses nn.MultiheadAttention's convention (True = masked) instead of True = allowed",
      hint=("your mask looks inverted: in this lab True means 'may attend', so fill the scores where the mask is "
            "False (~mask) with -inf"), loses=MOST),
    Entry("sdpa_mask_after_softmax", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w
''', "zeroes the masked weights after the softmax without renormalising: rows no longer sum to 1",
      hint=("you seem to zero the masked weights after the softmax, so rows no longer sum to 1: fill the masked "
            "scores with -inf before the softmax"), loses=MOST),
    Entry("sdpa_masked_fill_zero", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "fills masked scores with 0 instead of -inf: exp(0) = 1, masked keys keep weight",
      hint="you seem to fill the masked scores with 0 instead of -inf: exp(0) = 1, so masked keys still get weight",
      loses=MOST),
    Entry("sdpa_weights_before_masking", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w_unmasked = torch.softmax(scores, dim=-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w_unmasked
''', "returns the weights computed before the mask was applied",
      hint=("the weights you return look computed before the mask was applied: return the weights of the masked "
            "softmax"), loses=MOST),
    Entry("sdpa_transpose_1_2", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "transposes dims 1 and 2: right for (B, n, d) only, wrong with extra leading dimensions or none",
      hint=("you swap dimensions 1 and 2 of k, right only for (B, n, d): swap the last two dimensions, whatever comes"
            " before them"), loses=PART),
    Entry("sdpa_bmm_3d_only", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return torch.bmm(w, v), w
''', "torch.bmm: exactly three dimensions only",
      hint=("torch.bmm accepts exactly three dimensions: use @ (torch.matmul), which broadcasts over any leading "
            "dimensions"), loses=PART),
    Entry("sdpa_dot_T", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "k.T reverses every dimension of a batch instead of transposing the last two",
      hint="k.T reverses every dimension of a batched tensor: only the last two should be swapped", loses=MOST),
    Entry("sdpa_inplace_scale", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "scales q in place: the caller's tensor changes (and autograd refuses it on a leaf)",
      hint="you scale q in place (q /= ...), which changes the caller's tensor: compute new tensors instead", loses=MOST),
    Entry("sdpa_inplace_masked_fill", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask.logical_not_()
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "inverts the caller's mask in place",
      hint=("you change the caller's mask in place (an in-place logical_not_ or masked_fill_): use ~mask, which "
            "makes a new tensor"), loses=MOST),
    Entry("sdpa_casts_float32", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = q.float(), k.float(), v.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "casts to float32: the dtype of float64 inputs is not kept",
      hint="your outputs come back as float32 for float64 inputs: do not call .float(); keep the input's dtype", loses=MOST),
    Entry("sdpa_detached", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).detach()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "detaches the scores: no gradient reaches q and k",
      hint=("no gradient reaches q and k: something detaches the scores (.detach(), .item(), .numpy()); keep the "
            "autograd graph"), loses=MOST),
    Entry("sdpa_naive_softmax", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask
    w = e / e.sum(-1, keepdim=True)
    return w @ v, w
''', "hand-written softmax without subtracting the max: huge scores overflow to inf/inf = nan",
      hint=("your softmax overflows for huge scores (inf / inf = nan): use torch.softmax, which subtracts the "
            "maximum first"), loses=SLIP),
    Entry("sdpa_uses_library", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, w
''', "calls the library's F.scaled_dot_product_attention for the output (forbidden in this lab)",
      hint=("your code calls F.scaled_dot_product_attention, which this lab forbids: compute the output from "
            "your own weights"), loses=ALL),

    # causal_mask
    Entry("causal_diagonal_excluded", "causal_mask", '''
def causal_mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril(-1)
''', "off by one: a token may not attend to itself",
      hint="your causal mask leaves out the diagonal: a token may attend to itself", loses=MOST),
    Entry("causal_strict_upper", "causal_mask", '''
def causal_mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)
''', "marks the future (strict upper triangle), i.e. the masked positions, as True",
      hint=("your causal mask marks the future (above the diagonal) as True: True means 'may attend', on and "
            "below the diagonal"), loses=MOST),
    Entry("causal_upper", "causal_mask", '''
def causal_mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).triu()
''', "upper triangle with the diagonal: each query sees the future instead of the past",
      hint=("your causal mask is the upper triangle: query i may attend to keys 0..i, the lower triangle with "
            "the diagonal"), loses=MOST),
    Entry("causal_float", "causal_mask", '''
def causal_mask(n, device=None):
    return torch.ones(n, n, device=device).tril()
''', "a float 0/1 mask instead of a bool mask (~mask then fails, masked_fill rejects it)",
      hint="your causal mask is a float tensor of 0s and 1s: make it bool (dtype=torch.bool)", loses=MOST),
    Entry("causal_ignores_device", "causal_mask", '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()
''', "no device argument",
      hint=("your causal_mask does not accept a device argument: causal_mask(n, device=None) must create the "
            "mask on that device"), loses=PART),

    # padding_mask
    Entry("padding_inverted", "padding_mask", '''
def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]
''', "True at the pads instead of at the real tokens",
      hint="your padding mask is True at the pads: it should be True at the real tokens (position < length)", loses=MOST),
    Entry("padding_off_by_one", "padding_mask", '''
def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] <= lengths[:, None]
''', "<= instead of <: one pad too many counted as real",
      hint="your padding mask counts one position too many as real: position j is real when j < length (not <=)",
      loses=MOST),
    Entry("padding_uses_max_length", "padding_mask", '''
def padding_mask(lengths, max_len):
    return torch.arange(int(lengths.max()), device=lengths.device)[None, :] < lengths[:, None]
''', "ignores max_len and uses the longest length: wrong shape when the batch is padded further",
      hint=("your padding mask's width comes from the longest length instead of max_len: the shape must be (B, "
            "max_len)"), loses=PART),
    Entry("padding_float", "padding_mask", '''
def padding_mask(lengths, max_len):
    return (torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]).float()
''', "returns a float mask instead of a bool mask",
      hint="your padding mask is a float tensor: return a bool tensor", loses=MOST),

    # SelfAttention
    Entry("selfattention_scale_by_d_model", "SelfAttention", _self_attention(
        keep="self.d_model = d_model",
        forward='''q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = torch.softmax(scores, dim=-1)
        return w @ v, w'''),
          "scales by 1/sqrt(d_model) instead of 1/sqrt(d_k): wrong when d_k != d_model",
      hint=("your SelfAttention seems to scale by 1/sqrt(d_model) instead of 1/sqrt(d_k): they differ when d_k "
            "is given"), loses=PART),
    Entry("selfattention_k_proj_for_values", "SelfAttention", _self_attention(
        "return scaled_dot_product_attention(self.q_proj(x), self.k_proj(x), self.k_proj(x), mask)"),
          "uses k_proj for the values (copy-paste): v_proj is never used",
      hint="your values seem to come from k_proj: project the values with v_proj", loses=MOST),
    Entry("selfattention_q_for_keys", "SelfAttention", _self_attention(
        "q = self.q_proj(x)\n        return scaled_dot_product_attention(q, q, self.v_proj(x), mask)"),
          "uses the queries as keys: the scores become symmetric, k_proj is never used",
      hint="your keys seem to be the queries (q_proj used twice): project the keys with k_proj", loses=MOST),
    Entry("selfattention_ignores_bias_flag", "SelfAttention", _self_attention(bias=""),
          "ignores bias=False: the projections always have a bias",
      hint="your projections keep a bias when bias=False: pass bias=bias to each nn.Linear", loses=SLIP),
    Entry("selfattention_ignores_mask", "SelfAttention", _self_attention(
        "return scaled_dot_product_attention(self.q_proj(x), self.k_proj(x), self.v_proj(x))"),
          "accepts a mask but never passes it on",
      hint="your SelfAttention seems to ignore its mask: pass mask on to scaled_dot_product_attention", loses=PART),
    Entry("selfattention_swapped_dk_dv", "SelfAttention", _self_attention(
        signature="d_model, d_v=None, d_k=None, bias=True"),
          "the signature lists d_v before d_k: positional arguments land in the wrong place",
      hint=("your signature seems to take d_v before d_k: keep the order SelfAttention(d_model, d_k=None, "
            "d_v=None, bias=True)"), loses=SLIP),

    # AttentionClassifier
    Entry("classifier_mean_includes_pads", "AttentionClassifier", _classifier(
        pool="logits = self.classifier(h.mean(dim=1))"),
          "averages over every position, pads included",
      hint="your classifier seems to average over every position, pads included: average over the real tokens only",
      loses=(0.4, 1)),
    Entry("classifier_pads_not_masked", "AttentionClassifier", _classifier(
        attend="h, _ = self.attention(self.embedding(ids))",
        pool=("m = (ids != 0).unsqueeze(-1).to(h.dtype)\n"
              "        logits = self.classifier((h * m).sum(1) / m.sum(1))")),
          "real tokens attend to the pads: no key mask",
      hint="your classifier seems not to mask the pads as keys: no token should attend to a pad (id 0)", loses=MOST),
    Entry("classifier_masks_queries", "AttentionClassifier", _classifier(
        attend="real = ids != 0\n        h, _ = self.attention(self.embedding(ids), mask=real[:, :, None])"),
          "mask of shape (B, L, 1) masks the pad queries instead of the pad keys (pad rows become nan)",
      hint=("your classifier seems to mask the pads as queries instead of as keys (rows of pads then have no "
            "allowed key): the mask shape is (B, 1, L)"), loses=MOST),
    Entry("classifier_sum_not_mean", "AttentionClassifier", _classifier(
        pool="logits = self.classifier((h * real.unsqueeze(-1)).sum(1))"),
          "sums over the real tokens instead of averaging",
      hint=("your classifier seems to sum over the real tokens instead of averaging them: divide by the number "
            "of real tokens"), loses=MOST),
    Entry("classifier_squeeze_all", "AttentionClassifier", _classifier(
        pool="m = real.unsqueeze(-1).to(h.dtype)", returns="return self.classifier((h * m).sum(1) / m.sum(1)).squeeze()"),
          "squeeze() instead of squeeze(-1): a batch of one gives a 0-d tensor",
      hint="a batch of one gives a 0-d tensor: use squeeze(-1), not squeeze(), so the logits keep the shape (1,)",
      loses=SLIP),
    Entry("classifier_no_squeeze", "AttentionClassifier", _classifier(
        pool="m = real.unsqueeze(-1).to(h.dtype)", returns="return self.classifier((h * m).sum(1) / m.sum(1))"),
          "returns (B, 1) logits for num_classes == 1 instead of (B,)",
      hint="with num_classes=1 your logits keep a last dimension of size 1: return shape (B,) with squeeze(-1)", loses=MOST),
    Entry("classifier_first_token", "AttentionClassifier", _classifier(
        attend="h, _ = self.attention(self.embedding(ids), mask=(ids != 0)[:, None, :])",
        pool="logits = self.classifier(h[:, 0])"),
          "classifies from the first position instead of the mean (a [CLS]-style shortcut without a CLS token)",
      hint="your classifier seems to use the first position's output instead of the mean over the real tokens", loses=MOST),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("simple_einsum", "simple_self_attention", '''
def simple_self_attention(x):
    w = torch.einsum("...id,...jd->...ij", x, x).softmax(dim=-1)
    return torch.einsum("...ij,...jd->...id", w, x), w
''', "einsum for both products"),
    Entry("simple_mT_functional_softmax", "simple_self_attention", '''
def simple_self_attention(x):
    w = F.softmax(torch.matmul(x, x.mT), dim=-1)
    return torch.matmul(w, x), w
''', "F.softmax, torch.matmul and .mT"),
    Entry("simple_stable_manual_softmax", "simple_self_attention", '''
def simple_self_attention(x):
    s = x @ x.transpose(-2, -1)
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ x, w
''', "manual stable softmax (subtract the row max, exp, normalise)"),

    Entry("sdpa_einsum", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(dim=-1)
    return torch.einsum("...qk,...kv->...qv", w, v), w
''', "einsum"),
    Entry("sdpa_minus_1e9", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "-1e9 instead of -inf: exp underflows to exactly 0 as long as allowed scores stay above about -1e9; "
         "the huge-score test uses scores of about 1e4, so this common idiom passes"),
    Entry("sdpa_stable_manual_softmax", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    e = scores.exp()
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v, w
''', "manual stable softmax"),
    Entry("sdpa_torch_where", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "torch.where instead of masked_fill"),
    Entry("sdpa_additive_mask", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
        scores = scores + bias
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "an additive float mask M (0 or -inf) as in the formula"),
    Entry("sdpa_scale_q_first", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    q = q * q.shape[-1] ** -0.5
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "scales q before the product (not in place)"),
    Entry("sdpa_finfo_min", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
''', "the dtype's most negative number instead of -inf"),
    Entry("sdpa_mT_matmul_sqrt_tensor", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = torch.tensor(q.shape[-1], dtype=q.dtype, device=q.device)
    scores = torch.matmul(q, k.mT) / torch.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == False, float("-inf"))  # noqa: E712
    w = F.softmax(scores, dim=-1)
    return torch.matmul(w, v), w
''', "torch.matmul, .mT, a scale tensor in the input's dtype, mask == False"),

    Entry("causal_ones_tril_bool", "causal_mask", '''
def causal_mask(n, device=None):
    return torch.ones(n, n, device=device).tril().bool()
''', "float ones, tril, then .bool()"),
    Entry("causal_arange_compare", "causal_mask", '''
def causal_mask(n, device=None):
    i = torch.arange(n, device=device)
    return i[:, None] >= i[None, :]
''', "compares row and column indices"),
    Entry("causal_not_triu", "causal_mask", '''
def causal_mask(n, device=None):
    return ~torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), diagonal=1)
''', "the complement of the strict upper triangle"),

    Entry("padding_expand_compare", "padding_mask", '''
def padding_mask(lengths, max_len):
    positions = torch.arange(max_len, device=lengths.device).expand(len(lengths), max_len)
    return positions < lengths.unsqueeze(1)
''', "expand, then compare with lengths.unsqueeze(1)"),
    Entry("padding_loop", "padding_mask", '''
def padding_mask(lengths, max_len):
    mask = torch.zeros(len(lengths), max_len, dtype=torch.bool, device=lengths.device)
    for i, n in enumerate(lengths.tolist()):
        mask[i, :n] = True
    return mask
''', "a Python loop over the rows"),

    Entry("selfattention_inline_einsum", "SelfAttention", '''
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, d_v=None, bias=True):
        super().__init__()
        self.d_k = d_k or d_model
        self.q_proj = nn.Linear(d_model, self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, d_v or d_model, bias=bias)

    def forward(self, x, mask=None):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        scores = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = scores.softmax(-1)
        return torch.einsum("bij,bjd->bid", w, v), w
''', "everything inline with einsum, without calling scaled_dot_product_attention"),
    Entry("selfattention_scale_buffer", "SelfAttention", '''
class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, d_v=None, bias=True):
        super().__init__()
        d_k = d_k or d_model
        self.q_proj = nn.Linear(d_model, d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, d_v or d_model, bias=bias)
        self.register_buffer("inv_scale", torch.tensor(1.0 / math.sqrt(d_k), dtype=torch.float64))

    def forward(self, x, mask=None):
        q = self.q_proj(x) * self.inv_scale
        scores = q @ self.k_proj(x).transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = scores.softmax(-1)
        return w @ self.v_proj(x), w
''', "an extra registered buffer (the scale) is the student's business and costs nothing. It is created in "
         "float64: a float32 constant is rounded before .to(torch.float64) and puts float32 rounding errors "
         "(about 1e-7) into float64 results, which the float64 tolerance reports"),

    Entry("classifier_masked_sum_over_count", "AttentionClassifier", '''
class AttentionClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.attention = SelfAttention(embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        real = ids != 0
        h, _ = self.attention(self.embedding(ids), mask=real.unsqueeze(1))
        summed = h.masked_fill(~real.unsqueeze(-1), 0.0).sum(dim=1)
        count = real.sum(dim=1, keepdim=True)
        logits = self.classifier(summed / count)
        return logits[:, 0] if logits.shape[-1] == 1 else logits
''', "masked_fill then sum / count; logits[:, 0] for one class"),
    Entry("classifier_lengths_padding_mask", "AttentionClassifier", '''
class AttentionClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.attention = SelfAttention(embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        lengths = (ids != 0).sum(dim=1)
        real = padding_mask(lengths, ids.shape[1])
        h, _ = self.attention(self.embedding(ids), mask=real[:, None, :].expand(-1, ids.shape[1], -1))
        pooled = torch.stack([h[b, : int(n)].mean(dim=0) for b, n in enumerate(lengths)])
        out = self.classifier(pooled)
        return out.view(-1) if self.num_classes == 1 else out
''', "lengths -> padding_mask, a full (B, L, L) mask, a per-row mean in a loop, padding_idx=0"),
]
