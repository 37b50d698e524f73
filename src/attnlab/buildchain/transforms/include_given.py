"""Fill "given" cells with code from an earlier lab's reference solution.

Labs are released one after another, so a later lab hands students the pieces it builds on as ready
code (lab06 gives Lab 05's ``scaled_dot_product_attention``, lab07 gives Lab 06's ``MultiHeadAttention``).
A master asks for them with a code cell whose first line is

    # GIVEN from lab06_multi_head_attention: scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention

and the build replaces the cell with those definitions, taken from that lab's master with its solution
markers removed. The reference solution thus exists once, in its own lab. Runs first, on the raw master
(before parse_questions), and resolves given cells of the earlier lab too.
"""

from __future__ import annotations

import copy
import re
from typing import Callable

from attnlab.grading.source.notebook_code import cells_from_notebook, joined_source
from attnlab.grading.worker.api import definition_source

from .drop_marker_cells import drop_marker_cells
from .markers import GIVEN_PREFIX, first_line
from .parse_questions import MasterError, parse_questions
from .remove_solution_markers import remove_solution_markers
from .replace_tests import replace_tests

GIVEN = re.compile(r"^\s*#\s*GIVEN\s+from\s+(\w+)\s*:\s*(.+?)\s*$", re.I)

HEADER = GIVEN_PREFIX + "{lab}): {names}. Run this cell; it is the working code of the earlier lab.\n\n"


def solution_code(master) -> str:
    """The graded code of a (given-resolved) master with its solutions in place."""
    labelled, _ = parse_questions(master)
    nb = remove_solution_markers(drop_marker_cells(replace_tests(labelled)))
    return joined_source(cells_from_notebook(nb))


def _given_cells(nb):
    """(index, cell, lab id, names) of each ``# GIVEN from labNN: names`` cell."""
    for i, cell in enumerate(nb.cells):
        match = GIVEN.match(first_line(cell.source)) if cell.cell_type == "code" else None
        if match:
            yield i, cell, match.group(1), [n.strip() for n in match.group(2).split(",") if n.strip()]


def include_given(nb, *, load_master: Callable[[str], object]):
    """``load_master(lab_id)`` returns that lab's master notebook with its own given cells resolved."""
    nb = copy.deepcopy(nb)
    for i, cell, lab_id, names in _given_cells(nb):
        code = solution_code(load_master(lab_id))
        parts = []
        for name in names:
            source = definition_source(code, name)
            if source is None:
                raise MasterError(f"cell {i}: {lab_id} defines no `{name}` to give")
            parts.append(source)
        cell.source = HEADER.format(lab=lab_id, names=", ".join(names)) + "\n\n\n".join(parts)
    return nb


def given_origins(nb, *, load_master: Callable[[str], object], _seen: tuple[str, ...] = ()) -> dict[str, str]:
    """name -> the lab whose own code ``include_given`` ships for it in ``nb``'s given cells: a name the earlier
    lab itself took from a given cell is followed to the lab that wrote it (lab07 gives lab06's
    ``scaled_dot_product_attention``, which lab06 gives from lab05: its origin is lab05).
    ``load_master(lab_id)`` returns that lab's raw master (its ``# GIVEN`` lines unresolved)."""
    origins: dict[str, str] = {}
    for _, _, lab_id, names in _given_cells(nb):
        if lab_id in _seen:
            raise MasterError(f"given cells form a cycle: {' -> '.join(_seen + (lab_id,))}")
        earlier = given_origins(load_master(lab_id), load_master=load_master, _seen=_seen + (lab_id,))
        origins.update({name: earlier.get(name, lab_id) for name in names})
    return origins
