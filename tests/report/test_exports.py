"""Score CSVs in the plain, Canvas and Moodle layouts; text cells never run as formulas."""

from __future__ import annotations

import csv

from attnlab.report import compute
from attnlab.report.exports import write_all

from .rows import sub


def _read(path):
    return list(csv.reader(path.open(newline="")))


def _subs():
    return [sub("=HYPERLINK(1).ipynb", {"q1": (1.5, 2.0, []), "q2": (0.0, 3.0, [])}, errors=["-oops"]),
            sub("bob.ipynb", {"q1": (2.0, 2.0, [])})]


def test_three_layouts_with_points_and_numbers(tmp_path):
    paths = write_all(compute("lab05", _subs(), figures=False), tmp_path / "report")
    plain, canvas, moodle = (_read(paths[k]) for k in ("scores", "canvas", "moodle"))
    assert plain[0] == ["submission", "score", "max_score", "q1", "q2", "notes"]
    assert plain[1] == ["'=HYPERLINK(1).ipynb", "1.5", "5", "1.5", "0", "'-oops"]
    assert plain[2] == ["bob.ipynb", "2", "2", "2", "", ""]
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lab05: q1", "lab05: q2",
                         "lab05: total"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "2", "3", "5"]
    assert canvas[3] == ["bob", "", "", "bob", "", "2", "", "2"]
    assert canvas[2][0] == canvas[2][3] == "'=HYPERLINK(1)"
    assert moodle[0][:6] == ["First name", "Last name", "ID number", "Institution", "Department", "Email address"]
    assert moodle[2] == ["bob", "", "bob", "", "", "", "2", "", "2"]


def test_anonymised_exports_use_the_aliases(tmp_path):
    report = compute("lab05", _subs(), figures=False, anonymise=True)
    paths = write_all(report, tmp_path / "r")
    for path in paths.values():
        text = path.read_text()
        assert "bob" not in text and "HYPERLINK" not in text and report.names("bob.ipynb") in text
