"""``build_report``: a gradebook in, the report's files out (``attnlab report``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from attnlab.records.student_names import Names

from . import clusters, exports, markdown, page, plots, similarity, stats
from .handback import write_pages
from .load import Submission, load_submissions
from .model import ClassReport
from .students import feedback_links, refresh_feedback


@dataclass
class ReportFiles:
    html: Path
    markdown: Path
    csv: dict[str, Path]  # layout ("scores", "canvas", "moodle") -> file
    report: ClassReport
    seconds: float
    refreshed: int = 0  # feedback files written again with the marks (students.refresh_feedback)


def compute(lab: str, subs: list[Submission], *, mutants=(), template=None, anonymise: bool = False,
            threshold: float = similarity.DEFAULT_THRESHOLD, figures: bool = True, reference=None,
            known=(), roster=None) -> ClassReport:
    """The report of ``subs``. ``mutants`` (the catalogue's ``Entry`` list) name the diagnosed mistakes;
    ``template``: the lab's student notebook, whose cells and fingerprints are left out of the similarity;
    ``reference`` (the solution notebook) and ``known`` (files or folders of solutions the instructor adds):
    marked where a submission matches them (``clusters.py``). ``roster``: every section names a student it lists
    as ``Alice Smith (alice.ipynb)`` (not when anonymising)."""
    found = {s.key: roster.find(s.key) for s in subs} if roster else {}
    names = Names(subs, anonymise=anonymise, roster_names={k: who.name for k, who in found.items() if who})
    total, per_q = stats.distributions(subs)
    ranked = stats.mistakes(subs, names, mutants)
    pairs, matches, labels, compared = _pairs(subs, names, template, threshold, reference, known)
    report = ClassReport(lab, subs, names, total, per_q, ranked, stats.failed_tests(subs), stats.not_written(subs),
                         stats.health(subs), pairs, threshold, compared, matches, clusters.clusters(pairs, matches),
                         labels, mutants=list(mutants),
                         generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if figures:
        report.figures = {"total": plots.total_plot(total), "questions": plots.question_plot(per_q),
                          "mistakes": plots.mistakes_plot(ranked),
                          "timing": plots.timing_plot([s.elapsed_s for s in subs])}
    return report


def _pairs(subs: list[Submission], names: Names, template, threshold: float, reference, known):
    """``(pairs of submissions, matches to known sources, the known sources' labels, submissions compared)``,
    in shown names; only submissions whose file can still be read take part."""
    sources, template_code = similarity.template_sources(template) if template else (set(), "")
    boilerplate = similarity.template_hashes(template_code)
    named = []
    for s in subs:
        code = similarity.graded_code(s.path, sources) if s.path and Path(s.path).is_file() else None
        if code is not None:
            named.append((names.shown(s.key), code))
    compared = len(named)
    extra = clusters.known_sources(reference, known, sources)
    named += extra
    prints = similarity.fingerprints(named, boilerplate)
    found = similarity.similar_pairs(prints, threshold, shown=0)
    labels = {label for label, _ in extra}
    pairs, matches = clusters.split_known(found, labels)
    by_name = {p.name: p for p in prints}
    for pair in pairs[:similarity.MAX_PAIRS_SHOWN]:
        similarity.add_regions(pair, by_name[pair.a], by_name[pair.b])
    return pairs, matches, [label for label, _ in extra], compared


def build_report(target, *, html=None, lab: str | None = None, mutants=(), template=None, reference=None,
                 known=(), anonymise: bool = False, threshold: float = similarity.DEFAULT_THRESHOLD,
                 roster=None) -> ReportFiles:
    """Write the report of the gradebook at ``target`` (a grading output folder, a ``.db`` file or a
    ``postgresql://`` URL): the page ``html`` (default: ``report.html`` in the output folder, beside a ``.db``
    file, or in the current folder for a URL), and beside it ``<stem>.md`` (the summary) and ``<stem>-scores.csv``,
    ``<stem>-canvas.csv``, ``<stem>-moodle.csv`` (per-question scores in three layouts). ``mutants``, ``template``
    and ``reference`` (see ``compute``) may be functions of the lab id, called once the gradebook names the lab;
    ``roster`` (``attnlab.roster.Roster``) identifies the students in the exports."""
    start = time.monotonic()
    lab, subs = load_submissions(target, lab)
    report = compute(lab, subs, mutants=mutants(lab) if callable(mutants) else mutants,
                     template=template(lab) if callable(template) else template, anonymise=anonymise,
                     threshold=threshold, reference=reference(lab) if callable(reference) else reference,
                     known=known, roster=roster)
    html = Path(html) if html else default_html(target)
    refreshed = refresh_feedback(target, subs)  # the students' feedback files get the marks given since the grade
    write_pages(target, subs, lab)  # and each its page, feedback.html, which the Students view links to
    report.feedback = {} if anonymise else feedback_links(target, subs, html)  # a path names its student
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(page.render(report), encoding="utf-8")
    md = html.with_suffix(".md")
    md.write_text(markdown.render(report), encoding="utf-8")
    csvs = exports.write_all(report, html.with_name(html.stem), roster)
    return ReportFiles(html, md, csvs, report, time.monotonic() - start, refreshed)


def default_html(target) -> Path:
    """``DIR/report.html`` for a grading output folder, ``report.html`` beside a gradebook file, else here."""
    if "://" in str(target):
        return Path("report.html")
    path = Path(target)
    return (path if path.is_dir() else path.parent) / "report.html"
