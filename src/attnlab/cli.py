"""``attnlab``: a thin command line. Each subcommand calls one function in ``attnlab.commands``."""

from __future__ import annotations

import argparse
import sys

from . import commands
from .process_exit import exit_without_teardown

S = argparse.SUPPRESS  # leave the default to the function, where it lives once


def _gradebook(sub) -> None:
    gb = sub.add_parser("gradebook", help="export a gradebook to CSV, or check it against a folder of submissions")
    gb.add_argument("target", help="a grading output folder, a .db file, or a postgresql:// URL")
    gb.add_argument("--csv", default=S, help="the CSV file to write; - for standard output")
    gb.add_argument("--check", default=S, metavar="SUBMISSIONS",
                    help="list the missing, stale and errored rows of the submissions in this folder; exit 1 if any")
    gb.add_argument("--lab", default=S, help="the lab, when the gradebook holds several")
    gb.add_argument("--student-from", default=S, metavar="REGEX|folder",
                    help="--check: the resubmission rule the batch took (default: student_from in course.yml)")
    gb.set_defaults(func=commands.gradebook)
    fb = sub.add_parser("feedback", help="each student's feedback as an HTML page, one folder per roster id")
    fb.add_argument("target", help="a grading output folder, a .db file, or a postgresql:// URL")
    fb.add_argument("--to", default=S, metavar="DIR", help="where the folders go (default: OUT/handback)")
    fb.add_argument("--lab", default=S, help="the lab, when the gradebook holds several")
    fb.add_argument("--nbgrader", default=S, metavar="COURSE_ROOT",
                    help="instead, into the nbgrader course's feedback/ for nbgrader release_feedback")
    fb.set_defaults(func=commands.feedback)
    mk = sub.add_parser("mark", help="mark written answers and change scores in a local web application")
    mk.add_argument("target", help="a grading output folder, a .db file, or a postgresql:// URL")
    mk.add_argument("--host", default=S, help="the address to listen on (default: 127.0.0.1, this machine only)")
    mk.add_argument("--port", type=int, default=S, help="the port (default: a free one)")
    mk.add_argument("--add-marker", default=S, metavar="NAME",
                    help="print a new token of NAME's own (a marker; the audit log names them by it) and exit")
    mk.add_argument("--import-requests", default=S, metavar="FILE",
                    help="import regrade requests from a CSV (columns student, question, text, time) and exit")
    mk.set_defaults(func=commands.mark)


def _add_grade(sub) -> None:
    """``attnlab grade``: one file, or a batch with results, feedback and a gradebook."""
    g = sub.add_parser("grade", help="grade submissions of a lab", epilog=(
        f"exit status: {commands.EXIT_OK} done, {commands.EXIT_USAGE} usage error, {commands.EXIT_GRADER_ERROR} a "
        f"grader error, {commands.EXIT_UNWRITTEN} a gradebook row not written, {commands.EXIT_STOPPED} a file not "
        f"written (the batch stopped), {commands.EXIT_GRADEBOOK} the gradebook unusable (down at the start, its tables "
        f"changed), {commands.EXIT_INTERRUPTED} interrupted (docs/GRADING_AT_SCALE.md)"))
    g.add_argument("lab")
    g.add_argument("paths", nargs="+", help="submission notebooks or folders of them")
    g.add_argument("--json", dest="as_json", action="store_true", default=S, help="print results as JSON")
    g.add_argument("--out", default=S, help="batch mode: write results, feedback and gradebook.db here")
    g.add_argument("--jobs", type=int, default=S, help="submissions graded at once")
    g.add_argument("--shard", default=S,
                   help="i/N: grade only this machine's share; auto/N: share K of N from a Slurm array job or "
                        "Kubernetes indexed Job (task K: a task rerun alone grades the same share)")
    g.add_argument("--gradebook", default=S, help="SQLite file or postgresql:// URL (default: OUT/gradebook.db)")
    g.add_argument("--regrade", action="store_true", default=S, help="grade again what the gradebook already has")
    g.add_argument("--student-from", default=S, metavar="REGEX|folder",
                   help="one row per student, from the newest of their files: the group 'student' (or the first) of "
                        "the file's stem, or 'folder' for one folder per student (default: student_from in "
                        "course.yml; docs/GRADING_AT_SCALE.md)")
    g.add_argument("--times", default=S, metavar="CSV",
                   help="submission times (columns submission,submitted_at) for the late policy, where neither "
                        "Gradescope's metadata nor nbgrader's timestamp.txt has them (default: the files' times)")
    g.set_defaults(func=commands.grade)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnlab", description="Build, grade and publish the attnlab labs.")
    p.add_argument("--root", default=S, help="the course repository (default: found from the current folder)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build student notebooks, solutions and autograders from the masters")
    b.add_argument("labs", nargs="*", default=S, help="lab ids (lab05 or lab05_self_attention); default: all")
    b.add_argument("--check", action="store_true", default=S, help="fail if committed outputs differ from a fresh build")
    b.set_defaults(func=commands.build)

    _add_grade(sub)

    _gradebook(sub)

    _add_report(sub)

    c = sub.add_parser("catalogue", help="grade a lab's catalogue: each mutant's kept share beside its stated loss")
    c.add_argument("lab")
    c.add_argument("--seed", type=int, default=S, help="the grading seed (default 0)")
    c.set_defaults(func=commands.catalogue)

    _release_parser(sub)

    d = sub.add_parser("demo", help="build everything and grade sample submissions")
    d.add_argument("--lab", default=S)
    d.add_argument("--out", default=S)
    d.set_defaults(func=commands.demo)
    return p


