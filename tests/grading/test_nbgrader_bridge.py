"""The nbgrader bridge finds the student's notebook in the folder nbgrader executes it in, or refuses: never
hidden tests run against an empty notebook (issue 30)."""

import json

import pytest

from attnlab.grading.bridges.nbgrader_bridge import NotebookUnclear, read_student_notebook

LAB = "lab05_self_attention"


def _notebook(path, source):
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                                           "execution_count": None}]}))
    return path


def test_the_labs_notebook_is_the_one_graded_beside_other_notebooks(tmp_path):
    _notebook(tmp_path / f"{LAB}.ipynb", "x = 1\n")
    _notebook(tmp_path / "scratch.ipynb", "y = 2\n")
    data, code, _ = read_student_notebook(LAB, tmp_path)
    assert data == (tmp_path / f"{LAB}.ipynb").read_bytes() and "x = 1" in code and "y = 2" not in code


def test_the_only_notebook_is_graded_whatever_its_name(tmp_path):
    _notebook(tmp_path / "renamed.ipynb", "x = 1\n")
    assert "x = 1" in read_student_notebook(LAB, tmp_path)[1]


@pytest.mark.parametrize("names", [[], ["a.ipynb", "b.ipynb"]])
def test_a_folder_that_does_not_say_which_notebook_is_refused_with_a_message(tmp_path, names):
    for name in names:
        _notebook(tmp_path / name, "x = 1\n")
    with pytest.raises(NotebookUnclear) as refused:
        read_student_notebook(LAB, tmp_path)
    said = str(refused.value)
    assert f"holds {len(names)} notebooks" in said and f"Submit exactly one notebook, {LAB}.ipynb" in said


def test_an_unreadable_notebook_is_refused_not_graded_as_empty(tmp_path):
    (tmp_path / f"{LAB}.ipynb").write_text("{not json")
    with pytest.raises(NotebookUnclear, match=f"could not read {LAB}.ipynb"):
        read_student_notebook(LAB, tmp_path)
