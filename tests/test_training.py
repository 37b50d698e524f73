"""The shared training loop: it learns tiny separable problems, reports exact numbers, and fails helpfully."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from attnlab.kit import training  # noqa: E402
from attnlab.kit.training import TASKS, History, default_loss, evaluate, fit, infer_task  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models on a shared CPU: one intra-op thread avoids thread contention (10x faster here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _loader(*tensors, batch_size=32, shuffle=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle, generator=g)


def _binary_data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] - x[:, 1] > 0).long()


class Binary(nn.Module):
    """logits (B,) like MeanEmbeddingClassifier with num_classes=1."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x):
        return self.linear(x).squeeze(-1)


# ----------------------------------------------------------------------------------------------------------
# it learns


def test_binary_logits_learn_with_bce():
    torch.manual_seed(0)
    x, y = _binary_data()
    h = fit(Binary(), _loader(x, y, shuffle=True), epochs=8, lr=0.05, val_loader=_loader(x, y),
            progress=False)
    assert h.train_loss[-1] < 0.6 * h.train_loss[0]
    assert h.val_metric[-1] >= 0.95
    assert h.metric_name == "accuracy"


def test_multiclass_logits_learn_with_cross_entropy():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centers = torch.tensor([[4.0, 0.0], [-4.0, 0.0], [0.0, 4.0]])
    y = torch.randint(0, 3, (300,), generator=g)
    x = centers[y] + torch.randn(300, 2, generator=g)
    h = fit(nn.Linear(2, 3), _loader(x, y, shuffle=True), epochs=8, lr=0.05, val_loader=_loader(x, y),
            progress=False)
    assert h.train_loss[-1] < 0.5 * h.train_loss[0]
    assert h.val_metric[-1] >= 0.95


class Tagger(nn.Module):
    """(B, T) ids -> (B, T, V) logits, one token at a time."""

    def __init__(self, vocab=12):
        super().__init__()
        self.embedding = nn.Embedding(vocab, 16)
        self.out = nn.Linear(16, vocab)

    def forward(self, ids):
        return self.out(self.embedding(ids))


