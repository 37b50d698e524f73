"""The functions behind the CLI subcommands. Defaults live here, once; ``cli.py`` only parses.

One error style: a mistake the user can fix (an unknown lab, a missing file, a course or master to correct, a stale
build, a gradebook URL that is wrong or does not answer) raises ``UsageError``, which the CLI prints as one line,
exit 2; a return value of 1 means "ran, and found a problem" (stale outputs, a surviving mutant, a gradebook check
that lists rows).

Exit statuses, written once here (docs/GRADING_AT_SCALE.md and the README repeat them):
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from attnlab.grading.outputs.score_table import json_rows, score_table

from .course import CourseError, load_course
from .process_exit import terminated_as_interrupt

EXIT_OK = 0  # done: every submission graded and its gradebook row written
EXIT_FOUND = 1  # ran and found a problem (build --check, catalogue, gradebook --check)
EXIT_USAGE = 2  # a usage error: one line, nothing graded
EXIT_GRADER_ERROR = 3  # grade: the grader failed on a submission (a grader process died...): stored as 0, rerun
EXIT_UNWRITTEN = 4  # grade: a gradebook row could not be written after the retries (takes precedence over 3)
EXIT_STOPPED = 5  # grade: a results or feedback file could not be written (full disk...): the batch stopped, rerun
EXIT_GRADEBOOK = 6  # grade, gradebook: the gradebook cannot be used (down at the start, a table or column changed)
EXIT_INTERRUPTED = 130  # grade: Ctrl-C; what was recorded stays, the same command resumes


class UsageError(Exception):
    """A mistake in the command line (an unknown lab, a missing file): the CLI prints it on one line, exit 2."""


def _course(root):
    try:
        return load_course(root)
    except (FileNotFoundError, CourseError) as exc:
        raise UsageError(str(exc)) from None


def _lab(course, name: str):
    try:
        return course.lab(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def build(*, labs: list[str] = (), check: bool = False, root: str | None = None) -> int:
    """Build the releases of ``labs`` (all by default); with ``check``, fail if committed files are stale."""
    from .buildchain.pipeline import build as run_build
    from .buildchain.transforms.check_no_leak import LeakError
    from .buildchain.transforms.parse_questions import MasterError

    course = _course(root)
    for name in labs:
        _lab(course, name)
    try:
        report = run_build(course, course.select(labs), check=check)
    except (CourseError, MasterError, LeakError) as exc:
        raise UsageError(str(exc)) from None
    for line in report:
        print(line)
    if check:
        if report:
            print(f"attnlab build --check: {len(report)} file(s) differ from a fresh build; run `attnlab build`",
                  file=sys.stderr)
            return 1
        print("attnlab build --check: all outputs match a fresh build")
    return 0


def grade(*, lab: str, paths: list[str], as_json: bool = False, out: str | None = None, jobs: int = 1,
          shard: str | None = None, gradebook: str | None = None, regrade: bool = False,
          root: str | None = None, student_from: str | None = None, times: str | None = None) -> int:
    """Grade submissions. With ``out`` (or ``gradebook``/``shard``): a batch with results files and a gradebook,
    and, for a lab with a due date, each submission's time and late penalty recorded (``times``: a CSV of them)."""
    from attnlab.grading.runner import grade_submission
    from attnlab.grading.scale.submission_times import TimesError, read_times_csv

    course = _course(root)
    lab_info = _lab(course, lab)
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    try:
        known_times = read_times_csv(times) if times else None
    except TimesError as exc:
        raise UsageError(str(exc)) from None
    if out or gradebook or shard or student_from:
        code, results, last = _grade_batch(lab_info, paths, out=out or "grading-out", jobs=jobs, shard=shard,
                                           gradebook=gradebook, regrade=regrade,
                                           student_from=course.student_from if student_from is None else student_from)
        if results is None:
            return code
        if lab_info.deadline is not None:
            from .report.late_record import record_late

            record_late(lab_info, gradebook or out or "grading-out", out or "grading-out", known_times)
    else:
        from attnlab.grading.scale.submissions import collect_submissions

        try:  # in the order given; a folder: each entry in it, never followed or opened here
            files = [f for p in paths for f in collect_submissions([p]).values()]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        from attnlab.grading.worker.deaths import WorkerKilled

        try:
            results = [grade_submission(lab_info.autograder_dir, f) for f in files]
        except WorkerKilled as exc:  # not the student's: no score to show, one line
            print(f"attnlab grade: {exc}", file=sys.stderr)
            return EXIT_GRADER_ERROR
        code, last = EXIT_OK, None
    if as_json:
        print(json.dumps(json_rows(results), indent=2))
    else:
        print(score_table(results))
    if last:
        sys.stdout.flush()
        print(last, file=sys.stderr)  # the last line: what to rerun
    return code


