"""The functions behind the CLI subcommands. Defaults live here, once; ``cli.py`` only parses."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from .course import CourseError, load_course


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
    from .build.pipeline import build as run_build
    from .build.transforms.check_no_leak import LeakError
    from .build.transforms.parse_questions import MasterError

    course = _course(root)
    for name in labs:
        _lab(course, name)
    try:
        report = run_build(course, course.select(labs), check=check)
    except (CourseError, MasterError, LeakError) as exc:
        print(f"attnlab build: {exc}", file=sys.stderr)
        return 2
    for line in report:
        print(line)
    if check:
        if report:
            print(f"attnlab build --check: {len(report)} file(s) differ from a fresh build; run `attnlab build`",
                  file=sys.stderr)
            return 1
        print("attnlab build --check: all outputs match a fresh build")
    return 0


def _expand(paths: list[str]) -> list[Path]:
    """Files and folders to grade; a folder's entries are never followed or opened here (the grader checks
    each with lstat and gives a link, pipe or device a row saying so)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and not p.is_symlink():
            files.extend(sorted(f for f in p.iterdir() if not f.name.startswith(".")
                                and not stat.S_ISDIR(os.lstat(f).st_mode)))
        else:
            files.append(p)
    return files


def grade(*, lab: str, paths: list[str], as_json: bool = False, out: str | None = None, jobs: int = 1,
          shard: str | None = None, gradebook: str | None = None, regrade: bool = False,
          root: str | None = None) -> int:
    """Grade submissions. With ``out`` (or ``gradebook``/``shard``): a batch with results files and a gradebook."""
    from .grading.runner import grade_submission

    course = _course(root)
    lab_info = _lab(course, lab)
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    if out or gradebook or shard:
        from .grading.batch import BatchInterrupted, grade_batch

        try:
            summary = grade_batch(lab_info.autograder_dir, paths, out_dir=out or "grading-out", jobs=jobs,
                                  shard=shard, gradebook=gradebook, regrade=regrade)
        except BatchInterrupted as exc:
            print(f"interrupted: {exc.summary}; run the same command again to resume", file=sys.stderr)
            return 130
        print(summary, file=sys.stderr)
        results = summary.results
    else:
        results = [grade_submission(lab_info.autograder_dir, p) for p in _expand(paths)]
    if as_json:
        print(json.dumps(json_rows(results), indent=2))
    else:
        print(score_table(results))
    return 0


def json_rows(results: list[dict]) -> list[dict]:
    """What ``attnlab grade --json`` prints of each result; a file name that is not UTF-8 shows its bytes as
    ``\\xNN`` (``safe_text.readable_name``)."""
    from .grading.safe_text import readable_name

    keep = ("submission", "score", "max_score", "questions", "errors", "review", "isolation", "elapsed_s")
    return [{k: readable_name(r[k]) if k == "submission" else r[k] for k in keep if k in r} for r in results]


def score_table(results: list[dict]) -> str:
    """One line per result; the student's file name and messages with control characters escaped; a row with
    items for a person to review (``result["review"]``) says ``needs review`` first."""
    from .grading.safe_text import for_terminal, readable_name

    if not results:
        return "no submissions"
    names = [for_terminal(readable_name(Path(r["submission"]).name)) for r in results]
    width = max(len(n) for n in names)
    lines = [f"{'submission':<{width}}  {'score':>13}  {'seconds':>7}  notes"]
    for name, r in zip(names, results):
        note = for_terminal(_notes(r))[:70]
        lines.append(f"{name:<{width}}  {r['score']:>6.1f} / {r['max_score']:<4.0f}"
                     f"  {r.get('elapsed_s', 0):>7.1f}  {note}")
    return "\n".join(lines)


