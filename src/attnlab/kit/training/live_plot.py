"""The live plot: inside a Jupyter kernel (``in_notebook``), ``fit`` redraws the training curves in one notebook
output after every epoch; outside one it draws nothing and never opens a window.

``in_notebook`` and ``show_in_notebook`` are looked up on the package ``attnlab.kit.training`` when used, so a test that
replaces them there (``monkeypatch.setattr(training, "in_notebook", ...)``) reaches the live plot."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .history import History


def _package() -> Any:
    """``attnlab.kit.training``, where ``in_notebook`` and ``show_in_notebook`` are read at call time."""
    return importlib.import_module(__package__)


def in_notebook() -> bool:
    """True when running inside a Jupyter kernel (Jupyter, JupyterLab, Colab, VS Code notebooks)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    return getattr(shell, "kernel", None) is not None or "IPKernelApp" in getattr(shell, "config", {})


def show_in_notebook(obj: Any, display_id: bool = True) -> Any:
    """IPython's ``display``; a separate function so tests can replace it."""
    from IPython.display import display

    return display(obj, display_id=display_id)


class _LivePlot:
    """Redraws the training curves in one notebook output after every epoch.

    The figure is a bare ``matplotlib.figure.Figure`` (not registered with pyplot, so it neither opens a
    window nor shows twice) rendered to PNG and shown through one IPython display handle.
    """

    def __init__(self) -> None:
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(10, 3.5), layout="constrained")
        self.handle = None
        self.enabled = True

    def update(self, history: History) -> None:
        if not self.enabled:
            return
        try:
            import io

            from IPython.display import Image

            from attnlab.kit.plotting import draw_history

            draw_history(self.figure, history)
            buffer = io.BytesIO()
            self.figure.savefig(buffer, format="png", dpi=90)
            image = Image(data=buffer.getvalue(), format="png")
            if self.handle is None:
                self.handle = _package().show_in_notebook(image, display_id=True)
                if self.handle is None:
                    self.enabled = False
            else:
                self.handle.update(image)
        except Exception as exc:  # a plot must never cost a student their training run
            self.enabled = False
            warnings.warn(f"live plot turned off ({type(exc).__name__}: {exc}); "
                          f"use attnlab.kit.plotting.plot_history(history) after training", stacklevel=3)


def live_plot_for(live_plot: bool | None) -> _LivePlot | None:
    """The live plot, only inside a notebook (outside one there is nowhere to draw without opening a window)."""
    in_notebook = _package().in_notebook
    wanted = in_notebook() if live_plot is None else live_plot and in_notebook()
    return _LivePlot() if wanted else None
