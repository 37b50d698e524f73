"""The student repository's README (a Colab badge per lab, local set-up, submission), its licence, and the students'
copy of the contract (``docs/CURRICULUM.md``, which the notebooks cite), holding the released labs' sections."""

from __future__ import annotations

import re
import shlex
from datetime import datetime
from pathlib import Path

from ..course import Course, Lab

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def colab_url(url: str, branch: str, path: str) -> str | None:
    """Colab opens notebooks from GitHub by path; other hosts have no such link (None)."""
    match = re.fullmatch(r"(?:git\+)?https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", url.strip())
    if not match:
        return None
    return f"https://colab.research.google.com/github/{match.group(1)}/{match.group(2)}/blob/{branch}/{path}"


def _lab_row(lab: Lab, url: str, branch: str) -> str:
    path = f"labs/{lab.id}/{lab.id}.ipynb"
    link = colab_url(url, branch, path)
    badge = f"[![Open In Colab]({COLAB_BADGE})]({link})" if link else "upload the notebook to Colab"
    return f"| {lab.title} | [`{path}`]({path}) | {badge} |"


CONTRACT = Path("docs") / "CURRICULUM.md"  # where the kit keeps the contract, and where the masters point to it
CONTRACT_INTRO = """# The labs and their graded API

This is the contract for what you implement: the hidden tests call your code by these names and signatures, so
keep them exactly. Each notebook says the same where it asks for them; this page gathers them, for the labs
released so far.

"""


# The contract's paragraph on how partial credit is checked cites the course's own files (the catalogue, `make test`,
# the benchmarks), which students do not have: their copy says what it means for them instead.
AUTHORS_PARTIAL_CREDIT = re.compile(r"(?ms)^The hidden tests give partial credit by design.*?\n\n")
STUDENTS_PARTIAL_CREDIT = """The hidden tests give partial credit by design, and this is the rubric they are held to. Each
mistake the course knows of states the share of its question's points it should lose, as one of the four tiers
below (or, where a question's tests cannot hold a tier, a range of its own), and the course's own tests check, at
many grading seeds, that the grader takes exactly what is stated: no more, no less.

"""


def student_contract(root: Path, labs: list[Lab]) -> str:
    """The students' copy of ``docs/CURRICULUM.md`` (the notebooks point to it): its conventions and the sections
    of ``labs``, under an introduction for students in place of the one for the course's authors, and no citation
    of a file students do not have (``AUTHORS_PARTIAL_CREDIT``)."""
    text = AUTHORS_PARTIAL_CREDIT.sub(lambda _: STUDENTS_PARTIAL_CREDIT, (root / CONTRACT).read_text(), count=1)
    sections = re.split(r"(?m)^(?=## )", text)
    numbers = {lab.id[3:5] for lab in labs}
    kept = [part for part in sections[1:] if not part.startswith("## Lab ")
            or re.match(r"## Lab (\d\d)\b", part).group(1) in numbers]
    return CONTRACT_INTRO + "".join(kept).rstrip("\n") + "\n"


def deadlines(labs: list[Lab]) -> str:
    """The README's "Deadlines and late work" section: each lab's due date and late policy (``course.yml``'s
    ``due:`` and ``late:``), or nothing when no lab has a due date."""
    due = [lab for lab in labs if lab.due is not None]
    if not due:
        return ""
    lines = [f"- {lab.title}: due {lab.due.isoformat()}"
             + ("" if isinstance(lab.due, datetime) else " (the end of that day)")
             + f"; late work: {lab.late.describe()}." for lab in due]
    return ("\n## Deadlines and late work\n\n" + "\n".join(lines) + "\n\nA submission counts from the time the "
            "course's submission system records it. The penalty comes off your total; each question keeps the score "
            "it earned, and your feedback says what was taken and why. Need more time? Ask your instructor for an "
            "extension before the deadline.\n")


def student_readme(course: Course, labs: list[Lab], *, url: str, branch: str) -> str:
    rows = "\n".join(_lab_row(lab, url, branch) for lab in labs)
    return f"""# {course.name}: the labs

Jupyter labs on deep learning for text. In each lab you fill in the cells marked `# TODO`; the check after each
question tells you at once what is right and, when something is off, which property failed and by how much.

| lab | notebook | Colab |
|---|---|---|
{rows}
{deadlines(labs)}
## On Google Colab

1. Click the lab's badge (or File › Upload notebook in Colab with the `.ipynb` from this repository).
2. Optional: Runtime › Change runtime type › GPU. Every lab also runs on the CPU, in a smaller size.
3. Run the first cell. It prints "Installing the attnlab kit, about a minute", installs the kit from this
   repository without touching Colab's torch, and prints "attnlab installed.". If it says "The course set-up is
   incomplete", send that message to your instructor.
4. Work through the notebook top to bottom; run each `grader.check("...")` cell after its question.
5. Submit: File › Download › Download .ipynb, and hand that file in as "Handing in" below says.

## On your own machine (JupyterLab)

Python 3.10 or newer. On a machine without an NVIDIA GPU, install torch's CPU build first, as PyTorch's own
instructions (pytorch.org, "Get started") say: otherwise pip takes the default Linux torch with its CUDA wheels,
several GB you cannot use (the CPU build is under 1 GB installed). With an NVIDIA GPU, skip that line.

```bash
git clone {shlex.quote(url.removeprefix("git+"))} {course.slug}-labs && cd {course.slug}-labs
python3 -m venv .venv
.venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu   # no NVIDIA GPU: the CPU build
.venv/bin/pip install -e ".[student]"     # the kit, its checks and JupyterLab; keeps a torch >= 2.2 you have
.venv/bin/jupyter lab labs/
```

On Windows, the same lines with `.venv\\Scripts\\pip` and `.venv\\Scripts\\jupyter`.

Submit: File › Save Notebook, then hand in `labs/<lab>/<lab>.ipynb` as "Handing in" below says.

## Handing in

Your course says which way it collects work; each gives every question the same points.

- **Gradescope**: upload the notebook (`<lab>.ipynb`) to the lab's programming assignment. The written answers go
  to the lab's written assignment as a PDF made by the kit, with nothing more to install (no LaTeX, no browser):
  `python -m attnlab.kit.written_pdf <lab>.ipynb` in the notebook's folder (on Colab: upload the downloaded `.ipynb` in
  the Files pane, then run `!python -m attnlab.kit.written_pdf <lab>.ipynb` in a cell) writes `<lab>-written.pdf`, one
  page per written question with its prompt and your answer; upload it and mark the page of each question.
- **nbgrader**, or a folder of notebooks your instructor grades with `attnlab grade`: hand in the notebook itself;
  your written answers are read from it.

## Grading

Your notebook is graded by hidden tests that call your functions and classes by name on inputs you have not
seen (other shapes, dtypes, masks, gradients). Training and experiment cells are not re-run. Keep the names and
signatures the notebook asks for: [`docs/CURRICULUM.md`](docs/CURRICULUM.md) lists them, lab by lab.
"""


LICENSE = """MIT License

Copyright (c) the attnlab authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and
to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of
the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF
CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS
IN THE SOFTWARE.
"""
