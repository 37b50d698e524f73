"""What students read when they are wrong names the property and the idea, never a line of the solution: every
catalogue hint (shown as "likely mistake: ...") and every literal public-check message of the masters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "instructor").glob("lab*/catalogue.py")) + sorted((ROOT / "instructor").glob("lab*/lab*.py"))
# code a student could paste: a slice (x[:, 1:]), a reshaping or masking call with its arguments, an assignment
# of an attribute path (self.a.weight = self.b.weight)
REMARK = re.compile(r" \(([^()]*(\([^()]*\))?[^()]*)\)$")  # "name of the value (the remark)": the remark only
SOLUTION_CODE = re.compile(r"\w\[[^\]]*:[^\]]*\]"
                           r"|\b(view|reshape|transpose|permute|tril|triu|clamp_min|chunk|unsqueeze)\(\S|\.(sum|norm)\(\S"
                           r"|\b\w+(\.\w+)* = \w+\.\w+")


def student_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each hint= string and each literal assert or expect_* message in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        value = None
        if isinstance(node, ast.keyword) and node.arg == "hint":
            value = node.value
        elif isinstance(node, ast.Assert):
            value = node.msg
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "").startswith("expect_") and len(node.args) > 2:
            value = node.args[2]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):  # the value's name is its input
                remark = REMARK.search(value.value)
                found.append((node.lineno, remark.group(1) if remark else ""))
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append((node.lineno, value.value))
    return found


def test_the_code_pattern_catches_the_hints_this_issue_quoted():
    for dictated in ["view as (B, n, h, d_h) first, then transpose(1, 2)", "the word AFTER dec_in[t], tgt[:, 1:]",
                     "self.lm_head.weight = self.tok_emb.weight", "divide by norm.clamp_min(1e-12)",
                     "(counts > 0).sum(0)"]:
        assert SOLUTION_CODE.search(dictated), dictated
    for idea in ["the head axis must come right after the batch axis, (B, h, n, d_h)", "lengths[b] - 1",
                 "softmax(q k^T / sqrt(d))",
                 "post-norm is norm(x + sublayer(x))"]:
        assert not SOLUTION_CODE.search(idea), idea


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name[:5]}/{p.name}")
def test_no_hint_or_public_message_dictates_a_line_of_the_solution(path):
    assert student_texts(path), f"{path}: no hint or message found (the reader is broken)"
    dictated = [f"line {line}: {text}" for line, text in student_texts(path) if SOLUTION_CODE.search(text)]
    assert not dictated, ("these name the code instead of the property; say what must hold and the idea:\n"
                          + "\n".join(dictated))
