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
import importlib
import importlib.util
import re
import subprocess
import sys

KIT = {spec!r}  # where this course installs the kit from (set by the instructor)
if importlib.util.find_spec("attnlab") is None:
    print("Installing the attnlab kit, about a minute (torch stays as it is)...", flush=True)
    pip = None
    if KIT:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", KIT], capture_output=True, text=True)
    if pip is None or pip.returncode != 0:
        lines = re.sub(r"\\x1b\\[[0-9;]*m", "", (pip.stderr + pip.stdout) if pip else "").splitlines()
        said = ([x for x in lines if x.startswith("ERROR")] or [x for x in lines if x.strip()])[-1:]
        print("The course set-up is incomplete: the attnlab kit could not be installed from", file=sys.stderr)
        print("   ", KIT or "(no address: this notebook was built without one)", file=sys.stderr)
        print("Tell your instructor, with this message.", *(["pip said:", said[0]] if said else []), file=sys.stderr)
        raise SystemExit("attnlab is not installed; the cells below need it")
    importlib.invalidate_caches()
    print("attnlab installed.")

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
