"""Otter imported for the notebook's checks without the 1.7 s a dependency of it spends at import.

``import otter`` imports nbformat, which imports jsonschema, whose format checkers import ``rfc3987_syntax`` where it is
installed (the Jupyter stack pulls it in). That module builds a Lark grammar of IRIs at import: 1.7 s of the
set-up cell's 4.9 s on the 2-core machine the course is tested on, in every kernel (the student's, and each one
``otter run`` and nbgrader's autograde start). Nothing the kit or Otter does checks the ``iri`` format, so jsonschema
is imported, the first time only, with that module hidden; it is hidden for that import alone, and a later
``import rfc3987_syntax`` works as before (only jsonschema's optional ``iri`` format checker is absent in the kernel).
"""

from __future__ import annotations

import importlib
import sys

GRAMMAR_AT_IMPORT = "rfc3987_syntax"


def import_otter():
    """The ``otter`` package, jsonschema imported first without ``rfc3987_syntax`` unless either is already loaded."""
    if "jsonschema" not in sys.modules and GRAMMAR_AT_IMPORT not in sys.modules:
        sys.modules[GRAMMAR_AT_IMPORT] = None  # an import of it raises ImportError, which jsonschema skips
        try:
            importlib.import_module("jsonschema")
        finally:
            del sys.modules[GRAMMAR_AT_IMPORT]
    import otter

    return otter
