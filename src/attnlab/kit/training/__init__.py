"""The one training loop every lab reuses (d2l's single Trainer idea).

``fit`` trains any model whose batches are tuples ``(*inputs, target)``: it calls ``model(*inputs)``,
optimises the loss of its task (or the one the model returns), shows a progress bar, and in a
Jupyter notebook redraws a loss/accuracy plot after every epoch. ``evaluate`` computes the mean loss
and metric of a model on a loader without changing it. Both run unchanged on CPU and CUDA.

The task says what is optimised. Pass it (``fit(..., task="language_model")``) or let ``task="auto"``
(the default) pick it from the shapes of the logits and the target, in one place, :func:`infer_task`::

    task              logits            target          loss                               metric
    "binary"          (B,) or (B, 1)    (B,) 0/1        binary cross-entropy with logits   accuracy (logit > 0)
    "classification"  (B, C)            (B,) ids        cross-entropy                      accuracy (argmax)
    "language_model"  (B, T, V)         (B, T) ids      cross-entropy, pad tokens ignored  token accuracy (non-pad)
    "regression"      target's shape    float           mean squared error                 none (never inferred)

A model that returns ``(logits, loss)`` with a loss (a GPT whose ``forward(idx, targets)`` computes it)
trains on its own loss; give it its targets as an input, e.g. batches ``(x, y, y)``.

One module per concept, read in this order: ``history`` (what ``fit`` records), ``tasks`` (losses, accuracies,
``infer_task``), ``evaluation`` (batches, the objective that scores them, ``evaluate``), ``live_plot`` (the
notebook's curves), ``loop`` (``fit`` and its steps in the order it takes them). This package is the import
surface: ``from attnlab.kit.training import fit`` and the rest.
"""

from .evaluation import evaluate
from .history import History
from .live_plot import in_notebook
from .live_plot import show_in_notebook as show_in_notebook  # here so a test can replace it (live_plot reads it here)
from .loop import fit
from .tasks import TASKS, Task, default_loss, infer_task

__all__ = ["History", "Task", "TASKS", "fit", "evaluate", "default_loss", "infer_task", "in_notebook"]
