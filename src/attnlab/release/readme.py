"""The student repository's README (a Colab badge per lab, local set-up, submission) and its licence."""

from __future__ import annotations

import re

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


def student_readme(course: Course, labs: list[Lab], *, url: str, branch: str) -> str:
    rows = "\n".join(_lab_row(lab, url, branch) for lab in labs)
    return f"""# {course.name}: the labs

Jupyter labs on deep learning for text. In each lab you fill in the cells marked `# TODO`; the check after each
question tells you at once what is right and, when something is off, which property failed and by how much.

| lab | notebook | Colab |
|---|---|---|
{rows}

## On Google Colab

1. Click the lab's badge (or File › Upload notebook in Colab with the `.ipynb` from this repository).
2. Optional: Runtime › Change runtime type › GPU. Every lab also runs on the CPU, in a smaller size.
3. Run the first cell. It prints "Installing the attnlab kit, about a minute", installs the kit from this
   repository without touching Colab's torch, and prints "attnlab installed.". If it says "The course set-up is
   incomplete", send that message to your instructor.
4. Work through the notebook top to bottom; run each `grader.check("...")` cell after its question.
5. Submit: File › Download › Download .ipynb, and upload that file where your course collects work.

## On your own machine (JupyterLab)

Python 3.10 or newer:

```bash
git clone {url.removeprefix("git+")} {course.name}-labs && cd {course.name}-labs
python3 -m venv .venv
.venv/bin/pip install -e ".[student]"     # the kit, its checks and JupyterLab; keeps a torch >= 2.2 you have
.venv/bin/jupyter lab labs/
```

Submit: File › Save Notebook, then upload `labs/<lab>/<lab>.ipynb` where your course collects work.

## Grading

Your notebook is graded by hidden tests that call your functions and classes by name on inputs you have not
seen (other shapes, dtypes, masks, gradients). Training and experiment cells are not re-run. Keep the names and
signatures the notebook asks for.
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
