"""``attnlab build``: master -> student notebook, solution notebook, public checks, autograder, nbgrader source.

The chain, in order (each step is one file in ``transforms/``; the constraint that fixes its place beside it):

    read_master -> include_given              (fills "# GIVEN from labNN: names" cells from that lab's master)
      -> parse_questions                      (labels every cell; everything after reads the labels)
      -> replace_tests                        (needs the END TESTS markers, so before drop_marker_cells)
      -> drop_marker_cells -> insert_setup_cell
      -> answer_cells                         (a written question's reference becomes its one answer cell)
      -> hand_in_cell                         (the last cell: how to hand the lab in, on each route)
      -> nbgrader_cells                       (nbgrader's metadata, the same on every branch: so before they split)
      -> student:  strip_solutions (written answers: the placeholder) -> lock_cells -> normalize
                   -> add_checksums (on the final sources)
                   -> check_no_leak (against the master's solutions, the hidden tests and the catalogue; the
                   written questions' reference answers and rubrics; the public test files too)
      -> solution: remove_solution_markers -> normalize -> add_checksums
      -> nbgrader: nbgrader_source (nbgrader's solution markers) -> normalize
      -> autograder: reference_code (from the normalized solution) -> public_tests (+ hidden cases)
                     -> otter_zip -> gradescope_zip (hidden tests, reference, manifest, catalogue; only with an
                     install address: its setup.sh installs the kit from it)
      The autograder folder's files and names are grading/core/bundle.py's (``bundle_files``): the one owner. Its
      manifest lists the written questions (prompt, reference, rubric: ``bundle.written_questions`` reads them);
      they have no tests, so no test file, no public check and no hidden test.
      -> instructor README: readme_written (the written questions' prompts and rubrics, between its markers)

Builds are deterministic: no timestamps, fixed cell ids, outputs cleared, zips repacked.

Outputs made on demand (``on_demand``: the Otter and Gradescope zips, nbgrader's source notebooks) are not kept in
git (``.gitignore`` lists them): no grading command reads them, and ``attnlab build`` makes them in seconds, byte for
byte the same. ``--check`` compares them only where a local build left them. docs/ARCHITECTURE.md says why.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.gradescope_visibility import MANIFEST_KEY
from attnlab.grading.core.bundle import WRITTEN, WrittenQuestion, bundle_files
from attnlab.grading.core.hidden import load_suite
from attnlab.grading.core.mutants import load_catalogue
from attnlab.records.bundle_names import gradescope_zip_name, otter_zip_name

from ..course import Course, Lab, check_install_spec
from ..late_policy import deadline_to_config
from .lab_parts import missing_parts
from .masters import Masters
from .transforms.answer_cells import answer_cells
from .transforms.check_no_leak import check_no_leak
from .transforms.drop_marker_cells import drop_marker_cells
from .transforms.gradescope_zip import gradescope_zip
from .transforms.hand_in import hand_in_cell
from .transforms.include_given import include_given
from .transforms.insert_setup_cell import insert_setup_cell
from .transforms.lock_cells import lock_cells
from .transforms.nbgrader_cells import add_checksums, nbgrader_cells
from .transforms.nbgrader_source import nbgrader_config, nbgrader_source
from .transforms.normalize import normalize, notebook_bytes
from .transforms.otter_zip import otter_zip
from .transforms.parse_questions import MasterError, parse_questions
from .transforms.public_tests import public_test_files, render_test_file
from .transforms.readme_written import with_written_section, written_section
from .transforms.reference_code import reference_code
from .transforms.remove_solution_markers import remove_solution_markers
from .transforms.replace_tests import replace_tests
from .transforms.strip_solutions import strip_solutions


def build_lab(course: Course, lab: Lab, masters: Masters | None = None) -> dict[Path, bytes]:
    """Every output file of ``lab`` (absolute path -> bytes), computed in memory; ``masters``: the run's masters."""
    master = resolved_master(masters or Masters(course), lab.id)
    labelled, questions = parse_questions(master)
    code = [q for q in questions if not q.manual]
    written = {q.name: q.points for q in questions if q.manual}
    suite = load_suite(lab.hidden_tests)
    _check_questions(lab, [q.name for q in code], list(suite.questions()))
    _check_points(lab, {q.name: q.points for q in code}, suite.questions())

    common = nbgrader_cells(hand_in_cell(answer_cells(insert_setup_cell(drop_marker_cells(replace_tests(labelled)),
                                                                           lab_id=lab.id,
                                                                           install_spec=course.install_spec),
                                                         written), lab_id=lab.id),
                            lab_id=lab.id, points=suite.questions())
    student = add_checksums(normalize(lock_cells(strip_solutions(common)), lab_id=lab.id, kind="student"))
    public_files = public_test_files(code)
    entries = [e for group in load_catalogue(lab.catalogue) for e in group] if lab.catalogue.exists() else []
    check_no_leak(labelled, student, catalogue=entries, hidden_tests=lab.hidden_tests.read_text(),
                  public_files=public_files)
    solution = add_checksums(normalize(remove_solution_markers(common), lab_id=lab.id, kind="solution"))
    nbgrader = normalize(nbgrader_source(common), lab_id=lab.id, kind="nbgrader")

    ref = reference_code(solution, lab_id=lab.id).encode()
    ag_tests = {f"{q.name}.py": render_test_file(q, [(t.name, t.points) for t in suite.tests
                                                     if t.question == q.name]) for q in code}
    # every route names likely mistakes with the catalogue (grading/diagnosis/diagnose.py), plain Otter too (it already
    # holds the reference beside the student's code); plain Otter gets no written question's reference or rubric
    manifest = _manifest(lab, suite, [q for q in questions if q.manual])
    support = bundle_files(lab.id, hidden_tests=lab.hidden_tests.read_bytes(), reference=ref, manifest=manifest,
                           catalogue=lab.catalogue.read_bytes() if lab.catalogue.exists() else None)
    otter_support = bundle_files(lab.id, hidden_tests=lab.hidden_tests.read_bytes(), reference=ref,
                                 manifest={k: v for k, v in manifest.items() if k != WRITTEN},
                                 catalogue=lab.catalogue.read_bytes() if lab.catalogue.exists() else None)

    due_dates = {other.id: other.due.isoformat() for other in course.labs if other.due is not None}
    late = {other.id: deadline_to_config(other.deadline) for other in course.labs
            if other.due is not None and (other.late.active or other.extensions)}
    out: dict[Path, bytes] = {
        lab.student_notebook: notebook_bytes(student),
        lab.solution_notebook: notebook_bytes(solution),
        lab.nbgrader_source: notebook_bytes(nbgrader),
        course.root / "nbgrader" / "nbgrader_config.py": nbgrader_config(course.slug, due_dates, late).encode(),
        **{lab.autograder_dir / name: data for name, data in support.items()},
        lab.autograder_dir / otter_zip_name(lab.id): otter_zip(ag_tests, otter_support,
                                                               requirements=course.install_spec + "\n"),
    }
    if course.install_spec.strip():  # without an address its setup.sh could not install the kit: no zip
        out[lab.autograder_dir / gradescope_zip_name(lab.id)] = gradescope_zip(support, lab_id=lab.id,
                                                                               install_spec=course.install_spec)
    for name, text in public_files.items():
        out[lab.public_tests_dir / name] = text.encode()
    readme = lab.master.parent / "README.md"
    manual = [q for q in questions if q.manual]
    if manual and readme.exists():
        out[readme] = with_written_section(readme.read_text(), written_section(manual)).encode()
    return out


