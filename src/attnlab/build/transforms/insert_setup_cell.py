"""Insert the first code cell of every release notebook: environment set-up for JupyterLab and Colab.

It installs the kit where it is missing (Colab) without touching the preinstalled torch, picks the
device, seeds, and creates the Otter ``grader`` from the public tests packaged with attnlab (Colab has
no tests/ folder beside the notebook). Tagged ``attnlab_setup`` so the grader skips it.
"""

from __future__ import annotations

import copy

import nbformat

from .markers import META

SETUP_TEMPLATE = '''\
# Set-up: run this cell first. It installs the attnlab kit if it is missing (on Colab, say),
# keeping the torch that is already installed, picks the GPU when there is one, and loads the checks.
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("attnlab") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", {spec!r}], check=True)

from attnlab.labkit import start_lab

grader, device = start_lab({lab!r})'''


def setup_source(lab_id: str, install_spec: str) -> str:
    return SETUP_TEMPLATE.format(lab=lab_id, spec=install_spec)


def insert_setup_cell(nb, *, lab_id: str, install_spec: str):
    """Insert after the leading markdown cells (title, introduction), before the first code cell."""
    nb = copy.deepcopy(nb)
    cell = nbformat.v4.new_code_cell(setup_source(lab_id, install_spec))
    cell.metadata["tags"] = ["attnlab_setup"]
    cell.metadata[META] = {"role": "setup", "question": None}
    at = 0
    while at < len(nb.cells) and nb.cells[at].cell_type == "markdown":
        at += 1
    nb.cells.insert(at, cell)
    return nb
