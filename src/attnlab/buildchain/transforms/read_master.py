"""Read a master notebook (jupytext percent ``.py`` or ``.ipynb``) into an nbformat notebook."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat


def read_master(path: str | Path) -> nbformat.NotebookNode:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"master notebook {path} does not exist")
    return parse_master(path.read_text(), ipynb=path.suffix == ".ipynb")


def parse_master(text: str, *, ipynb: bool = False) -> nbformat.NotebookNode:
    """A master's text as a notebook: ``ipynb`` for a notebook file, else the jupytext percent format."""
    if ipynb:
        return nbformat.reads(text, as_version=4)
    return jupytext.reads(text, fmt="py:percent")
