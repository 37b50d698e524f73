"""The report's Markdown summary: the page's tables without the figures and the side-by-side code.

Names and messages are escaped (``safe_text.markdown_inline`` in table cells, fenced blocks for messages):
no student text becomes a heading, a link or HTML.
"""

from __future__ import annotations

from attnlab.records.safe_text import for_markdown, markdown_inline
from attnlab.records.score_text import format_score

from . import students
from .categories import CATEGORIES, SHORT, problems
from .model import ClassReport
from .page import MAX_LISTED, VERDICT


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [_row(head), _row(["---"] * len(head)), *map(_row, rows), ""]


def _health(r: ClassReport) -> list[str]:
    h = r.health
    lines = ["## Health", ""]
    for category, title in CATEGORIES.items():
        items = h.of(category)
        lines.append(f"- {title}: {len(items)}"
                     + (" (" + ", ".join(markdown_inline(r.names.shown(k)) for k, _ in items) + ")" if items else ""))
    slow = ", ".join(f"{markdown_inline(r.names.shown(k))} {s:.1f} s" for k, s in h.slowest)
    return lines + [f"- Grading time per submission: median {h.median_s:.1f} s; slowest: {slow or '-'}", ""]


def _similarity(r: ClassReport) -> list[str]:
    lines: list[str] = []
    lines += ["## Similarity", "", f"> {VERDICT}", "",
              f"{r.compared} submissions compared; threshold {100 * r.threshold:.0f}%; {len(r.pairs)} pairs in "
              f"{len(r.clusters)} clusters; {min(len(r.pairs), MAX_LISTED)} pairs listed (see the page for the "
              "side-by-side view).", ""]
    rows = [[str(i), ", ".join(markdown_inline(m) for m in c.members), str(c.pairs),
             f"{100 * c.top:.0f}%" if c.pairs else "-",
             "; ".join(f"{markdown_inline(m)}: {markdown_inline(k)} {100 * v:.0f}%" for m, k, v in c.known) or "-"]
            for i, c in enumerate(r.clusters, start=1)]
    lines += _table(["cluster", "submissions", "pairs", "top score", "matches a known solution"], rows) if rows else []
    listed = [[str(i), markdown_inline(p.a), markdown_inline(p.b), f"{100 * p.score:.0f}%"]
              for i, p in enumerate(r.pairs[:MAX_LISTED], start=1)]
    lines += _table(["#", "submission", "submission", "score"], listed) if listed else ["No pair above the threshold.", ""]
    if len(r.pairs) > MAX_LISTED:
        lines += [f"And {len(r.pairs) - MAX_LISTED} more pairs above the threshold.", ""]
    return lines


def _students(r: ClassReport) -> list[str]:
    """Lowest total first: the points lost per question, the diagnosed mistakes, the problems (the page's view)."""
    rows = []
    for s in students.by_total(r.submissions, r.names):
        lost = ", ".join(f"`{q}` {format_score(sc)}/{format_score(mx)}" + (" (not written yet)" if blank else "")
                         for q, sc, mx, blank in students.lost(s))
        rows.append([markdown_inline(r.names.shown(s.key)), students.total(s),
                     lost or "-", markdown_inline(", ".join(students.mistake_names(s, r.mutants))) or "-",
                     ", ".join(SHORT[p.category] for p in problems(s)) or "-"])
    return ["## Students (lowest total first)", "",
            *_table(["student", "total", "lost", "diagnosed mistakes", "problems"], rows)]


def render(r: ClassReport) -> str:
    """The summary as Markdown."""
    lines = [f"# {markdown_inline(r.lab)}: the class at a glance", "",
             f"{len(r.submissions)} submissions, generated {r.generated_at} by `attnlab report`.", "", "## Scores", ""]
    lines += _table(["question", "points", "mean", "median", "at full marks"],
                    [[f"`{d.name}`" + d.label[len(d.name):] if d is not r.total else "**total**" + d.label[5:],
                      format_score(d.max_score), *d.cells()] for d in [*r.per_question, r.total]])
    lines += ["## Mistakes", ""]
    for i, m in enumerate(r.mistakes, start=1):
        entries = ", ".join(m.entries) or "no catalogue entry"
        who = ", ".join(markdown_inline(r.names.shown(k)) for k in sorted(m.students, key=r.names.shown))
        lines += [f"{i}. **{m.count}** x `{m.question}` ({markdown_inline(entries)}): {markdown_inline(m.hint)}", "",
                  f"   Made by: {who}", ""]
        if m.example:
            lines += [for_markdown(m.example), ""]
    if not r.mistakes:
        lines += ["No mistake was diagnosed.", ""]
    lines += ["### Hidden tests failed most", ""]
    lines += _table(["question", "hidden test", "submissions"], [[f"`{q}`", f"`{t}`", str(n)]
                                                               for q, t, n in r.failed_tests[:20]])
    lines += ["### Not written yet", ""]
    lines += _table(["question", "submissions"], [[f"`{q}`", str(n)] for q, n in r.not_written])
    lines += _health(r)
    lines += _similarity(r) + _students(r)
    return "\n".join(lines)
