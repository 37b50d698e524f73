"""A student hands in the written answers for Gradescope as a PDF made by the kit alone (`python -m
attnlab.kit.written_pdf`): matplotlib's PDF back end, no LaTeX, pandoc or browser, one page per written question
holding its prompt and the student's answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from attnlab.course import load_course
from attnlab.grading.core.bundle import written_questions
from attnlab.kit.written_pdf import written_blocks

ROOT = Path(__file__).resolve().parents[1]
LAB = next(lab for lab in load_course(ROOT).labs if lab.id == "lab05_self_attention")


def test_each_written_question_is_its_prompt_and_the_students_answer():
    written = written_questions(LAB.autograder_dir)
    solved = written_blocks(json.loads(LAB.solution_notebook.read_text()))
    blank = written_blocks(json.loads(LAB.student_notebook.read_text()))
    assert len(solved) == len(blank) == len(written) >= 2
    for block, question in zip(solved, written):
        assert question.reference.split("\n")[0].strip() in block  # the answer, as written
    assert all("Type your answer here" in block for block in blank)


def test_the_pdf_is_made_without_latex_pandoc_or_a_browser(tmp_path):
    notebook = tmp_path / f"{LAB.id}.ipynb"
    notebook.write_bytes(LAB.solution_notebook.read_bytes())
    bare = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": str(tmp_path / "no-tools")}
    proc = subprocess.run([sys.executable, "-m", "attnlab.kit.written_pdf", str(notebook)], capture_output=True,
                          text=True, timeout=120, env=bare, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pdf = (tmp_path / f"{LAB.id}-written.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= len(
        written_questions(LAB.autograder_dir))
    assert f"{len(written_questions(LAB.autograder_dir))} written question(s)" in proc.stdout
