"""Read a master notebook (jupytext percent ``.py`` or ``.ipynb``) into an nbformat notebook."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat


def read_master(path: str | Path) -> nbformat.NotebookNode:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"master notebook {path} does not exist")
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    return jupytext.read(path, fmt="py:percent")
