"""A written question (Otter Assign's ``manual: true``) in the master's jupytext form, shared by the build chain's
tests of written questions: appended to the fixture course's master (``with_written``)."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "course"
LAB = "lab99_demo"
NAME = "double_explained"
PROMPT = "**Written question (2 points).** Run `double` on your own tensor and explain what it computes."
REFERENCE = ("`double(torch.tensor([1.0, 2.0]))` gives `[2.0, 4.0]`: every element is multiplied by two,\n"
             "element by element, so the shape of the input is kept.")
CRITERIA = ("Quotes the output of their own call of double", "Says the operation is elementwise and keeps the shape",
            "Gives no example of their own")
WRITTEN = f'''
# %% [raw]
# # BEGIN QUESTION
# name: {NAME}
# manual: true
# points: 2
# rubric:
#   - criterion: "{CRITERIA[0]}"
#     points: 1
#   - criterion: "{CRITERIA[1]}"
#     points: 1
#   - criterion: "{CRITERIA[2]}"
#     points: -0.5

# %% [markdown]
# {PROMPT}

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
{chr(10).join("# " + line for line in REFERENCE.split(chr(10)))}

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION
'''


def with_written(root: Path) -> Path:
    """A copy of the fixture course under ``root`` whose master ends with the written question; its path."""
    course = root / "course"
    shutil.copytree(FIXTURE, course)
    master = course / "instructor" / LAB / f"{LAB}.py"
    master.write_text(master.read_text() + WRITTEN)
    return course
