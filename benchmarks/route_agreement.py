"""One notebook, one grade, on every route: grade notebooks through `attnlab grade`, the kit's Gradescope zip
(`run_autograder` in a scratch folder laid out as Gradescope's /autograder), plain Otter (`otter run -a <lab>-otter.zip`:
Otter's own ``otter.run.main``, in one process for all notebooks so that Otter is imported once) and nbgrader's
`autograde` (one course folder for every lab, one `generate_assignment`, `autograde` and `export` for all; the
gradebook's score of each test cell, the total from `nbgrader export`), and compare the per-question scores of the
code questions and the likely mistakes named.

    python benchmarks/route_agreement.py [--labs lab05_self_attention,...] [--limit N] [--out table.md]
    python benchmarks/route_agreement.py --table       # lab05 and lab09: a solution, a wrong helper, a forbidden call

Without --labs: every lab. The notebooks of a lab: its solution, its blank student notebook and each catalogue mutant
(the solution with one more cell after the question's answer, redefining it as the mutant does); --limit keeps the
first N mutants. Prints a Markdown table per lab (each route's per-question scores, the totals) and one JSON line
of figures (each route's seconds, in all and per notebook); exits 1 when any route disagrees with `attnlab grade` by
more than 0.01 on any question, or names other likely mistakes. tests/grading/test_route_agreement.py runs the same
on a sample per lab (``sample_notebook``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ROUTES = ("attnlab grade", "gradescope zip", "otter run", "nbgrader")
INSTALL = "attnlab @ git+https://example.invalid/course"  # a Gradescope zip is built only with an address
TOLERANCE = 0.01


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _answer_at(nb: dict, question: str) -> int:
    head = (f"def {question}", f"class {question}")
    return next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {})
                .get("solution") and any(line.startswith(head) for line in _text(c).split("\n")))


def with_cells(solution: dict, added: dict[str, str]) -> dict:
    """The solution notebook plus, right after the answer cell of each question of ``added``, one cell holding
    its code (redefining the question's names)."""
    nb = json.loads(json.dumps(solution))
    for n, (question, source) in enumerate(added.items()):
        nb["cells"].insert(_answer_at(nb, question) + 1, {
            "cell_type": "code", "execution_count": None, "id": f"route-sample-{n}", "metadata": {}, "outputs": [],
            "source": source.strip()})
    return nb


def with_mutant(solution: dict, entry) -> dict:
    """The solution notebook plus one cell, right after the answer cell of the entry's question, holding its code."""
    return with_cells(solution, {entry.question: entry.source})


def stub_of(lab, question: str) -> str:
    """The student notebook's answer cell for ``question``: its code as handed out (``not written yet``)."""
    blank = json.loads(lab.student_notebook.read_text())
    return _text(blank["cells"][_answer_at(blank, question)])


def _defines(source: str) -> set[str]:
    """The top-level names a mutant's source defines (``def``/``class``)."""
    return set(re.findall(r"^(?:def|class)\s+(\w+)", source.strip(), re.M))


def sample_notebook(lab, mutants, questions: list[str], chosen: dict | None = None) -> tuple[dict, dict]:
    """One notebook that samples a lab: the solution, with the questions taking turns (in the manifest's order)
    as answered (the solution's code), mistaken (the first of ``mutants``, the catalogue's, for the question that
    redefines that question only, so that each mistake is its own question's; a cell redefining an earlier
    question's names too is graded on its last definition on every route, tests/grading/test_route_agreement.py) and
    not written (the blank notebook's stub). ``chosen``: question -> an ``Entry`` or ``"solution"``, instead of
    its turn. Returns the notebook and ``{question: "solution" | "stub" | entry name}``."""
    solution = json.loads(lab.solution_notebook.read_text())
    roles, added = {}, {}
    for i, question in enumerate(questions):
        pick = (chosen or {}).get(question)
        first = next((m for m in mutants if m.question == question and _defines(m.source) <= {question}), None)
        if pick is None:
            pick = ("solution", first or "solution", "stub")[i % 3]
        if pick == "stub":
            roles[question], added[question] = "stub", stub_of(lab, question)
        elif pick != "solution":
            roles[question], added[question] = pick.name, pick.source
        else:
            roles[question] = "solution"
    return with_cells(solution, added), roles


def build_repo(labs, folder: Path) -> Path:
    """``nbgrader/`` (one course folder for all ``labs``) and ``autograder/<lab>/`` (with both zips) as
    `attnlab build` writes them, under ``folder``."""
    from attnlab.buildchain.pipeline import build_lab
    from attnlab.course import load_course

    kit = dataclasses.replace(load_course(ROOT), install_spec=INSTALL)
    for lab in labs:
        for path, data in build_lab(kit, lab).items():
            rel = path.relative_to(ROOT)
            if rel.parts[0] in ("nbgrader", "autograder"):
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
    return folder


HINT = "likely mistake: "


def _hints(text: str) -> list[str]:
    """The likely mistakes a route's feedback names (``likely mistake: <hint>`` lines, bulleted or not)."""
    return sorted({line.split(HINT, 1)[1].strip() for line in text.split("\n") if HINT in line})


def _from_tests(tests: list[dict], questions) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Per question: the score (Gradescope's and Otter's results.json: one test per question or per hidden test,
    named after the question) and the likely mistakes its outputs name."""
    scores: dict[str, float] = {}
    hints: dict[str, list[str]] = {}
    for t in tests:
        name = str(t.get("name", ""))
        question = name if name in questions else name.split(" - ")[0].split(".")[0].split(":")[0].strip()
        if question not in questions:
            continue
        scores[question] = scores.get(question, 0.0) + float(t.get("score") or 0.0)
        found = _hints(str(t.get("output", "")))
        if found:
            hints[question] = sorted(set(hints.get(question, [])) | set(found))
    return scores, hints


def grade_attnlab(bundle: Path, notebook: Path) -> tuple[dict[str, float], dict[str, list[str]]]:
    from attnlab.grading.runner import grade_submission

    questions = json.loads((bundle / "manifest.json").read_text())["questions"]  # the code questions
    result = grade_submission(bundle, notebook)["questions"]
    return ({q: r["score"] for q, r in result.items() if q in questions},
            {q: _hints("\n".join(r["messages"])) for q, r in result.items() if q in questions
             and _hints("\n".join(r["messages"]))})


def grade_gradescope(bundle: Path, notebook: Path, work: Path, questions):
    root = work / "autograder"
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(bundle / f"{bundle.name}-gradescope.zip") as zf:
        zf.extractall(root / "source")
    for name in ("run_autograder", "setup.sh"):
        os.chmod(root / "source" / name, 0o755)
    shutil.copy(notebook, root / "submission" / notebook.name)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), ATTNLAB_PYTHON=sys.executable)
    proc = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"run_autograder failed: {proc.stderr[-2000:]}")
    return _from_tests(json.loads((root / "results" / "results.json").read_text())["tests"], questions)


def _otter_jobs(path: str) -> None:
    """In one process (Otter imported once): ``otter.run.main`` on each job of the JSON file at ``path`` (as
    `otter run -a ZIP NOTEBOOK -o OUT` does), writing each one's seconds beside its results.json."""
    import otter.run

    for job in json.loads(Path(path).read_text()):
        start = time.monotonic()
        cwd = os.getcwd()
        try:
            otter.run.main(job["notebook"], autograder=job["zip"], output_dir=job["out"], no_logo=True)
        finally:
            os.chdir(cwd)
        Path(job["out"], "seconds").write_text(f"{time.monotonic() - start:.3f}")


def grade_otter_all(jobs: list[tuple[Path, Path, Path]], questions_of) -> list[tuple[tuple, float]]:
    """``[((scores, hints), seconds)]`` of plain Otter on each ``(bundle, notebook, work)``, all in one process."""
    listed = []
    for bundle, notebook, work in jobs:
        work.mkdir(parents=True)
        shutil.copy(notebook, work / notebook.name)
        listed.append({"zip": str(bundle / f"{bundle.name}-otter.zip"), "notebook": str(work / notebook.name),
                       "out": str(work)})
    (jobs[0][2].parent / "otter-jobs.json").write_text(json.dumps(listed))
    proc = subprocess.run([sys.executable, __file__, "--otter-jobs", str(jobs[0][2].parent / "otter-jobs.json")],
                          capture_output=True, text=True, timeout=600 + 300 * len(jobs))
    if proc.returncode != 0:
        raise RuntimeError(f"otter run failed: {proc.stdout[-1000:]}\n{proc.stderr[-2000:]}")
    return [(_from_tests(json.loads((work / "results.json").read_text())["tests"], questions_of(bundle)),
             float((work / "seconds").read_text())) for bundle, _, work in jobs]


def _nbgrader(course: Path, *args: str) -> str:
    proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout + proc.stderr


def _cell_hints(course: Path, lab: str, student: str) -> dict[str, list[str]]:
    """The likely mistakes named in the outputs of each test cell (``test_<question>``) nbgrader autograded."""
    nb = json.loads((course / "autograded" / student / lab / f"{lab}.ipynb").read_text())
    out = {}
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        text = "".join(str(o.get("text", "")) + json.dumps(o.get("data", {})) for o in cell.get("outputs", []))
        if grade_id.startswith("test_") and _hints(text.replace("\\n", "\n")):
            out[grade_id[len("test_"):]] = _hints(text.replace("\\n", "\n"))
    return out


def grade_nbgrader(course: Path, notebooks: dict[str, dict[str, Path]], questions_of) -> dict[str, dict]:
    """``{lab: {notebook: (scores, hints)}}``: every lab's notebooks in one `nbgrader autograde` (each lab an
    assignment, each notebook a student); each question's score is its test cell's grade (``test_<q>``), and their
    sum must be the code part of `nbgrader export`'s score."""
    from nbgrader.api import Gradebook

    for lab, named in notebooks.items():
        for student, path in named.items():
            (course / "submitted" / student / lab).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, course / "submitted" / student / lab / f"{lab}.ipynb")
    _nbgrader(course, "generate_assignment", "*", "--force")
    _nbgrader(course, "autograde", "*", "--create", "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        totals = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    out: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lab, named in notebooks.items():
            questions = questions_of(course.parent / "autograder" / lab)
            for student in named:
                scores = {q: float(gb.find_grade(f"test_{q}", lab, lab, student).score) for q in questions}
                if abs(sum(scores.values()) - totals[lab, student]) > TOLERANCE:
                    raise RuntimeError(f"nbgrader export's total {totals[lab, student]} for {student} in {lab} is "
                                       f"not the sum of its test cells {scores}")
                out.setdefault(lab, {})[student] = (scores, _cell_hints(course, lab, student))
    return out


def notebooks_of(lab, folder: Path, limit: int | None = None, names=None) -> dict[str, Path]:
    """The solution, the blank notebook and the catalogue mutants (``names``: only these; ``limit``: the first N)."""
    from attnlab.grading.core.mutants import load_catalogue

    folder.mkdir(parents=True, exist_ok=True)
    out = {"solution": folder / "solution.ipynb", "blank": folder / "blank.ipynb"}
    shutil.copy(lab.solution_notebook, out["solution"])
    shutil.copy(lab.student_notebook, out["blank"])
    solution = json.loads(lab.solution_notebook.read_text())
    mutants = load_catalogue(lab.catalogue)[0] if lab.catalogue.exists() else []
    mutants = [m for m in mutants if names is None or m.name in names][:limit]
    for entry in mutants:
        out[entry.name] = folder / f"{entry.name}.ipynb"
        out[entry.name].write_text(json.dumps(with_mutant(solution, entry)))
    return out


def questions_of(bundle: Path) -> dict[str, float]:
    """The code questions of a built lab and their points (its manifest)."""
    return json.loads((Path(bundle) / "manifest.json").read_text())["questions"]


def grade_routes(labs_notebooks: dict, work: Path) -> tuple[dict, dict]:
    """``labs_notebooks``: ``{lab: {notebook name: path}}`` (``lab``: the course's ``Lab``). Returns
    ``({lab id: {notebook: {route: {question: score}}}}, figures)``: figures hold the build's seconds and, per
    route, the seconds in all and per notebook (nbgrader's: its three commands' wall over the notebooks), and
    ``hints``: ``{lab id: {notebook: {route: {question: [likely mistakes]}}}}``."""
    start = time.monotonic()
    repo = build_repo(list(labs_notebooks), work / "repo")
    figures: dict = {"build_s": round(time.monotonic() - start, 2), "seconds": dict.fromkeys(ROUTES, 0.0),
                     "per_notebook": {}, "hints": {}}
    table: dict[str, dict] = {lab.id: {name: {} for name in named} for lab, named in labs_notebooks.items()}

    def put(lab_id, name, route, graded, seconds):
        table[lab_id][name][route] = graded[0]
        figures["hints"].setdefault(lab_id, {}).setdefault(name, {})[route] = graded[1]
        figures["seconds"][route] += seconds
        figures["per_notebook"].setdefault(f"{lab_id}/{name}", {})[route] = round(seconds, 2)

    jobs = []
    for lab, named in labs_notebooks.items():
        bundle = repo / "autograder" / lab.id
        for name, path in named.items():
            for route in ROUTES[:2]:
                start = time.monotonic()
                graded = (grade_attnlab(bundle, path) if route == "attnlab grade" else
                          grade_gradescope(bundle, path, work / "gradescope" / lab.id / name, questions_of(bundle)))
                put(lab.id, name, route, graded, time.monotonic() - start)
            jobs.append((lab.id, name, (bundle, path, work / "otter" / f"{lab.id}-{name}")))
    for (lab_id, name, _), (graded, seconds) in zip(jobs, grade_otter_all([j[2] for j in jobs], questions_of)):
        put(lab_id, name, "otter run", graded, seconds)
    start = time.monotonic()
    graded = grade_nbgrader(repo / "nbgrader", {lab.id: named for lab, named in labs_notebooks.items()}, questions_of)
    each = (time.monotonic() - start) / max(1, sum(len(named) for named in graded.values()))
    for lab_id, named in graded.items():
        for name, result in named.items():
            put(lab_id, name, "nbgrader", result, each)
    figures["seconds"] = {r: round(s, 1) for r, s in figures["seconds"].items()}
    return table, figures


def disagreements(table: dict, hints: dict | None = None) -> list[str]:
    """One line per notebook, route and question whose score differs from `attnlab grade`'s by more than 0.01
    (``table``: one lab's ``{notebook: {route: scores}}``), or, with ``hints`` (the lab's ``{notebook: {route:
    {question: hints}}}``), whose likely mistakes are not those `attnlab grade` names."""
    out = []
    for name, routes in table.items():
        ours = routes["attnlab grade"]
        for route, scores in routes.items():
            for q, score in ours.items():
                if q not in scores or abs(scores[q] - score) > TOLERANCE:
                    out.append(f"{name}: {route} gives {q} {scores.get(q)}, attnlab grade {score}")
        for route, named in (hints or {}).get(name, {}).items():
            if named != hints[name]["attnlab grade"]:
                out.append(f"{name}: {route} names the likely mistakes {named}, attnlab grade "
                           f"{hints[name]['attnlab grade']}")
    return out


def markdown(lab: str, table: dict) -> str:
    """The route-by-route table: a row per notebook and route, a column per question, and the total."""
    questions = list(next(iter(table.values()))["attnlab grade"])
    lines = [f"### {lab}", "", "| notebook | route | " + " | ".join(questions) + " | total |",
             "|" + " --- |" * (len(questions) + 3)]
    for name, routes in table.items():
        for route in ROUTES:
            scores = routes.get(route, {})
            cells = [f"{scores[q]:g}" if isinstance(scores.get(q), float) else "-" for q in questions]
            total = sum(v for v in scores.values() if isinstance(v, float))
            lines.append(f"| {name} | {route} | " + " | ".join(cells) + f" | {total:g} |")
    return "\n".join(lines) + "\n"


# The table: per lab, a wrong helper (a catalogue mutant) and a forbidden library call in a question's code.
FORBIDDEN = {
    "lab05_self_attention": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
"""),
}
TABLE = {"lab05_self_attention": "sdpa_no_scale", "lab09_mini_gpt": "csa_no_scale"}


def table_notebooks(lab, folder: Path) -> dict[str, Path]:
    """The issue's table for ``lab``: its solution, its wrong helper (``TABLE``) and its forbidden call."""
    from attnlab.grading.core.mutants import Entry

    out = notebooks_of(lab, folder, names={TABLE[lab.id]})
    out.pop("blank")
    if lab.id in FORBIDDEN:
        question, source = FORBIDDEN[lab.id]
        entry = Entry("forbidden_call", question, source)
        out[entry.name] = folder / "forbidden_call.ipynb"
        out[entry.name].write_text(json.dumps(with_mutant(json.loads(lab.solution_notebook.read_text()), entry)))
    return out


def main(argv=None) -> int:
    from attnlab.course import load_course

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--labs", default="", help="comma-separated lab ids (default: every lab)")
    p.add_argument("--limit", type=int, default=None, help="the first N catalogue mutants of each lab")
    p.add_argument("--table", action="store_true", help="only the issue's table: lab05 and lab09, a solution, a "
                   "wrong helper and a forbidden call")
    p.add_argument("--out", default="", help="also write the Markdown tables here")
    p.add_argument("--otter-jobs", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.otter_jobs:
        _otter_jobs(args.otter_jobs)
        return 0
    wanted = sorted(TABLE) if args.table else args.labs.split(",") if args.labs else None
    labs = [lab for lab in load_course(ROOT).labs if wanted is None or lab.id in wanted]
    with tempfile.TemporaryDirectory(prefix="attnlab-routes-") as tmp:
        make = table_notebooks if args.table else lambda lab, folder: notebooks_of(lab, folder, args.limit)
        table, figures = grade_routes({lab: make(lab, Path(tmp) / "notebooks" / lab.id) for lab in labs}, Path(tmp))
    tables = [markdown(lab_id, rows) for lab_id, rows in table.items()]
    wrong = [f"{lab_id}/{line}" for lab_id, rows in table.items()
             for line in disagreements(rows, figures["hints"].get(lab_id))]
    print("\n".join(tables), flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(tables))
    print(json.dumps({"figures": figures, "disagreements": wrong}))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