def _release_parser(sub) -> None:
    r = sub.add_parser("release", help="write a student repository a course can push: notebooks, kit, README")
    r.add_argument("out", help="the student repository to write: its .git and the labs already released into it are "
                              "kept, the rest replaced, and only once every check passed")
    r.add_argument("--url", required=True, help="where the course pushes OUT, e.g. https://github.com/you/course")
    r.add_argument("--labs", nargs="*", default=S, help="lab ids to release (default: all)")
    r.add_argument("--closed", nargs="*", default=S,
                   help="labs to treat as closed (past their deadline) for this release, e.g. lab01 lab05 or "
                        "lab01,lab05; a lab giving code of an open lab is held back")
    r.add_argument("--wheel", action="store_true", default=S, help="also write the kit's wheel into OUT/dist")
    r.add_argument("--branch", default=S, help="the branch Colab links point at (default: main)")
    r.add_argument("--gradescope", default=S,
                   help="folder for the Gradescope zips, installing the kit from --url (default: OUT-gradescope; "
                        "never inside OUT: they hold the hidden tests)")
    r.add_argument("--replace-all", action="store_true", default=S,
                   help="drop the labs already in OUT that this release does not write (default: keep them)")
    r.set_defaults(func=commands.release)


def _add_report(sub) -> None:
    rp = sub.add_parser("report", help="the class at a glance: an HTML page, a Markdown summary, score CSVs")
    rp.add_argument("target", help="a grading output folder, a .db file, or a postgresql:// URL")
    rp.add_argument("--html", default=S, help="the page to write (default: report.html beside the gradebook)")
    rp.add_argument("--lab", default=S, help="the lab to report on, when the gradebook holds several")
    rp.add_argument("--anonymise", action="store_true", default=S, help="student-NNN instead of the file names")
    rp.add_argument("--threshold", type=float, default=S,
                    help="the similarity (0-1) from which a pair is listed (default: report.similarity.DEFAULT_THRESHOLD)")
    rp.add_argument("--known", nargs="+", default=S, metavar="FILE_OR_DIR",
                    help="solutions to mark matches with (a public solution, last year's): notebooks, .py files or "
                         "folders of them; the lab's reference solution is always compared")
    rp.set_defaults(func=commands.report)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # this process's own command line (the `attnlab` script, `python -m attnlab.cli`), not a test
        exit_without_teardown(main(sys.argv[1:]))  # the interpreter's teardown after torch is slow
    args = vars(parser().parse_args(argv))
    func = args.pop("func")
    command = args.pop("command")
    try:
        return func(**args)
    except commands.UsageError as exc:  # an unknown lab, a missing file: one line, no traceback
        print(f"attnlab {command}: {exc}", file=sys.stderr)
        return commands.EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