def _manifest(lab: Lab, suite, written: list) -> dict:
    """The bundle's manifest: the code questions' points and tests (``max_score``: theirs), the visibility and,
    when the lab has any, the written questions (``bundle.written_questions`` reads them)."""
    manifest = {
        "lab": lab.id,
        "title": lab.title,
        "max_score": sum(suite.questions().values()),
        "questions": suite.questions(),
        "tests": [{"name": t.name, "question": t.question, "points": t.points} for t in suite.tests],
        MANIFEST_KEY: lab.visibility.as_dict(),  # read by the Gradescope run (gradescope_visibility.py)
    }
    if written:  # an old lab's manifest stays byte for byte as it was
        manifest[WRITTEN] = [WrittenQuestion.from_master(q.name, q.points, q.prompt, q.reference, q.rubric).as_dict()
                             for q in written]
    return manifest


def resolved_master(masters: Masters, lab_id: str, _seen: tuple[str, ...] = ()):
    """The master of ``lab_id`` with its given cells filled from earlier labs (recursively)."""
    if lab_id in _seen:
        raise MasterError(f"given cells form a cycle: {' -> '.join(_seen + (lab_id,))}")
    return include_given(masters.notebook(lab_id),
                         load_master=lambda other: resolved_master(masters, other, _seen + (lab_id,)))