def _tagging_data(n=128, t=6, vocab=12):
    """target token = (input token mod 5) + 1 at real positions, 0 (pad) after each row's length."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, vocab, (n, t), generator=g)
    lengths = torch.randint(2, t + 1, (n,), generator=g)
    real = torch.arange(t)[None, :] < lengths[:, None]
    ids = ids * real
    target = ((ids % 5) + 1) * real
    return ids, target


def test_token_logits_learn_with_pad_ignored():
    torch.manual_seed(0)
    ids, target = _tagging_data()
    h = fit(Tagger(), _loader(ids, target, shuffle=True), epochs=15, lr=0.05, val_loader=_loader(ids, target),
            progress=False)
    assert h.train_loss[-1] < 0.3 * h.train_loss[0]
    assert h.val_metric[-1] >= 0.95
    assert h.metric_name == "token accuracy"


class TinyGPT(nn.Module):
    """A bigram language model with the GPT interface: forward(idx, targets=None) -> (logits, loss)."""

    def __init__(self, vocab=7):
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, idx, targets=None):
        logits = self.table(idx)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # every token, id 0 included
        return logits, loss


def test_model_that_returns_its_own_loss_learns():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 7, (96, 8), generator=g)
    y = (x + 1) % 7  # next token; id 0 is a real token here
    h = fit(TinyGPT(), _loader(x, y, y, shuffle=True), epochs=15, lr=0.1, val_loader=_loader(x, y, y),
            progress=False, pad_id=None)
    assert h.train_loss[-1] < 0.3 * h.train_loss[0]
    assert h.val_metric[-1] >= 0.95


def test_models_own_loss_is_used_and_none_falls_back_to_loss_fn():
    class ConstantLoss(nn.Module):
        def __init__(self, loss):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(()))
            self.loss = loss

        def forward(self, x):
            logits = x[:, 0] + self.w
            return logits, (None if self.loss is None else self.w * 0 + self.loss)

    x, y = _binary_data(n=20)
    assert evaluate(ConstantLoss(7.0), _loader(x, y))[0] == pytest.approx(7.0)
    expected = F.binary_cross_entropy_with_logits(x[:, 0], y.float()).item()
    assert evaluate(ConstantLoss(None), _loader(x, y, batch_size=20))[0] == pytest.approx(expected, rel=1e-6)


def test_extra_inputs_such_as_lengths_are_passed_to_the_model():
    class ByLength(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(1, 1)
            self.seen = []

        def forward(self, ids, lengths):
            self.seen.append((ids.shape, lengths.clone()))
            return self.linear((lengths.float() - 4.5)[:, None]).squeeze(-1)

    g = torch.Generator().manual_seed(4)
    lengths = torch.randint(1, 9, (64,), generator=g)
    ids = (torch.arange(8)[None, :] < lengths[:, None]).long() * 5
    y = (lengths > 4).long()
    model = ByLength()
    torch.manual_seed(0)
    h = fit(model, _loader(ids, lengths, y, batch_size=16), epochs=30, lr=0.1, progress=False)
    assert h.train_metric[-1] >= 0.95
    assert model.seen[0][0] == (16, 8)
    assert torch.equal(model.seen[0][1], lengths[:16])


def test_model_returning_logits_and_attention_weights_trains_on_the_logits():
    class WithWeights(Binary):
        def forward(self, x):
            return super().forward(x), torch.ones(x.shape[0], 3, 3)

    torch.manual_seed(0)
    x, y = _binary_data()
    h = fit(WithWeights(), _loader(x, y, shuffle=True), epochs=8, lr=0.05, progress=False)
    assert h.train_metric[-1] >= 0.95


# ----------------------------------------------------------------------------------------------------------
# exact numbers


def test_history_contents_are_consistent():
    torch.manual_seed(0)
    x, y = _binary_data(n=70)
    h = fit(Binary(), _loader(x, y, batch_size=32), epochs=3, lr=0.01, val_loader=_loader(x, y),
            progress=False)
    assert isinstance(h, History)
    assert h.epochs == 3
    assert len(h.step_loss) == 3 * 3  # 70 examples in batches of 32: 32, 32, 6
    assert len(h.val_loss) == len(h.train_metric) == len(h.val_metric) == 3
    # an epoch's loss is the mean over examples: step losses weighted by batch size
    first = h.step_loss[:3]
    assert h.train_loss[0] == pytest.approx((32 * first[0] + 32 * first[1] + 6 * first[2]) / 70)
    assert h.seconds > 0
    d = h.as_dict()
    assert d["train_loss"] == h.train_loss and d["metric_name"] == "accuracy" and d["seconds"] == h.seconds
    d["train_loss"].append(99.0)
    assert h.train_loss[-1] != 99.0  # as_dict copies
    assert h.best("val_loss") == min(h.val_loss)
    assert h.best("val_metric") == max(h.val_metric)
    assert h.best("loss") == min(h.val_loss)
    assert h.best("train_metric") == max(h.train_metric)
    assert "step_loss" not in repr(h)


def test_history_best_errors_say_why():
    h = History(train_loss=[1.0, 0.5])
    assert h.best("loss") == 0.5  # falls back to training without validation
    with pytest.raises(ValueError, match="val_loader"):
        h.best("val_loss")
    with pytest.raises(ValueError, match="no metric was recorded"):
        h.best("metric")
    with pytest.raises(ValueError, match="'accuracy'"):
        h.best("accuracy")


def test_evaluate_loss_and_accuracy_are_exact_over_uneven_batches():
    x, y = _binary_data(n=10)
    model = Binary()
    logits = model(x).detach()
    loss, acc = evaluate(model, _loader(x, y, batch_size=3))
    assert loss == pytest.approx(F.binary_cross_entropy_with_logits(logits, y.float()).item(), rel=1e-6)
    assert acc == pytest.approx(((logits > 0).long() == y).float().mean().item())


def test_token_accuracy_counts_only_non_pad_tokens():
    class Always5(nn.Module):
        def forward(self, ids):
            return F.one_hot(torch.full_like(ids, 5), 8).float()

    target = torch.tensor([[5, 5, 3, 0], [5, 0, 0, 0]])
    ids = torch.ones_like(target)
    _, acc = evaluate(Always5(), _loader(ids, target))
    assert acc == pytest.approx(3 / 4)  # 4 real tokens, 3 of them 5
    _, acc_all = evaluate(Always5(), _loader(ids, target), pad_id=None)
    assert acc_all == pytest.approx(3 / 8)


def test_default_loss_matches_torch():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 3, 6, generator=g)
    target = torch.tensor([[1, 2, 0], [3, 0, 0], [5, 5, 5], [0, 1, 0]])
    expected = F.cross_entropy(logits.reshape(-1, 6), target.reshape(-1), ignore_index=0)
    assert torch.allclose(default_loss(logits, target), expected)
    assert torch.allclose(default_loss(logits, target, pad_id=None), F.cross_entropy(logits.reshape(-1, 6),
                                                                                     target.reshape(-1)))
    b = torch.randn(5, generator=g)
    yb = torch.tensor([0, 1, 1, 0, 1])
    assert torch.allclose(default_loss(b, yb), F.binary_cross_entropy_with_logits(b, yb.float()))
    # one output unit (B, 1) is binary, not a one-class softmax (which would always give loss 0)
    assert torch.allclose(default_loss(b[:, None], yb), F.binary_cross_entropy_with_logits(b, yb.float()))
    m = torch.randn(5, 4, generator=g)
    assert torch.allclose(default_loss(m, yb), F.cross_entropy(m, yb))
    # float64 logits stay float64
    assert default_loss(b.double(), yb).dtype == torch.float64


def test_metric_none_and_custom_metric():
    torch.manual_seed(0)
    x, y = _binary_data(n=64)
    h = fit(Binary(), _loader(x, y), epochs=2, progress=False, metric=None, val_loader=_loader(x, y))
    assert h.train_metric == [] and h.val_metric == [] and h.metric_name is None

    def mean_logit(logits, target):
        return logits.mean()

    model = Binary()
    _, value = evaluate(model, _loader(x, y, batch_size=64), metric=mean_logit)
    assert value == pytest.approx(model(x).mean().item(), rel=1e-5)
    h = fit(model, _loader(x, y), epochs=1, progress=False, metric=mean_logit)
    assert h.metric_name == "mean_logit"


# ----------------------------------------------------------------------------------------------------------
# modes, optimizer options


class ModeRecorder(Binary):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.calls = []

    def forward(self, x):
        self.calls.append((self.training, torch.is_grad_enabled()))
        return super().forward(self.dropout(x))


def test_evaluate_uses_eval_mode_without_grad_and_restores_the_mode():
    x, y = _binary_data(n=8)
    model = ModeRecorder()
    model.train()
    model.dropout.eval()  # a mixed state must come back exactly
    evaluate(model, _loader(x, y))
    assert model.calls == [(False, False)]
    assert model.training is True and model.dropout.training is False
    model.eval()
    evaluate(model, _loader(x, y))
    assert model.training is False and model.dropout.training is False


def test_fit_trains_in_train_mode_and_restores_the_mode():
    x, y = _binary_data(n=8)
    model = ModeRecorder()
    model.eval()
    fit(model, _loader(x, y), epochs=1, val_loader=_loader(x, y), progress=False)
    assert model.calls == [(True, True), (False, False)]
    assert model.training is False


def test_scheduler_steps_after_every_optimizer_step():
    x, y = _binary_data(n=64)
    model = Binary()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    fit(model, _loader(x, y, batch_size=32), epochs=2, optimizer=opt, scheduler=sched, progress=False)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5**4)


def test_scheduler_on_another_optimizer_is_rejected():
    model = Binary()
    other = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(other, step_size=1)
    x, y = _binary_data(n=8)
    with pytest.raises(ValueError, match="optimizer=opt, scheduler=sched"):
        fit(model, _loader(x, y), epochs=1, scheduler=sched, progress=False)


def test_clip_grad_norm_bounds_each_update():
    x, y = _binary_data(n=32)
    model = Binary()
    before = torch.cat([p.detach().flatten() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(model, _loader(x, y, batch_size=32), epochs=1, optimizer=opt, clip_grad_norm=1e-3, progress=False)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert 0 < (after - before).norm() <= 1e-3 + 1e-7


def test_explicit_device_moves_model_and_batches():
    x, y = _binary_data(n=16)
    h = fit(Binary(), _loader(x, y), epochs=1, device="cpu", progress=False)
    assert h.epochs == 1


# ----------------------------------------------------------------------------------------------------------
# errors a student can hit


def test_errors_name_the_problem_and_the_fix():
    x, y = _binary_data(n=8)
    model = Binary()
    with pytest.raises(ValueError, match="epochs=0"):
        fit(model, _loader(x, y), epochs=0, progress=False)
    with pytest.raises(ValueError, match=r"\(\*inputs, target\)"):
        fit(model, [x], epochs=1, progress=False)
    with pytest.raises(ValueError, match="metric='acc'"):
        fit(model, _loader(x, y), epochs=1, metric="acc", progress=False)
    with pytest.raises(ValueError, match=r"not a generator"):
        fit(model, ((x, y) for _ in range(1)), epochs=2, progress=False)
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4, 3\).*loss_fn="):
        evaluate(nn.Identity(), [(torch.randn(4, 3), torch.randn(4, 3))])
    with pytest.raises(ValueError, match="lr=0"):
        fit(model, _loader(x, y), epochs=1, lr=0, progress=False)
    with pytest.raises(ValueError, match="scalar"):
        fit(model, _loader(x, y), epochs=1, loss_fn=lambda a, b: (a - b) ** 2, progress=False)
    with pytest.raises(ValueError, match="no batches"):
        evaluate(model, [])


def test_nan_loss_stops_with_advice():
    x, y = _binary_data(n=8)
    x[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"nan at epoch 1.*lr="):
        fit(Binary(), _loader(x, y), epochs=1, progress=False)


def test_nan_reports_the_first_step_whose_loss_is_not_finite():
    x, y = _binary_data(n=60)
    x[13, 0] = float("nan")  # batches of 4: the fourth batch (step 3) holds example 13; the NaN then spreads
    # to the weights, and the host sees it at step 10 (losses are copied every 10 steps): the message names step 3
    with pytest.raises(FloatingPointError, match=r"nan at epoch 1, step 3;"):
        fit(Binary(), _loader(x, y, batch_size=4), epochs=1, progress=False)


# ----------------------------------------------------------------------------------------------------------
# the task: explicit, or inferred from shapes in one place


def test_infer_task_reads_the_shape_table():
    ids = torch.tensor([0, 2, 1])
    assert infer_task(torch.zeros(3), torch.tensor([0.0, 1.0, 1.0])) == "binary"
    assert infer_task(torch.zeros(3, 1), ids) == "binary"  # one output unit is binary, not a 1-class softmax
    assert infer_task(torch.zeros(3, 4), ids) == "classification"
    assert infer_task(torch.zeros(3, 5, 7), torch.zeros(3, 5, dtype=torch.long)) == "language_model"
    assert infer_task(torch.zeros(3, 4), torch.zeros(3, 4)) is None  # a float (B, C) target: no default
    assert infer_task(torch.zeros(3, 4), ids.float()) is None  # class ids must be integers
    assert set(TASKS) == {"binary", "classification", "language_model", "regression"}


def test_explicit_task_gives_the_same_training_as_the_inferred_one():
    x, y = _binary_data(n=64)
    histories = []
    for task in ("auto", "binary"):
        torch.manual_seed(0)
        histories.append(fit(Binary(), _loader(x, y), epochs=2, progress=False, task=task,
                             val_loader=_loader(x, y)).as_dict())
    for h in histories:
        h.pop("seconds")
    assert histories[0] == histories[1]
    ids, target = _tagging_data(n=32)
    torch.manual_seed(0)
    auto = evaluate(Tagger(), _loader(ids, target))
    torch.manual_seed(0)
    assert evaluate(Tagger(), _loader(ids, target), task="language_model") == auto


def test_regression_task_fits_real_values_with_mse_and_no_accuracy():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(128, 3, generator=g)
    y = x @ torch.tensor([1.5, -2.0, 0.5]) + 0.25  # (B,) real-valued
    model = nn.Linear(3, 1)  # (B, 1) predictions against a (B,) target
    h = fit(model, _loader(x, y, shuffle=True), epochs=30, lr=0.05, task="regression", val_loader=_loader(x, y),
            progress=False)
    assert h.val_loss[-1] < 0.01 * h.val_loss[0]
    assert h.train_metric == [] and h.val_metric == [] and h.metric_name is None
    with torch.no_grad():
        expected = F.mse_loss(model(x).squeeze(-1), y).item()
    loss, metric = evaluate(model, _loader(x, y, batch_size=128), task="regression")
    assert loss == pytest.approx(expected, rel=1e-5) and metric is None
    # without task="regression", (B,) float targets would be read as binary labels
    pred = torch.randn(6, generator=g)
    target = torch.randn(6, generator=g)
    assert torch.allclose(default_loss(pred, target, task="regression"), F.mse_loss(pred, target))


def test_a_task_that_does_not_fit_the_shapes_says_so():
    x, y = _binary_data(n=8)
    with pytest.raises(ValueError, match=r"task='classification' expects logits \(B, C\).*shape \(8,\)"):
        fit(Binary(), _loader(x, y), epochs=1, task="classification", progress=False)
    with pytest.raises(ValueError, match=r"task='tokens' is not understood.*'language_model'"):
        fit(Binary(), _loader(x, y), epochs=1, task="tokens", progress=False)
    with pytest.raises(ValueError, match="task='regression'"):
        default_loss(torch.zeros(3, 4), torch.zeros(3, 4))  # the error points at the explicit task


# ----------------------------------------------------------------------------------------------------------
# progress bar and live plot


def test_progress_bar_shows_the_loss_and_can_be_silenced(capsys):
    x, y = _binary_data(n=16)
    fit(Binary(), _loader(x, y), epochs=1, progress=True, desc="lab05")
    err = capsys.readouterr().err
    assert "lab05" in err and "loss" in err
    fit(Binary(), _loader(x, y), epochs=1, progress=False)
    assert capsys.readouterr().err == ""


def test_in_notebook_detects_a_kernel(monkeypatch):
    import IPython

    assert training.in_notebook() is False  # pytest is not a Jupyter kernel
    kernel_shell = type("Shell", (), {"kernel": object(), "config": {}})()
    colab_like = type("Shell", (), {"config": {"IPKernelApp": {}}})()
    terminal_shell = type("Shell", (), {"config": {}})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: kernel_shell)
    assert training.in_notebook() is True
    monkeypatch.setattr(IPython, "get_ipython", lambda: colab_like)
    assert training.in_notebook() is True
    monkeypatch.setattr(IPython, "get_ipython", lambda: terminal_shell)
    assert training.in_notebook() is False


class _FakeHandle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, obj):
        self.shown.append(("update", obj))


def test_live_plot_redraws_one_display_after_each_epoch(monkeypatch):
    shown = []

    def fake_display(obj, display_id=True):
        assert display_id is True
        shown.append(("display", obj))
        return _FakeHandle(shown)

    monkeypatch.setattr(training, "in_notebook", lambda: True)
    monkeypatch.setattr(training, "show_in_notebook", fake_display)
    x, y = _binary_data(n=16)
    fit(Binary(), _loader(x, y), epochs=3, val_loader=_loader(x, y), progress=False)  # live_plot=None: on
    assert [kind for kind, _ in shown] == ["display", "update", "update"]
    assert all(obj.data[:8] == b"\x89PNG\r\n\x1a\n" for _, obj in shown)
    assert plt.get_fignums() == []  # drawn off pyplot: no window, no figure left open

    shown.clear()
    fit(Binary(), _loader(x, y), epochs=1, progress=False, live_plot=False)
    assert shown == []


def test_no_live_plot_outside_a_notebook(monkeypatch):
    calls = []
    monkeypatch.setattr(training, "show_in_notebook", lambda *a, **k: calls.append(a))
    x, y = _binary_data(n=16)
    fit(Binary(), _loader(x, y), epochs=1, progress=False)
    fit(Binary(), _loader(x, y), epochs=1, progress=False, live_plot=True)
    assert calls == []
    assert plt.get_fignums() == []


def test_a_failing_live_plot_warns_and_training_goes_on(monkeypatch):
    def broken(obj, display_id=True):
        raise RuntimeError("no frontend")

    monkeypatch.setattr(training, "in_notebook", lambda: True)
    monkeypatch.setattr(training, "show_in_notebook", broken)
    x, y = _binary_data(n=16)
    with pytest.warns(UserWarning, match="live plot turned off.*no frontend"):
        h = fit(Binary(), _loader(x, y), epochs=2, progress=False)
    assert h.epochs == 2
