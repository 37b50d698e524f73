"""Student branch: lock the cells students must not change (prose, set-up, checks).

Runs after insert_setup_cell and replace_tests (it locks the cells they add). The grader never relies
on locks: it ignores edited check cells and runs its own set-up.
"""

from __future__ import annotations

import copy

from .markers import META

LOCKED_ROLES = {"setup", "check"}


def lock_cells(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        role = cell.metadata.get(META, {}).get("role")
        if (cell.cell_type == "markdown" and role != "answer") or role in LOCKED_ROLES:  # written answers stay open
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
    return nb