def _grade_batch(lab_info, paths: list[str], *, out: str, jobs: int, shard, gradebook, regrade: bool,
                 student_from: str | None):
    """``attnlab grade --out/--gradebook/--shard/--student-from``: (exit status, results or None when interrupted
    or stopped, the line that says what to rerun or None)."""
    from attnlab.grading.outputs.connection import GradebookUnavailable
    from attnlab.grading.outputs.gradebook_schema import GradebookSchemaError
    from attnlab.grading.scale.batch import BatchInterrupted, BatchWriteFailed, grade_batch, parse_shard
    from attnlab.grading.scale.gradebook_check import rerun_line
    from attnlab.student_from import student_rule

    try:
        rule = student_rule(student_from)  # a pattern that does not compile or has no group: ValueError
        if shard is not None:
            parse_shard(shard)  # --shard auto without a scheduler: one line, before anything is opened
        Path(out).mkdir(parents=True, exist_ok=True)
        with terminated_as_interrupt() as terminated:
            summary = grade_batch(lab_info.autograder_dir, paths, out_dir=out, jobs=jobs, shard=shard,
                                  gradebook=gradebook, regrade=regrade, student_from=rule)
    except BatchInterrupted as exc:
        how = "stopped by SIGTERM (scancel, a requeue, the time limit)" if terminated else "interrupted"
        print(f"{how}: {exc.summary}; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED, None, None
    except BatchWriteFailed as exc:  # a full disk, a folder without permission: what is recorded stays
        print(f"stopped: {exc}", file=sys.stderr)
        return EXIT_STOPPED, None, None
    except (GradebookUnavailable, GradebookSchemaError) as exc:  # not a usage error: the database, not the command
        print(f"attnlab grade: {exc}", file=sys.stderr)
        return EXIT_GRADEBOOK, None, None
    except ValueError as exc:  # a bad shard, jobs, gradebook URL or name clash, found before grading starts
        raise UsageError(str(exc)) from None
    except OSError as exc:
        if exc.filename is None or Path(exc.filename) not in (Path(out), *Path(out).parents):
            raise
        raise UsageError(f"cannot make the output folder {out} ({exc.strerror}): pass a writable --out") from None
    print(summary, file=sys.stderr)
    code = EXIT_UNWRITTEN if summary.unwritten else EXIT_GRADER_ERROR if summary.failed else EXIT_OK
    last = rerun_line(lab_info.id, summary.left, out=out, gradebook=gradebook,
                      student_from=student_from) if code else None
    return code, summary.results, last


def release(*, out: str, url: str, labs: list[str] = (), closed: list[str] = (), wheel: bool = False,
            branch: str = "main", gradescope: str | None = None, replace_all: bool = False,
            root: str | None = None) -> int:
    """Write the student repository (notebooks installing the kit from ``url``, the kit, README, licence) for the
    labs that give no code of an open lab, and their Gradescope zips installing from the same ``url`` into
    ``gradescope`` (default: ``OUT-gradescope`` beside OUT); ``closed`` marks labs closed for this release
    (``lab05`` or ``lab05,lab06``). The labs already in OUT stay unless ``replace_all``; a failed gate leaves OUT
    as it was."""
    from .release import release as run_release

    course = _course(root)
    try:
        course = course.with_closed([name for arg in closed for name in arg.split(",") if name.strip()])
        done = run_release(course, course.select(labs), out, url=url, wheel=wheel, branch=branch,
                           gradescope=gradescope or str(Path(out).resolve()) + "-gradescope", replace_all=replace_all)
    except (CourseError, ValueError) as exc:
        raise UsageError(f"{exc} ({out} is left as it was)") from None
    except OSError as exc:
        raise UsageError(f"cannot write the release to {out}: {exc.strerror} ({exc.filename})") from None
    print(f"attnlab release: released {', '.join(done.released)}")
    if done.kept:
        print(f"attnlab release: kept from the earlier release in {out}: {', '.join(done.kept)}")
    for reason in done.held_back.values():
        print(f"attnlab release: held back: {reason}")
    print(f"attnlab release: wrote {len(done.written)} files to {out}; the leak gate found no instructor material. "
          f"Push it to {url}.")
    print(f"attnlab release: Gradescope zips (hidden tests: upload them, never push them): "
          f"{', '.join(done.gradescope)}")
    return 0


def gradebook(*, target: str, csv: str | None = None, check: str | None = None, lab: str | None = None,
              student_from: str | None = None, root: str | None = None) -> int:
    """Export a gradebook (a grading output folder, a .db file or a postgresql:// URL) to CSV, with the course's
    roster (``roster:`` in course.yml) when it has one (``csv`` ``-``: to standard output, the count to standard
    error), and/or ``check`` it against a folder of submissions, keyed by the resubmission rule the batch took
    (``student_from``, else course.yml's ``student_from:``): one line per missing, stale or errored row, then a
    summary; ``EXIT_FOUND`` when anything is listed."""
    from attnlab.grading.outputs.connection import GradebookError, GradebookUnavailable
    from attnlab.grading.outputs.gradebook_schema import GradebookSchemaError
    from attnlab.grading.scale.gradebook_check import print_check
    from attnlab.report.gradebook_csv import export_gradebook

    if csv is None and check is None:
        raise UsageError("say what to do: --csv FILE (export) and/or --check SUBMISSIONS (verify a run)")
    if check is not None and not Path(check).exists():
        raise UsageError(f"no such file or folder: {check}")
    course = _course_if_any(root)
    rule = student_from if student_from is not None else course.student_from if course else None
    try:
        if csv is not None:
            rows = export_gradebook(target, csv, lab=lab, roster=course.roster or None if course else None)
            print(f"wrote {rows} rows to {'standard output' if csv == '-' else csv}",
                  file=sys.stderr if csv == "-" else None)
        return EXIT_FOUND if check is not None and print_check(target, check, lab=lab, student_from=rule) else EXIT_OK
    except (GradebookUnavailable, GradebookSchemaError) as exc:  # the database, not the command: one line
        print(f"attnlab gradebook: {exc}", file=sys.stderr)
        return EXIT_GRADEBOOK
    except (FileNotFoundError, GradebookError, ValueError) as exc:  # ValueError: several labs, two files with one name
        raise UsageError(str(exc)) from None
    except OSError as exc:  # the CSV cannot be written there
        raise UsageError(f"cannot write {exc.filename or csv} ({exc.strerror}): pass a CSV file path") from None


def _course_if_any(root):
    """The course, or None outside one (a gradebook can be exported or checked anywhere)."""
    try:
        return load_course(root)
    except FileNotFoundError:
        return None
    except CourseError as exc:
        raise UsageError(str(exc)) from None


def feedback(*, target: str, to: str | None = None, lab: str | None = None, root: str | None = None,
             nbgrader: str | None = None) -> int:
    """Each student's feedback page (marks, late penalty applied) into ``to`` (default ``OUT/handback``), one folder
    per roster id (``report/handback.py``), or into the nbgrader course ``nbgrader`` (``nbgrader_feedback.py``)."""
    from attnlab.grading.outputs.connection import GradebookError

    from .report.handback import hand_back
    from .report.load import ReportInputError
    from .report.nbgrader_feedback import to_nbgrader

    if to is None and nbgrader is None and "://" in target:
        raise UsageError("a postgresql:// gradebook has no output folder: pass --to DIR for the pages")
    to = to or str((Path(target) if Path(target).is_dir() else Path(target).parent) / "handback")
    course = _course_if_any(root)
    roster = (course.roster or None) if course else None
    try:
        if nbgrader is not None:
            done = to_nbgrader(target, nbgrader, lab=lab, roster=roster)
            print(f"attnlab feedback: {done.lab}: {len(done.pages)} page(s) for release_feedback in {nbgrader}/feedback")
            sys.stderr.write("".join(f"attnlab feedback: no page for {r}\n" for r in done.refused))
            return EXIT_FOUND if done.refused else EXIT_OK
        done = hand_back(target, to, lab=lab, roster=roster)
    except (FileNotFoundError, ReportInputError, GradebookError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(f"attnlab feedback: {done.lab}: {len(done.pages)} feedback page(s) in {to}, one folder per student")
    if done.not_on_roster:
        print(f"attnlab feedback: {len(done.not_on_roster)} submission(s) not on the roster in instructor/course.yml, "
              f"their pages in {to}/NOT-ON-ROSTER/: {', '.join(done.not_on_roster[:10])}", file=sys.stderr)
    return EXIT_OK


def mark(*, target: str, host: str = "127.0.0.1", port: int = 0, root: str | None = None,
         add_marker: str | None = None, import_requests: str | None = None) -> int:
    """``attnlab mark``: the marking application on a gradebook until Ctrl-C (``marking/serve.py``; port 0: a free one);
    ``add_marker``: print a new token for that marker instead; ``import_requests``: import regrade requests."""
    from .marking.serve import run_marking
    try:
        return run_marking(target, host=host, port=port, start=root, add_marker=add_marker,
                           import_requests=import_requests)
    except ValueError as exc:  # marking.serve.MarkingUsageError: a wrong target or port, the extra not installed
        raise UsageError(str(exc)) from None


def report(*, target: str, html: str | None = None, lab: str | None = None, anonymise: bool = False,
           threshold: float | None = None, known: list[str] = (), root: str | None = None) -> int:
    """Write the class report of a grading output folder, a .db file or a postgresql:// URL: the page ``html``
    (default: ``report.html`` in the folder or beside the .db file), the Markdown summary and the score CSVs
    beside it. The lab's catalogue names the diagnosed mistakes and its student template is left out of the similarity;
    a submission matching the lab's solution notebook or a ``known`` file (or a file in a ``known`` folder) is marked."""
    from attnlab.grading.core.mutants import load_catalogue
    from attnlab.grading.outputs.connection import GradebookError

    from .report import build_report
    from .report.exports import not_on_roster
    from .report.load import ReportInputError
    from .report.similarity import DEFAULT_THRESHOLD
    from .report.students import marking_lines

    if threshold is not None and not 0 < threshold <= 1:
        raise UsageError(f"--threshold {threshold:g} is not a share: pass a number above 0 and at most 1 (0.8: "
                         "80% of each side's fingerprints found in the other)")
    missing = [k for k in known if not Path(k).exists()]
    if missing:
        raise UsageError(f"--known {', '.join(missing)}: no such file or folder; pass notebooks, .py files or "
                         "folders of them")
    course = _course(root)

    def mutants(lab_id: str):
        path = _lab(course, lab_id).catalogue
        return load_catalogue(path)[0] if path.exists() else []

    try:
        done = build_report(target, html=html, lab=lab, mutants=mutants, anonymise=anonymise,
                            template=lambda lab_id: _lab(course, lab_id).student_notebook,
                            reference=lambda lab_id: _lab(course, lab_id).solution_notebook, known=known,
                            threshold=DEFAULT_THRESHOLD if threshold is None else threshold, roster=course.roster)
    except (FileNotFoundError, ReportInputError, GradebookError) as exc:
        raise UsageError(str(exc)) from None
    r = done.report
    _say_not_on_roster(not_on_roster(r, course.roster))
    print(f"attnlab report: {r.lab}, {len(r.submissions)} submissions, {len(r.mistakes)} distinct mistakes, "
          f"{len(r.pairs)} similar pairs in {len(r.clusters)} clusters (threshold {r.threshold:g}), "
          f"{len(r.known_matches)} matches to known solutions, in {done.seconds:.1f} s")
    print(f"attnlab report: wrote {done.html}, {done.markdown}, {', '.join(map(str, done.csv.values()))}")
    for line in marking_lines(r.submissions, done.refreshed):
        print(f"attnlab report: {line}")
    return 0


def _say_not_on_roster(names: list[str]) -> None:
    if names:
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        print(f"attnlab report: {len(names)} submission(s) not on the roster in instructor/course.yml, flagged "
              f"NOT ON ROSTER in the CSVs: {shown}; add them (submission: their file's stem) before importing",
              file=sys.stderr)


def catalogue(*, lab: str, seed: int = 0, root: str | None = None) -> int:
    """Grade the built bundle's catalogue through the narrow interface at ``seed``: each mutant's kept share beside
    its stated loss (``Entry.loses``, docs/CURRICULUM.md), each variant's marks. Exit 1 when a mutant's loss is not the
    stated one or a variant loses points. A bundle older than the instructor's files is refused (``attnlab build``)."""
    from attnlab.grading.core.bundle import load_bundle
    from attnlab.grading.core.mutants import CatalogueError
    from attnlab.records.bundle_names import CATALOGUE, HIDDEN_TESTS

    lab_info = _lab(_course(root), lab)
    try:
        bundle = load_bundle(lab_info.autograder_dir)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    stale = bundle.stale_copies({HIDDEN_TESTS: lab_info.hidden_tests, CATALOGUE: lab_info.catalogue})
    if stale:
        raise UsageError(f"autograder/{lab_info.id}/ holds an older {' and '.join(stale)} than instructor/"
                         f"{lab_info.id}/; run `attnlab build {lab_info.id}` first")
    try:
        entries = bundle.catalogue()
        if entries is None:
            raise UsageError(f"{lab_info.id} has no catalogue, so there is nothing to grade: write instructor/"
                             f"{lab_info.id}/{CATALOGUE} with MUTANTS = [Entry(name, question, source, description, "
                             "hint=..., loses=...)] and VARIANTS = [...] (docs/ARCHITECTURE.md, Add a lab, step 5), "
                             f"then `attnlab build {lab_info.id}`")
        good = {kind: sum(_print_verdict(bundle, kind, e, seed) for e in group)
                for kind, group in (("mutant", entries.mutants), ("variant", entries.variants))}
    except CatalogueError as exc:
        raise UsageError(str(exc)) from None
    mutants, variants = entries.mutants, entries.variants
    agree = f"{good['mutant']}" if good["mutant"] == len(mutants) else f"{good['mutant']} of {len(mutants)}"
    kept = f"{good['variant']}" if good["variant"] == len(variants) else f"{good['variant']} of {len(variants)}"
    no_hint = [m.name for m in mutants if not m.hint]
    print(f"seed {seed}: {agree} mutants lose what they state, {kept} variants at full marks"
          + (f"; {len(no_hint)} mutants without a student hint: {', '.join(no_hint)}" if no_hint else ""))
    return 0 if good["mutant"] + good["variant"] == len(mutants) + len(variants) else 1


def _print_verdict(bundle, kind: str, entry, seed: int) -> bool:
    """Grade one catalogue entry at ``seed``, print its line; whether it is as its kind demands (``Bundle.verdict``)."""
    from attnlab.grading.core.mutants import real_loss, stated

    res = bundle.grade_entry(entry, seed=seed)
    ok = bundle.verdict(kind, entry, res)
    q = res[entry.question]
    line = f"{kind:7} {entry.name:40} {entry.question:30} {q['score']:5.1f}/{q['max_score']:<5.1f}"
    if kind == "mutant":
        verdict = "SURVIVED" if q["score"] >= q["max_score"] else "as stated" if ok else "NOT AS STATED"
        line += f" kept {1 - real_loss(q):4.0%}  stated loss {stated(entry):14} {verdict}"
    else:
        line += " full marks" if ok else " LOST POINTS"
    print(line)
    return ok


def demo(*, lab: str = "lab05", out: str = "demo-submissions", root: str | None = None) -> int:
    """Build every lab, then grade the lab's solution, its blank student notebook and two buggy notebooks."""
    from .demo import make_demo_submissions

    if build(root=root) != 0:
        return 1
    lab_info = _lab(_course(root), lab)
    paths = make_demo_submissions(lab_info, Path(out))
    return grade(lab=lab_info.id, paths=[str(p) for p in paths], root=root)