def _notes(result: dict) -> str:
    """``row_notes`` (``needs review: ...`` first), then the questions that lost points: ``lost: causal_mask
    0/2, ...``."""
    from .grading.gradebook import row_notes

    lost = [f"{q} {v['score']:g}/{v['max_score']:g}" for q, v in result.get("questions", {}).items()
            if v["score"] < v["max_score"]]
    parts = row_notes(result)
    if lost:
        parts.append("lost: " + ", ".join(lost))
    return "; ".join(parts)


def release(*, out: str, url: str, labs: list[str] = (), closed: list[str] = (), wheel: bool = False,
            branch: str = "main", root: str | None = None) -> int:
    """Write the student repository (notebooks installing the kit from ``url``, the kit, README, licence) for the
    labs that give no code of an open lab; ``closed`` marks labs closed for this release (``lab05`` or
    ``lab05,lab06``)."""
    from .release import release as run_release

    course = _course(root)
    try:
        course = course.with_closed([name for arg in closed for name in arg.split(",") if name.strip()])
        done = run_release(course, course.select(labs), out, url=url, wheel=wheel, branch=branch)
    except (CourseError, ValueError) as exc:
        print(f"attnlab release: {exc}", file=sys.stderr)
        return 2
    print(f"attnlab release: released {', '.join(done.released)}")
    for reason in done.held_back.values():
        print(f"attnlab release: held back: {reason}")
    print(f"attnlab release: wrote {len(done.written)} files to {out}; the leak gate found no instructor material. "
          f"Push it to {url}.")
    return 0


def gradebook(*, target: str, csv: str, root: str | None = None) -> int:
    """Export a gradebook (a grading output folder, a .db file or a postgresql:// URL) to CSV."""
    from .grading.batch import export_gradebook

    export_gradebook(target, csv)
    print(f"wrote {csv}")
    return 0


def catalogue(*, lab: str, root: str | None = None) -> int:
    """Grade the lab's catalogue of mutants and variants through the narrow interface; print a table."""
    from .grading.catalogue import grade_entry, load_catalogue
    from .grading.runner import load_bundle

    lab_info = _lab(_course(root), lab)
    bundle = load_bundle(lab_info.autograder_dir)
    ref_code = (lab_info.autograder_dir / "reference.py").read_text()
    mutants, variants = load_catalogue(lab_info.catalogue)
    failures = 0
    good = {"mutant": 0, "variant": 0}
    for kind, entries in (("mutant", mutants), ("variant", variants)):
        for entry in entries:
            res = grade_entry(bundle.suite, bundle.reference, ref_code, entry)
            q = res[entry.question]
            total = sum(v["score"] for v in res.values())
            full = sum(v["max_score"] for v in res.values())
            ok = q["score"] < q["max_score"] if kind == "mutant" else total == full
            failures += not ok
            good[kind] += ok
            verdict = ("killed" if ok else "SURVIVED") if kind == "mutant" else ("full marks" if ok else "LOST POINTS")
            print(f"{kind:7} {entry.name:40} {entry.question:30} {q['score']:5.1f}/{q['max_score']:<5.1f} {verdict}")
    killed = f"{good['mutant']}" if good["mutant"] == len(mutants) else f"{good['mutant']} of {len(mutants)}"
    kept = f"{good['variant']}" if good["variant"] == len(variants) else f"{good['variant']} of {len(variants)}"
    no_hint = [m.name for m in mutants if not m.hint]
    print(f"{killed} mutants killed, {kept} variants at full marks"
          + (f"; {len(no_hint)} mutants without a student hint: {', '.join(no_hint)}" if no_hint else ""))
    return 1 if failures else 0


def demo(*, lab: str = "lab05", out: str = "demo-submissions", root: str | None = None) -> int:
    """Build every lab, then grade the lab's solution, its blank student notebook and two buggy notebooks."""
    from .demo import make_demo_submissions

    if build(root=root) != 0:
        return 1
    lab_info = _lab(_course(root), lab)
    paths = make_demo_submissions(lab_info, Path(out))
    return grade(lab=lab_info.id, paths=[str(p) for p in paths], root=root)
