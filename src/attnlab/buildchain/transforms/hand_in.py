"""The notebook's last cell: how to hand the lab in, on each route a course may use (Gradescope, nbgrader, a folder
that `attnlab grade` grades), with the written answers' PDF for Gradescope (``attnlab.kit.written_pdf``: no LaTeX, no
browser). Runs on the common notebook after answer_cells, so every branch ends with it and nbgrader locks it."""

from __future__ import annotations

import copy

import nbformat

from .markers import META

TEXT = """## Handing in

Save the notebook first (File › Save Notebook). Your course says which of these it uses:

- **Gradescope**: upload `{lab}.ipynb` to the lab's programming assignment (the code questions are graded from
  it). The written answers go to the lab's written assignment as a PDF: in the notebook's folder, run
  `python -m attnlab.kit.written_pdf {lab}.ipynb` (in a terminal, or `!python -m attnlab.kit.written_pdf {lab}.ipynb` in a
  cell; on Colab, first File › Download › Download .ipynb, then upload that file in the Files pane and run the
  cell). It writes `{lab}-written.pdf`, one page per written question with its prompt and your answer, with
  nothing more to install (no LaTeX, no browser). Upload it and mark the page of each question.
- **nbgrader**, or a folder your instructor grades with `attnlab grade`: hand in `{lab}.ipynb` itself; your written
  answers are read from it.

Every route gives each question the same points."""


def hand_in_cell(nb, *, lab_id: str):
    """``nb`` with the hand-in cell appended (role ``hand_in``)."""
    nb = copy.deepcopy(nb)
    cell = nbformat.v4.new_markdown_cell(TEXT.format(lab=lab_id))
    cell.metadata[META] = {"role": "hand_in"}
    nb.cells.append(cell)
    return nb
