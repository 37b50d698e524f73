"""Entry point of the Gradescope autograder: grade the one notebook in the submission folder.

Always writes a ``results.json``: a missing or unreadable notebook scores 0 with a message, and an
error of the grader itself is reported as such rather than lost.
"""

from __future__ import annotations

import argparse
import os
import stat
import traceback
from pathlib import Path

from attnlab.gradescope_visibility import Visibility
from attnlab.grading.core.bundle import manifest_questions, read_manifest
from attnlab.grading.core.written_answers import add_written, points_awaiting, total_text
from attnlab.grading.outputs.gradescope import write_results_json
from attnlab.grading.runner import grade_submission, ungraded


def find_notebooks(folder: Path) -> list[Path]:
    """The submitted notebooks: regular ``.ipynb`` files anywhere under ``folder`` (links are never followed, files
    never opened here; checkpoints skipped). Unlike ``batch.collect_submissions`` (one submission per file of a
    folder), Gradescope's upload is one student's folder, nested as the student zipped it."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
        for name in files:
            path = Path(root) / name
            if name.endswith(".ipynb") and stat.S_ISREG(os.lstat(path).st_mode):
                found.append(path)
    return sorted(found)


def lock_away(bundle_dir: Path) -> None:
    """Make the bundle (hidden tests, reference) readable by root only.

    Gradescope's ``/autograder`` is world-readable, and a container without namespaces leaves the sandbox
    only ``setpriv`` (another uid, no private file system), under which the worker could read the bundle.
    The grader runs as root there, so it keeps access; elsewhere the sandbox hides the folder anyway.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chmod(bundle_dir, 0o700)


def run(*, lab: str, bundle: str, submission: str, results: str) -> dict:
    bundle_dir, folder = Path(bundle), Path(submission)
    lock_away(bundle_dir)
    notebooks = find_notebooks(folder)
    questions = manifest_questions(bundle_dir)
    if len(notebooks) != 1:
        found = ", ".join(p.name for p in notebooks[:20]) or "none"
        result = ungraded(folder, questions, f"submit exactly one .ipynb notebook (a regular file, not a link) "
                                             f"for {lab} (found: {found})", lab=lab)
    else:
        try:
            # the bundle loads inside, after the worker's zygote has started (one container, one submission: the
            # two imports of torch overlap)
            result = grade_submission(bundle_dir, notebooks[0])
        except Exception:  # noqa: BLE001 - a grader bug must still produce results.json
            traceback.print_exc()
            result = ungraded(notebooks[0], questions, "the autograder failed on this submission; your "
                                                       "instructor has been told to regrade it", lab=lab)
    result = add_written(result, read_manifest(bundle_dir), None)  # not graded: written still awaiting, never 0
    Path(results).parent.mkdir(parents=True, exist_ok=True)
    write_results_json(result, results, Visibility.from_manifest(read_manifest(bundle_dir)))
    print(f"{lab}: {total_text(result['score'], result['max_score'], points_awaiting(result))}  "
          f"[{result.get('isolation', '')}]")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m attnlab.grading.bridges.gradescope_run")
    p.add_argument("--lab", required=True)
    p.add_argument("--bundle", required=True)
    p.add_argument("--submission", required=True)
    p.add_argument("--results", required=True)
    run(**vars(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    from attnlab.process_exit import exit_without_teardown

    exit_without_teardown(main())  # one submission per container: skip the interpreter's slow teardown
