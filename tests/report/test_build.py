"""``build_report`` and ``attnlab report``: the files it writes, its errors, and its time on 500 rows."""

from __future__ import annotations

import hashlib
import json
import random
import time

import pytest

from attnlab.cli import main
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.report import build_report

from .conftest import LAB, ROOT, renamed, variants_code
from .rows import diagnosed


def _result(path, questions: dict[str, tuple[float, float, list[str]]], elapsed: float = 1.0) -> dict:
    return {"submission": str(path), "score": sum(q[0] for q in questions.values()),
            "max_score": sum(q[1] for q in questions.values()), "isolation": "bubblewrap", "elapsed_s": elapsed,
            "questions": {n: {"score": q[0], "max_score": q[1], "messages": q[2], **(q[3] if len(q) > 3 else {})}
                          for n, q in questions.items()},
            "errors": [], "review": []}


def _gradebook(tmp_path, rows: int = 3, lab: str = LAB):
    out = tmp_path / "out"
    with open_gradebook(out / "gradebook.db") as book:
        for i in range(rows):
            path = tmp_path / f"s{i}.ipynb"
            book.record(lab, path.name, path, "0" * 64, _result(path, {"q": (float(i % 3), 2.0, [])}))
    return out


def test_the_cli_writes_the_page_the_summary_and_three_csv_layouts(tmp_path, capsys):
    out = _gradebook(tmp_path)
    assert main(["--root", str(ROOT), "report", str(out)]) == 0
    said = capsys.readouterr().out
    assert "3 submissions" in said
    for name in ("report.html", "report.md", "report-scores.csv", "report-canvas.csv", "report-moodle.csv"):
        assert (out / name).stat().st_size > 0, name
    html = tmp_path / "elsewhere" / "class.html"
    assert main(["--root", str(ROOT), "report", str(out / "gradebook.db"), "--html", str(html)]) == 0
    assert html.exists() and (tmp_path / "elsewhere" / "class-canvas.csv").exists()


def test_the_cli_names_what_to_pass_for_a_missing_or_mixed_gradebook(tmp_path, capsys):
    assert main(["--root", str(ROOT), "report", str(tmp_path / "nothing")]) == 2
    assert "no gradebook" in capsys.readouterr().err
    out = _gradebook(tmp_path)
    with open_gradebook(out) as book:
        book.record("lab06_multi_head_attention", "x.ipynb", tmp_path / "x.ipynb", "0" * 64,
                    _result(tmp_path / "x.ipynb", {"q": (1.0, 1.0, [])}))
    assert main(["--root", str(ROOT), "report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "several labs" in err and "--lab" in err
    assert main(["--root", str(ROOT), "report", str(out), "--lab", LAB]) == 0
    assert main(["--root", str(ROOT), "report", str(out), "--lab", LAB, "--threshold", "80"]) == 2
    assert "not a share" in capsys.readouterr().err


def _class_of(n: int, tmp_path):
    """``n`` gradebook rows, each a real lab05 notebook on disk: a base (variant set 0-3, renamed or not) with one
    catalogued mistake appended, its question failed with the mistake's hint."""
    from attnlab.demo import with_entry
    from attnlab.grading.core.mutants import load_catalogue

    mutants, variants = load_catalogue(ROOT / "instructor" / LAB / "catalogue.py")
    template = ROOT / "labs" / LAB / f"{LAB}.ipynb"
    rng = random.Random(0)
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    with open_gradebook(out) as book:
        for i in range(n):
            m = mutants[i % len(mutants)]
            code = variants_code(variants, rng.randrange(4))
            code = renamed(code) if rng.random() < 0.5 else code
            nb = with_entry(template, type("E", (), {"source": code + "\n\n" + m.source.strip()}))
            path = subs / f"student{i:04d}.ipynb"
            path.write_text(json.dumps(nb))  # nbformat.write validates: 10x slower, and these are valid
            questions = {q: (2.0, 2.0, ["passed: t"]) for q in ("simple_self_attention", "causal_mask")}
            questions[m.question] = (0.0, 2.0, [f"failed: {m.question}_test: off by {i}", f"likely mistake: {m.hint}"],
                                     diagnosed(m.hint, f"{m.question}_test", entry=m.name))
            book.record(LAB, path.name, path, hashlib.sha256(path.read_bytes()).hexdigest(),
                        _result(path, questions, elapsed=rng.uniform(5, 15)))
    return out, mutants


@pytest.mark.slow
def test_a_report_of_500_rows_takes_under_30_seconds(tmp_path):
    out, mutants = _class_of(500, tmp_path)
    start = time.monotonic()
    done = build_report(out, mutants=mutants, template=ROOT / "labs" / LAB / f"{LAB}.ipynb")
    seconds = time.monotonic() - start
    print(f"report of 500 rows: {seconds:.1f} s (build_report, loaded machine), {len(done.report.pairs)} pairs")
    assert seconds < 30, seconds
    assert done.html == out.parent / "report.html"  # beside the gradebook file, never in the current folder
    assert done.report.compared == 500 and len(done.report.submissions) == 500
    assert sum(m.count for m in done.report.mistakes) == 500
