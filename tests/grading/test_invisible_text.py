"""Invisible characters in student-derived names and text are shown visibly in every output a person reads: the
terminal table, feedback.md, results.json (Gradescope), the gradebook CSV, and the report's page, Markdown and its
three CSVs (plain, Canvas, Moodle). Escaping follows Unicode categories (safe_text.is_invisible), so
``alice\\u200b.ipynb`` never reads as ``alice.ipynb``."""

from __future__ import annotations

import html
import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest

from attnlab.grading.outputs.score_table import score_table
from attnlab.grading.scale.batch import grade_batch
from attnlab.records.safe_text import escape_controls, for_csv, for_terminal, is_invisible, markdown_inline
from attnlab.report import build_report
from attnlab.report.gradebook_csv import export_gradebook

INVISIBLE = ["\u200b", "\u2060", "\ufeff", "\u061c", "\u202a", "\u202e", "\u2066", "\u2069", "\u200d", "\u00ad",
             "\u3164", "\ufe0f", "\U000e0041", "\u00a0", "\u2028", "\x85", "\x1b", "\r"]
NAMES = ["alice\u200b.ipynb", "bob\u2060\ufeff.ipynb", "carol\u061c\u202e.ipynb", "dave\u2066x\u2069.ipynb",
         "erin\u3164\ufe0f\U000e0041.ipynb"]
SHOWN = {"alice\u200b.ipynb": "alice<U+200B>.ipynb", "bob\u2060\ufeff.ipynb": "bob<U+2060><U+FEFF>.ipynb",
         "carol\u061c\u202e.ipynb": "carol<U+061C><U+202E>.ipynb", "dave\u2066x\u2069.ipynb": "dave<U+2066>x<U+2069>.ipynb",
         "erin\u3164\ufe0f\U000e0041.ipynb": "erin<U+3164><U+FE0F><U+E0041>.ipynb"}


def _hidden(text: str) -> list[str]:
    """The characters of ``text`` that a person would not see (none may be left in an output)."""
    return [f"U+{ord(c):04X}" for c in text if c not in "\t\n " and (
        unicodedata.category(c) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"} or is_invisible(c))]


@pytest.mark.parametrize("ch", INVISIBLE)
def test_every_invisible_character_is_shown_by_its_code_point(ch):
    for shown in (for_terminal(f"a{ch}b"), for_csv(f"a{ch}b"), escape_controls(f"a{ch}b"), markdown_inline(f"a{ch}b")):
        code = f"\\x{ord(ch):02x}" if ord(ch) < 0xa0 else f"U+{ord(ch):04X}"
        assert ch not in shown and code in shown.replace("U\\+", "U+"), shown  # markdown_inline escapes +
    assert escape_controls("é 日本 ok\ttab\nline") == "é 日本 ok\ttab\nline"  # visible text stays as it is


def _grade(lab, path):
    name = Path(path).name
    return {"submission": str(path), "score": 1.0, "max_score": 2.0, "isolation": "fake", "elapsed_s": 0.1,
            "questions": {"softmax": {"score": 1.0, "max_score": 2.0, "messages": [f"failed: t: in {name}"]}},
            "errors": [f"{name}: a cell failed"], "review": [f"{name} imports os"]}


@pytest.mark.skipif(sys.platform != "linux", reason="file names with these characters")
def test_invisible_characters_in_file_names_are_visible_in_every_output(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in NAMES:
        (subs / name).write_text(json.dumps({"answers": {}}))
    summary = grade_batch("lab05_self_attention", [subs], out_dir=out, grade_fn=_grade, progress=False)
    assert summary.graded == len(NAMES)
    outputs = {"table": score_table(summary.results)}
    for path in sorted(out.rglob("*")):
        if path.suffix in (".md", ".json"):
            outputs[str(path.relative_to(out))] = path.read_text(encoding="utf-8")
    export_gradebook(out, tmp_path / "grades.csv")
    outputs["gradebook csv"] = (tmp_path / "grades.csv").read_text(encoding="utf-8")
    done = build_report(out, html=tmp_path / "report" / "report.html")
    for path in [done.html, done.markdown, *done.csv.values()]:
        outputs[path.name] = path.read_text(encoding="utf-8")
    assert {"report.html", "report.md", "report-scores.csv", "report-canvas.csv", "report-moodle.csv"} <= set(outputs)
    assert sum(name.endswith("feedback.md") for name in outputs) == len(NAMES)
    assert sum(name.endswith("results.json") for name in outputs) == len(NAMES)
    for where, text in outputs.items():
        assert not _hidden(text), (where, _hidden(text))
        assert "alice.ipynb" not in text and not re.search(r"\balice\.ipynb|\balice,", text), where
    for name, shown in SHOWN.items():
        assert shown in outputs["table"] and shown in outputs["gradebook csv"] and shown in outputs["report-scores.csv"]
        assert html.escape(shown) in outputs["report.html"] and markdown_inline(name) in outputs["report.md"]
        assert Path(shown).stem in outputs["report-canvas.csv"] and Path(shown).stem in outputs["report-moodle.csv"]
    feedback = next(text for where, text in outputs.items() if where.endswith("feedback.md") and "alice" in text)
    assert feedback.startswith("# Feedback: alice&lt;U\\+200B&gt;\\.ipynb")
