"""What the first cell of every student notebook calls: ``grader, device = start_lab("lab05_self_attention")``.

The student kernel's one entry point, so it sits above grading's bridges in the layers: it hands the public checks'
``Grader`` the score of nbgrader's bridge (``grading/bridges/nbgrader_bridge.py``), imported only while nbgrader
autogrades the notebook (torch and the bundle); the rest of the kit imports nothing of grading.
"""

from __future__ import annotations

from pathlib import Path

PUBLIC_TESTS = Path(__file__).parent / "kit" / "generated" / "public_tests"


def public_tests_dir(lab_id: str) -> Path:
    folder = PUBLIC_TESTS / lab_id
    if not folder.is_dir():
        known = ", ".join(sorted(p.name for p in PUBLIC_TESTS.iterdir() if p.is_dir())) if PUBLIC_TESTS.is_dir() else ""
        raise ValueError(f"attnlab has no checks for lab {lab_id!r} (it has: {known or 'none'}); "
                         "the installed kit is older than this notebook: reinstall it from your course's address "
                         "(the KIT line of the notebook's first cell) with "
                         "pip install --upgrade --no-deps \"<that address>\", then restart the kernel")
    return folder


def graded_by_nbgrader(env: dict, lab_id: str, question: str) -> float:
    """While nbgrader autogrades: ``question``'s score from its hidden tests, as ``attnlab grade`` gives it."""
    from attnlab.grading.bridges import nbgrader_bridge

    return nbgrader_bridge.grade_question(env, lab_id, question)


def start_lab(lab_id: str, seed: int = 0):
    """Seed, pick the device, print a one-line summary, and return ``(grader, device)``.

    ``grader.check("name")`` runs the public checks of a question. They come with the installed kit, so
    they work on Colab, where no tests/ folder sits next to the notebook. The grader is Otter's, with ``check``
    showing each check by name, the failing statement and its message (``attnlab.kit.public_check``).
    """
    from attnlab.kit.otter_import import import_otter

    otter = import_otter()  # before public_check, which imports otter.test_files
    from attnlab.kit.device import describe_device, pick_device
    from attnlab.kit.public_check import Grader
    from attnlab.kit.seeding import seed_everything

    seed_everything(seed)
    device = pick_device()
    grader = Grader(otter.Notebook(tests_dir=str(public_tests_dir(lab_id))), lab_id, autograde=graded_by_nbgrader)
    print(f"attnlab {lab_id}: {describe_device()}")
    return grader, device
