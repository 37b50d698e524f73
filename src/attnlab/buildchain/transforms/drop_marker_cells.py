"""Remove the raw marker cells (BEGIN/END QUESTION, BEGIN/END TESTS, ASSIGNMENT CONFIG).

Runs after replace_tests, which needs the END TESTS markers to place the check cells.
"""

from __future__ import annotations

import copy

from .markers import META


def drop_marker_cells(nb):
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.metadata.get(META, {}).get("role") != "marker"]
    return nb
