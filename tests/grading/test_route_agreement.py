"""One notebook, one grade, on every route: `attnlab grade`, the Gradescope zip's `run_autograder`, plain `otter run`
and nbgrader's `autograde` + `export` give each question the same score, to 0.01, and name the same likely mistakes
(benchmarks/route_agreement.py grades every catalogue mutant of every lab the same way).

The sample: one notebook per lab (``route_agreement.sample_notebook``): the solution, with the questions taking turns
as answered, mistaken (a catalogue mutant) and not written (the blank notebook's stub), all graded at once (one
built course, one Otter process, one nbgrader course folder and `autograde` for every lab). lab05's and lab09's
samples put the mistake in a helper that other questions call (graded on the reference's helper on every route, so
the mistake costs its own question only); lab05's is a forbidden library call, which costs the whole question whose
code holds it and no other. lab06 also grades a notebook that redefines a graded name further down (the solution and,
after `merge_heads`' check cell, a cell redefining `split_heads` and `merge_heads` as plain reshapes): every route
grades the notebook's last definition of each name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import benchmark_scripts
import pytest

from attnlab.course import load_course
from attnlab.grading.core.mutants import Entry, load_catalogue

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (Path(sys.executable).parent / "nbgrader").exists()
                                 or not (Path(sys.executable).parent / "otter").exists(),
                                 reason="otter and nbgrader are not installed (pip install -e '.[instructor]')")]


def _harness():
    return benchmark_scripts.load("route_agreement")


RA = _harness()
LABS = list(load_course(ROOT).labs)
FORBIDDEN_SDPA = Entry("sdpa_library_call", *RA.FORBIDDEN["lab05_self_attention"])
# lab -> the question whose answer is mistaken, how, and the questions that keep full marks (graded on the reference's
# version of it; lab09's generate on the student's own model, whose cache the mistake breaks)
CHOSEN = {"lab05_self_attention": ("scaled_dot_product_attention", FORBIDDEN_SDPA,
                                   ["SelfAttention", "AttentionClassifier"]),
          "lab09_mini_gpt": ("CausalSelfAttention", "csa_no_scale", ["GPTBlock", "MiniGPT", "generate"])}
# lab -> a mutant whose cell, after a later question's answer, also redefines an earlier question's name, and that name
REDEFINED = {"lab06_multi_head_attention": ("merge_split_inverse_reshapes", "split_heads")}


def _chosen(lab, mutants) -> dict:
    if lab.id not in CHOSEN:
        return {}
    question, how, isolated = CHOSEN[lab.id]
    entry = how if isinstance(how, Entry) else next(m for m in mutants if m.name == how)
    return {question: entry, **dict.fromkeys(isolated, "solution")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every lab's sample notebook graded on the four routes: ``(table, figures, roles, full marks)``."""
    tmp = tmp_path_factory.mktemp("routes")
    notebooks, roles, full = {}, {}, {}
    for lab in LABS:
        mutants = load_catalogue(lab.catalogue)[0] if lab.catalogue.exists() else []
        questions = json.loads((lab.autograder_dir / "manifest.json").read_text())["questions"]
        nb, roles[lab.id] = RA.sample_notebook(lab, mutants, list(questions), _chosen(lab, mutants))
        (tmp / lab.id).mkdir()
        (tmp / lab.id / "sample.ipynb").write_text(json.dumps(nb))
        notebooks[lab] = {"sample": tmp / lab.id / "sample.ipynb"}
        if lab.id in REDEFINED:
            entry = next(m for m in mutants if m.name == REDEFINED[lab.id][0])
            redefined = RA.with_mutant(json.loads(lab.solution_notebook.read_text()), entry)
            (tmp / lab.id / "redefined.ipynb").write_text(json.dumps(redefined))
            notebooks[lab]["redefined"] = tmp / lab.id / "redefined.ipynb"
        full[lab.id] = questions
    table, figures = RA.grade_routes(notebooks, tmp / "work")
    print(json.dumps({k: figures[k] for k in ("build_s", "seconds", "per_notebook")}))
    return table, figures, roles, full


@pytest.mark.parametrize("lab_id", [lab.id for lab in LABS])
def test_every_route_gives_every_question_the_same_score_and_hint(graded, lab_id):
    table, figures, roles, full = graded
    print(RA.markdown(lab_id, table[lab_id]))
    assert not RA.disagreements(table[lab_id], figures["hints"][lab_id]), RA.markdown(lab_id, table[lab_id])
    ours = table[lab_id]["sample"]["attnlab grade"]
    assert set(ours) == set(full[lab_id])
    for question, role in roles[lab_id].items():
        if role == "stub":  # not written: 0 on every route
            assert ours[question] == 0.0, (question, ours)
    assert any(r == "solution" for r in roles[lab_id].values()) and any(r == "stub" for r in roles[lab_id].values())


@pytest.mark.parametrize("lab_id", sorted(CHOSEN))
def test_a_helpers_mistake_costs_its_own_question_only(graded, lab_id):
    table, _, roles, full = graded
    ours = table[lab_id]["sample"]["attnlab grade"]
    question, _, isolated = CHOSEN[lab_id]
    assert {q: ours[q] for q in isolated} == {q: full[lab_id][q] for q in isolated}
    if lab_id == "lab05_self_attention":  # the forbidden call costs the whole question it is written in
        assert ours[question] == 0.0
    else:
        assert 0.0 <= ours[question] < full[lab_id][question]


@pytest.mark.parametrize("lab_id", sorted(REDEFINED))
def test_every_route_grades_the_last_definition_of_a_redefined_name(graded, lab_id):
    """The mutant's cell comes after the check cell of the earlier question it also redefines (`split_heads`): a
    route that graded the definition alive at that check cell would give it full marks."""
    table, _, _, full = graded
    rows = table[lab_id]["redefined"]
    ours = rows["attnlab grade"]
    earlier = REDEFINED[lab_id][1]
    assert ours[earlier] < full[lab_id][earlier], ours  # its last definition is the wrong reshape
    for route, scores in rows.items():
        assert {q: round(s, 2) for q, s in scores.items()} == {q: round(s, 2) for q, s in ours.items()}, \
            (route, RA.markdown(lab_id, {"redefined": rows}))


def test_a_likely_mistake_is_named_on_otter_and_nbgrader_too(graded):
    _, figures, roles, _ = graded
    named = {(lab_id, q) for lab_id, by_route in figures["hints"].items()
             for q in by_route["sample"]["attnlab grade"]}
    assert named, "no sample notebook got a likely mistake named: the check cannot fail"
    for lab_id, q in named:
        for route in ("otter run", "nbgrader", "gradescope zip"):
            assert figures["hints"][lab_id]["sample"][route].get(q) == \
                figures["hints"][lab_id]["sample"]["attnlab grade"][q], (lab_id, q, route)
