"""The report as one self-contained HTML page: styles inline, figures as ``data:`` PNGs, no script, no server.

Every string that a submission or a file name controls goes through ``esc`` (control characters made visible,
then HTML-escaped, quotes included), so a message holding ``<script>`` shows as text. The page also carries a
Content-Security-Policy that allows no script and no fetch at all (images from ``data:`` only): if escaping were
ever missed, nothing would run.
"""

from __future__ import annotations

import html

from attnlab.records.safe_text import escape_controls
from attnlab.records.score_text import format_score

from . import students
from .categories import CATEGORIES
from .clusters import Cluster, cluster_of
from .model import ClassReport
from .similarity import NOISE, Pair

MAX_LISTED = 200  # pairs in the table; the first similarity.MAX_PAIRS_SHOWN of them also side by side
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
VERDICT = ("Similarity is evidence to review, never a verdict: students who follow the same lecture write alike "
           "code, and a copied answer can look different. Read the code side by side before you conclude anything.")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: .5em; margin: 0; font-size: 12px; }
mark { background: #ffd27a; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.note { background: #fff4d6; border-left: 4px solid #e0a800; padding: .5em 1em; }
img { max-width: 100%; }
.nw { white-space: nowrap; }
.blank { color: #a05a00; }
.bad { color: #b00020; }
.known { background: #e8d6ff; padding: 0 .3em; border-radius: 3px; white-space: nowrap; }
.index { line-height: 1.8; }
.fit table { width: 100%; }
.any { overflow-wrap: anywhere; min-width: 16em; }
"""


def esc(text) -> str:
    """Student-controlled text for HTML: controls as visible escapes, then ``& < > " '`` escaped."""
    return html.escape(escape_controls(str(text)), quote=True)


def _table(head: list[str], rows: list[list[str]], numeric=()) -> str:
    """A table whose cells are already escaped HTML; columns in ``numeric`` align right."""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figure(report: ClassReport, name: str, alt: str) -> str:
    uri = report.figures.get(name)
    return f'<p><img src="{uri}" alt="{esc(alt)}" data-figure="{name}"></p>' if uri else ""


def _scores(r: ClassReport) -> str:
    rows = [[esc(d.label), format_score(d.max_score), *d.cells()] for d in [*r.per_question, r.total]]
    return ("<section id='scores'><h2>Scores</h2>"
            + _table(["question", "points", "mean", "median", "at full marks"], rows, numeric=(1, 2, 3, 4))
            + _figure(r, "total", "histogram of total scores") + _figure(r, "questions", "histograms per question")
            + "</section>")


def _mistakes(r: ClassReport) -> str:
    ids = students.anchors(r)
    rows = [[str(i), str(m.count), esc(m.question), esc(", ".join(m.entries) or "-"), esc(m.hint),
             "<br>".join(f"<a href='#{ids[k]}'>{esc(r.names.shown(k))}</a>"
                         for k in sorted(m.students, key=r.names.shown)),
             f"<pre>{esc(m.example)}</pre>"] for i, m in enumerate(r.mistakes, start=1)]
    failed = [[esc(q), esc(t), str(n)] for q, t, n in r.failed_tests]
    unwritten = [[esc(q), str(n)] for q, n in r.not_written]
    return ("<section id='mistakes'><h2>Mistakes</h2><p>Diagnosed mistakes (the grader's "
            "<code>likely mistake</code> lines), ranked by the number of submissions that made them, with who made "
            "them; the example is one failed test's message, anonymised.</p>"
            + (_table(["#", "submissions", "question", "catalogue entry", "hint", "who", "example message"], rows,
                      numeric=(0, 1)) if rows else "<p>No mistake was diagnosed.</p>")
            + _figure(r, "mistakes", "most frequent mistakes")
            + "<h3>Hidden tests failed most</h3>"
            + (_table(["question", "hidden test", "submissions failing it"], failed, numeric=(2,)) if failed
               else "<p>No hidden test failed.</p>")
            + "<h3>Not written yet</h3>"
            + (_table(["question", "submissions"], unwritten, numeric=(1,)) if unwritten
               else "<p>Every submission wrote every question.</p>")
            + "</section>")


def _listing(r: ClassReport, title: str, items: list[tuple[str, str]]) -> str:
    if not items:
        return f"<h3>{esc(title)}: none</h3>"
    ids = students.anchors(r)
    rows = [[f"<a href='#{ids[key]}'>{esc(r.names.shown(key))}</a>", f"<pre>{esc(r.names.scrub(key, why))}</pre>"]
            for key, why in items]
    return f"<h3>{esc(title)}: {len(items)}</h3>" + _table(["submission", "why"], rows)


def _health(r: ClassReport) -> str:
    h = r.health
    slow = ", ".join(f"{esc(r.names.shown(k))} ({s:.1f} s)" for k, s in h.slowest)
    return ("<section id='health'><h2>Health</h2>"
            + "".join(_listing(r, title, h.of(category)) for category, title in CATEGORIES.items())
            + f"<p>Grading time per submission: median {h.median_s:.1f} s; slowest: {slow or '-'}.</p>"
            + _figure(r, "timing", "grading time per submission") + "</section>")


def highlighted(code: str, regions: list[tuple[int, int]]) -> str:
    """``code`` escaped, with each ``(start, end)`` region in ``<mark>``."""
    out, at = [], 0
    for start, end in regions:
        out += [esc(code[at:start]), "<mark>", esc(code[start:end]), "</mark>"]
        at = end
    out.append(esc(code[at:]))
    return "".join(out)


def _pair_view(i: int, p: Pair) -> str:
    return (f"<details id='pair-{i}'><summary>#{i} {esc(p.a)} and {esc(p.b)}: {100 * p.score:.0f}%</summary>"
            f"<div class='pair'><div><h4>{esc(p.a)} ({100 * p.share_a:.0f}% of it found in the other)</h4>"
            f"<pre>{highlighted(p.code_a, p.regions_a)}</pre></div>"
            f"<div><h4>{esc(p.b)} ({100 * p.share_b:.0f}% of it found in the other)</h4>"
            f"<pre>{highlighted(p.code_b, p.regions_b)}</pre></div></div></details>")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _known_marks(c: Cluster) -> str:
    return "<br>".join(f"<span class='known'>{esc(m)} matches {esc(k)}: {100 * v:.0f}%</span>" for m, k, v in c.known)


def _clusters(r: ClassReport) -> str:
    if not r.clusters:
        return ""
    rows = [[str(i), str(len(c.members)), ", ".join(f"<span class='nw'>{esc(m)}</span>" for m in c.members),
             str(c.pairs), f"{100 * c.top:.0f}%" if c.pairs else "-", _known_marks(c) or "-"]
            for i, c in enumerate(r.clusters, start=1)]
    return ("<h3>Clusters</h3><p>Submissions linked by pairs above the threshold (connected components: one student "
            "in several pairs is one cluster), highest score first; marked where a member matches a known solution"
            f" ({esc(', '.join(r.known)) or 'none compared: add them with attnlab report --known FILE_OR_DIR'}).</p>"
            + _table(["cluster", "size", "submissions", "pairs", "top score", "matches a known solution"], rows,
                     numeric=(0, 1, 3, 4)))


def _similarity(r: ClassReport) -> str:
    number = cluster_of(r.clusters)
    listed = r.pairs[:MAX_LISTED]
    rows = [[str(i), str(number.get(p.a, "")), esc(p.a), esc(p.b), f"{100 * p.score:.0f}%"]
            for i, p in enumerate(listed, start=1)]
    views = [_pair_view(i, p) for i, p in enumerate(r.pairs, start=1) if p.code_a or p.code_b]
    counts = (f"<p><strong>{_count(len(r.pairs), 'pair')}</strong> above the threshold in <strong>"
              f"{_count(len(r.clusters), 'cluster')}</strong>; the table shows {len(listed)} of the {len(r.pairs)} pairs, "
              f"and the first {len(views)} side by side below it.</p>")
    return ("<section id='similarity'><h2>Similarity</h2>"
            f"<p class='note'>{esc(VERDICT)}</p>"
            f"<p>{r.compared} submissions compared (copydetect's winnowing over the graded cells; the template's "
            f"cells and given code left out). A pair is listed when at least {100 * r.threshold:.0f}% of each "
            f"side's fingerprints (matches of {NOISE} or more characters of code with names and strings "
            "normalised) are found in the other; highlighted: the matching regions.</p>"
            + _clusters(r)
            + ("<h3>Pairs</h3>" + counts + _table(["#", "cluster", "submission", "submission", "score"], rows,
                                                 numeric=(0, 1, 4)) + "".join(views) if rows
               else "<p>No pair of submissions above the threshold.</p>")
            + "</section>")


def render(r: ClassReport) -> str:
    """The whole page."""
    who = ("anonymised (student-NNN)" if r.names.anonymise else "as the roster does (name and file)"
           if r.names.roster_names else "as in the gradebook (file names)")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<title>{esc(r.lab)}: the class at a glance</title><style>{STYLE}</style></head><body>"
            f"<h1>{esc(r.lab)}: the class at a glance</h1>"
            f"<p>{len(r.submissions)} submissions; names {who}; generated {esc(r.generated_at)} by "
            "<code>attnlab report</code>.</p>"
            "<nav><a href='#scores'>Scores</a> | <a href='#mistakes'>Mistakes</a> | <a href='#health'>Health</a> | "
            "<a href='#similarity'>Similarity</a> | <a href='#students'>Students</a></nav>"
            + _scores(r) + _mistakes(r) + _health(r) + _similarity(r) + students.render(r, esc, _table)
            + "</body></html>\n")
