"""The figures: right axes, labels and data, headless (Agg), never plt.show(), no figure left open."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnlab.kit.plotting import (  # noqa: E402
    attention_grid,
    attention_heatmap,
    embedding_scatter,
    line_plot,
    plot_history,
)
from attnlab.kit.training import History  # noqa: E402


@pytest.fixture(autouse=True)
def no_show_no_leak(monkeypatch):
    def show(*args, **kwargs):
        raise AssertionError("plotting functions must not call plt.show()")

    monkeypatch.setattr(plt, "show", show)
    plt.close("all")
    yield
    leaked = plt.get_fignums()
    plt.close("all")
    assert leaked == [], "a figure was left open"


def _ticks(labels):
    return [t.get_text() for t in labels]


def _weights(*shape, seed=0):
    w = torch.rand(*shape, generator=torch.Generator().manual_seed(seed))
    return torch.softmax(w, dim=-1)


def test_heatmap_shows_the_weights_with_labels_and_a_colorbar():
    w = _weights(2, 3).requires_grad_()
    ax = attention_heatmap(w, ["the", "cat", "sat"], ["q0", "q1"], title="layer 1")
    fig = ax.figure
    assert len(fig.axes) == 2  # heatmap + colorbar
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), w.detach().numpy())
    assert _ticks(ax.get_xticklabels()) == ["the", "cat", "sat"]  # keys on x
    assert _ticks(ax.get_yticklabels()) == ["q0", "q1"]  # queries on y
    assert ax.get_title() == "layer 1"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("key", "query")
    assert len(ax.texts) == 0
    plt.close(fig)


def test_heatmap_annotations_and_given_axes_and_numpy_input():
    fig, ax = plt.subplots()
    w = np.array([[0.25, 0.75], [1.0, 0.0]])
    out = attention_heatmap(w, annotate=True, ax=ax, cmap="magma")
    assert out is ax
    assert plt.get_fignums() == [fig.number]  # drew on the given axes, no new figure
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "1.00", "0.00"]
    assert ax.images[0].get_cmap().name == "magma"
    plt.close(fig)


def test_heatmap_accepts_low_precision_tensors():
    w = _weights(3, 3).to(torch.bfloat16)
    ax = attention_heatmap(w)
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), w.float().numpy())
    plt.close(ax.figure)


def test_heatmap_errors():
    with pytest.raises(ValueError, match=r"\(2, 3, 3\).*attention_grid"):
        attention_heatmap(_weights(2, 3, 3))
    with pytest.raises(ValueError, match="x_labels has 2 labels.*3 keys"):
        attention_heatmap(_weights(2, 3), ["a", "b"])
    with pytest.raises(ValueError, match="y_labels has 3 labels.*2 queries"):
        attention_heatmap(_weights(2, 3), None, ["a", "b", "c"])


def test_grid_has_one_heatmap_per_head_on_a_shared_scale():
    w = _weights(3, 2, 4)
    fig = attention_grid(w, list("abcd"), ["x", "y"], ncols=2, suptitle="heads")
    heads = fig.axes[:3]
    assert len(fig.axes) == 4  # 3 heads + 1 colorbar; the empty fourth panel is removed
    for i, ax in enumerate(heads):
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), w[i].numpy())
        assert ax.get_title() == f"head {i}"
        assert _ticks(ax.get_xticklabels()) == list("abcd")
        assert ax.images[0].get_clim() == pytest.approx((w.min().item(), w.max().item()))
    assert _ticks(heads[0].get_yticklabels()) == ["x", "y"]
    assert fig.get_suptitle() == "heads"
    plt.close(fig)


def test_grid_accepts_a_batch_of_one_and_custom_titles():
    w = _weights(1, 2, 3, 3)
    fig = attention_grid(w, titles=["first", "second"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["first", "second"]
    assert len(fig.axes) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match="weights\\[0\\]"):
        attention_grid(_weights(2, 2, 3, 3))
    with pytest.raises(ValueError, match="titles has 1 entries.*2 heads"):
        attention_grid(_weights(2, 3, 3), titles=["only one"])
    with pytest.raises(ValueError, match="ncols=0"):
        attention_grid(_weights(2, 3, 3), ncols=0)


def _history(offset=0.0, metric=True, val=True):
    return History(
        train_loss=[1.0 + offset, 0.6 + offset, 0.4 + offset],
        val_loss=[1.1 + offset, 0.7 + offset, 0.5 + offset] if val else [],
        train_metric=[0.5, 0.7, 0.9] if metric else [],
        val_metric=[0.45, 0.65, 0.85] if (metric and val) else [],
        metric_name="accuracy" if metric else None,
    )


def test_plot_history_train_dashed_val_solid_with_the_values():
    h = _history()
    fig = plot_history(h, title="lab01")
    loss_ax, metric_ax = fig.axes
    lines = {line.get_label(): line for line in loss_ax.get_lines()}
    assert set(lines) == {"train", "val"}
    assert lines["train"].get_linestyle() == "--" and lines["val"].get_linestyle() == "-"
    assert list(lines["train"].get_ydata()) == h.train_loss
    assert list(lines["val"].get_xdata()) == [1, 2, 3]
    assert metric_ax.get_ylabel() == "accuracy"
    assert [list(line.get_ydata()) for line in metric_ax.get_lines()] == [h.train_metric, h.val_metric]
    assert fig.get_suptitle() == "lab01"
    plt.close(fig)


def test_plot_history_compares_runs_and_accepts_as_dict():
    runs = {"mean of embeddings": _history(0.2), "self-attention": _history().as_dict()}
    fig = plot_history(runs, metrics=("loss",))
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["mean of embeddings (train)", "mean of embeddings (val)",
                      "self-attention (train)", "self-attention (val)"]
    colors = [line.get_color() for line in ax.get_lines()]
    assert colors[0] == colors[1] != colors[2] == colors[3]  # one colour per run
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
    plt.close(fig)


def test_plot_history_leaves_out_empty_panels():
    fig = plot_history(_history(metric=False, val=False))
    assert len(fig.axes) == 1
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["train"]
    plt.close(fig)


def test_plot_history_errors_leave_no_figure():
    with pytest.raises(ValueError, match="'accuracy'"):
        plot_history(_history(), metrics=("accuracy",))
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_history(History())
    with pytest.raises(ValueError, match="not a training history"):
        plot_history({"run": [1, 2, 3]})
    with pytest.raises(ValueError, match="History"):
        plot_history([1.0, 0.5])


def test_line_plot_draws_each_series_with_log_axes():
    d = [1, 4, 16, 64]
    ys = {"max weight": [0.4, 0.6, 0.9, 0.99], "entropy": torch.tensor([1.2, 0.8, 0.3, 0.05])}
    ax = line_plot(d, ys, xlabel="d", ylabel="value", title="softmax saturation", logx=True, logy=True)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["max weight", "entropy"]
    np.testing.assert_allclose(lines[1].get_ydata(), [1.2, 0.8, 0.3, 0.05], rtol=1e-6)
    np.testing.assert_allclose(lines[0].get_xdata(), d)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("d", "value", "softmax saturation")
    plt.close(ax.figure)
    with pytest.raises(ValueError, match=r"ys\['a'\] has 2 values but x has 3"):
        line_plot([1, 2, 3], {"a": [1, 2]}, xlabel="x", ylabel="y")


def test_embedding_scatter_places_and_labels_every_point():
    points = torch.tensor([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    ax = embedding_scatter(points, ["king", "queen", "man"], title="PCA")
    np.testing.assert_allclose(ax.collections[0].get_offsets(), points.numpy())
    assert [t.get_text() for t in ax.texts] == ["king", "queen", "man"]
    assert [t.xy for t in ax.texts] == [(0.0, 1.0), (2.0, -1.0), (0.5, 0.5)]
    assert ax.get_title() == "PCA"
    plt.close(ax.figure)
    with pytest.raises(ValueError, match=r"\(3, 3\).*2-D"):
        embedding_scatter(torch.zeros(3, 3), None)
    with pytest.raises(ValueError, match="labels has 2 entries but points has 3"):
        embedding_scatter(points, ["a", "b"])
