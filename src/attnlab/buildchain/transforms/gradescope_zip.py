"""Autograder branch: a Gradescope autograder zip that grades with attnlab's sandboxed grader.

Gradescope runs ``setup.sh`` once when it builds the image and ``run_autograder`` per submission (as
root; the grader drops the student's worker to an unprivileged user inside bubblewrap). The hidden
tests, reference and manifest travel in ``bundle/``; the grader hides that folder from the worker.
Needs reference_code and the manifest first (it packs the same support files as otter_zip). Built only with an
install address (``install_spec``, or ``attnlab release --url``): the build writes none without one.
"""

from __future__ import annotations

import shlex

from ... import settings
from .package_zip import deterministic_zip

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope image set-up: the sandbox (bubblewrap), git (for a git+ install spec), then the kit.
# Gradescope graders have no GPU: take torch's CPU build first (about 200 MB instead of several GB of
# CUDA wheels); the kit accepts any torch >= 2.2, so installing it keeps that torch.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq bubblewrap git python3-pip python3-venv
python3 -m venv /opt/attnlab
/opt/attnlab/bin/pip install -q --upgrade pip
/opt/attnlab/bin/pip install -q torch --index-url {torch_index}
kit={spec}
/opt/attnlab/bin/pip install -q "$kit"
"""

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope calls this once per submission. AUTOGRADER_ROOT and ATTNLAB_PYTHON exist for local runs.
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="${{{python_variable}:-{python_default}}}"
exec "$python" -m attnlab.grading.bridges.gradescope_run --lab {lab!r} \\
  --bundle "$root/source/bundle" --submission "$root/submission" --results "$root/results/results.json"
"""


def run_autograder(lab_id: str) -> str:
    """The zip's ``run_autograder`` for ``lab_id`` (also what benchmarks/grade_time.py runs in its simulated container)."""
    return RUN_AUTOGRADER.format(lab=lab_id, python_variable=settings.PYTHON,
                                 python_default=settings.VARIABLES[settings.PYTHON].default)


class NoInstallAddress(ValueError):
    """A Gradescope zip without the address its setup.sh installs the kit from could not set up in Gradescope."""


def gradescope_zip(support_files: dict[str, bytes], *, lab_id: str, install_spec: str) -> bytes:
    """Refuses (``NoInstallAddress``) to build a zip whose ``setup.sh`` could not install the kit: that fails
    here, at build time, not in Gradescope's image build."""
    if not install_spec.strip():
        raise NoInstallAddress(f"{lab_id}: a Gradescope zip needs the address its setup.sh installs the kit from: "
                               "set install_spec in instructor/course.yml, or write the zips with "
                               "`attnlab release OUT --url URL`")
    files = {f"bundle/{name}": data for name, data in support_files.items()}
    files["setup.sh"] = SETUP_SH.format(spec=shlex.quote(install_spec), torch_index=TORCH_CPU_INDEX).encode()
    files["run_autograder"] = run_autograder(lab_id).encode()
    return deterministic_zip(files, executable=frozenset({"setup.sh", "run_autograder"}))