def _check_questions(lab: Lab, master_questions: list[str], hidden_questions: list[str]) -> None:
    missing = [q for q in master_questions if q not in hidden_questions]
    extra = [q for q in hidden_questions if q not in master_questions]
    if missing or extra:
        raise MasterError(f"{lab.id}: questions without hidden tests: {missing}; hidden tests for questions "
                          f"the master does not have: {extra}")


def _check_points(lab: Lab, master_points: dict[str, float], hidden_points: dict[str, float]) -> None:
    """A question's points are declared twice (the master's ``# points:`` and the hidden tests' ``points=``):
    they must agree, or the build stops naming both numbers."""
    for name, declared in master_points.items():
        total = hidden_points[name]
        if abs(declared - total) > 1e-9:
            raise MasterError(
                f"{lab.id}: question {name!r} is worth {declared:g} points in the master (`# points: {declared:g}` "
                f"in instructor/{lab.id}/{lab.id}.py) but its hidden tests' `points=` add up to {total:g} "
                f"(instructor/{lab.id}/hidden_tests.py); make them equal: the hidden tests' points decide the "
                "score, the master's line states the total")


def on_demand(course: Course, path: Path) -> bool:
    """Whether ``path``, an output of the build, is made on demand rather than kept in git."""
    rel = path.relative_to(course.root)
    return rel.suffix == ".zip" or rel.parts[:2] == ("nbgrader", "source")


def _owned_dirs(lab: Lab) -> list[Path]:
    return [lab.student_notebook.parent, lab.solution_notebook.parent, lab.autograder_dir, lab.public_tests_dir,
            lab.nbgrader_source.parent]


def build(course: Course, labs: list[Lab], *, check: bool = False) -> list[str]:
    """Write every lab's outputs, or with ``check`` compare them with the files on disk.

    Returns the problems found (``check``) or the files written.
    """
    warning = check_install_spec(course.install_spec)  # raises CourseError for the placeholder
    report: list[str] = [f"warning: {warning}"] if warning and not check else []
    masters = Masters(course)  # each master read once, however many labs give its code
    for lab in labs:
        files = build_lab(course, lab, masters)
        report += [] if check else [f"warning: {line}" for line in missing_parts(course, lab)]
        stale = [p for d in _owned_dirs(lab) if d.exists() for p in d.rglob("*")
                 if p.is_file() and p not in files and "__pycache__" not in p.parts
                 and not any(part.startswith(".") for part in p.relative_to(d).parts)]  # .OTTER_LOG, checkpoints
        for path, data in sorted(files.items()):
            rel = path.relative_to(course.root)
            if check:
                if not path.exists():
                    report += [] if on_demand(course, path) else [f"missing: {rel}"]
                elif path.read_bytes() != data:
                    report.append(f"differs from a fresh build: {rel}")
            elif not path.exists() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                report.append(f"wrote {rel}")
        for path in stale:
            rel = path.relative_to(course.root)
            if check:
                report.append(f"stale (not produced by the build): {rel}")
            else:
                path.unlink()
                report.append(f"removed stale {rel}")
    return report
