"""The per-student feedback as a self-contained HTML page (``feedback.html``): what ``feedback.md`` says, rendered,
for a student to open in a browser or an LMS to show (``attnlab feedback``, ``attnlab report``).

One file, no script, no image, no request: the styles are inline and a Content-Security-Policy forbids anything
else. It shows the total (after a late penalty, with the points awaiting marking), the late penalty (when it was
handed in, the deadline, what was taken), the notebook-level errors, what a person will review, a table of the
questions' scores, and per question: a changed score's reason, the rubric items applied, the marker's comment, the
likely mistake the grader named, and the failed properties (the messages of its failed checks); then the student's
regrade requests with each decision and its reason (``regrade_feedback``). Every text is
escaped (``html.escape``): a student's messages, a marker's comment, file names.
"""

from __future__ import annotations

import html

from attnlab.grading.core.written_answers import (
    AWAITING,
    COMMENT,
    KIND,
    REASON,
    RUBRIC,
    STATUS,
    WRITTEN,
    change_text,
    points_awaiting,
    total_text,
)
from attnlab.grading.outputs.late_work import LATE
from attnlab.grading.outputs.regrade_feedback import REGRADES, regrade_section
from attnlab.records import result_fields as fields
from attnlab.records.safe_text import cap_messages, clip
from attnlab.records.score_text import format_score

CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """body{font:16px/1.5 system-ui,sans-serif;color:#1a1a1a;background:#fff;margin:0}
main{max-width:52rem;margin:0 auto;padding:1.5rem}h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse}caption{text-align:left;font-weight:600}
th,td{border:1px solid #767676;padding:.3rem .7rem;text-align:left}
.total{font-size:1.25rem;font-weight:700}.late{border-left:4px solid #8a4b00;padding-left:1rem}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f3f3;padding:.5rem;margin:.2rem 0}
code{background:#f3f3f3;padding:0 .2rem}.mistake{border-left:4px solid #005a9c;padding-left:1rem}"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _score(q: dict) -> str:
    if q.get("score") is None:
        return f"{AWAITING} ({format_score(q['max_score'])} points)"
    return f"{format_score(q['score'])} / {format_score(q['max_score'])}"


def _messages(messages: list[str], limit: int = 200) -> str:
    return "<ul>" + "".join(f"<li><pre>{_e(clip(m))}</pre></li>" for m in cap_messages(messages, limit)) + "</ul>"


def late_section(late: dict | None) -> str:
    """The "Late work" section, or "" without a recorded time (``late_work.apply_late``)."""
    if not isinstance(late, dict) or not late.get("reason"):
        return ""
    whose = "your extended deadline" if late.get("extended") else "the deadline"
    taken = (f"<p>The penalty took {_e(format_score(late['points']))} points off your total; each question keeps "
             "the score it earned.</p>" if late.get("percent") else "")
    return (f"<section class='late' aria-labelledby='late'><h2 id='late'>Late work</h2><p>Handed in "
            f"{_e(late['submitted_at'])}; {whose} was {_e(late['deadline'])}: <strong>{_e(late['reason'])}</strong>."
            f"</p>{taken}</section>")


def _marks(q: dict) -> str:
    parts = []
    if q.get(STATUS) == "changed" and q.get(REASON):
        parts.append(f"<p>Your score was {_e(change_text(q))}, for this reason:</p><blockquote>{_e(q[REASON])}"
                     "</blockquote>")
    if q.get(RUBRIC):
        items = "".join(f"<li>{_e(c)} ({'+' if p > 0 else ''}{_e(format_score(p))})</li>" for c, p in q[RUBRIC])
        parts.append(f"<p>Rubric items applied:</p><ul>{items}</ul>")
    if q.get(COMMENT):
        parts.append(f"<p>Comment from your marker:</p><blockquote>{_e(q[COMMENT])}</blockquote>")
    return "".join(parts)


def _question(i: int, name: str, q: dict) -> str:
    body = [_marks(q)]
    mistake = q.get(fields.MISTAKE) or {}
    if mistake.get(fields.HINT):
        body.append(f"<p class='mistake'><strong>Likely mistake:</strong> {_e(mistake[fields.HINT])}</p>")
    if q.get("messages"):
        body.append("<p>What the checks found:</p>" + _messages(q["messages"]))
    elif q.get(KIND) == WRITTEN and q.get("score") is None:
        body.append("<p>A person will mark your answer; this page shows the mark once it is given.</p>")
    elif q.get("score") is not None and q["score"] >= q["max_score"]:
        body.append("<p>All checks passed.</p>")
    elif q.get(KIND) != WRITTEN:
        body.append("<p>No details were given for the points lost here; ask your instructor.</p>")
    return (f"<section aria-labelledby='q{i}'><h2 id='q{i}'><code>{_e(name)}</code>: {_e(_score(q))}</h2>"
            + "".join(body) + "</section>")


def feedback_page(result: dict, *, title: str) -> str:
    """The page of one marked result (a gradebook row with the marks and any late penalty applied); ``title``
    names the lab (and the student) in the page's title and heading."""
    questions = result.get("questions") or {}
    total = total_text(result["score"], result["max_score"], points_awaiting(result))
    parts = [f"<h1>{_e(title)}</h1>", f"<p class='total'>Total: {_e(total)}</p>", late_section(result.get(LATE))]
    if result.get("errors"):
        parts.append("<section aria-labelledby='nb'><h2 id='nb'>About your notebook</h2>"
                     + _messages(result["errors"], 20) + "</section>")
    if result.get("review"):
        parts.append("<section aria-labelledby='rv'><h2 id='rv'>Your instructor will review</h2>"
                     + _messages(result["review"], 20) + "</section>")
    if questions:
        rows = "".join(f"<tr><th scope='row'><code>{_e(n)}</code></th><td>{_e(_score(q))}</td></tr>"
                       for n, q in questions.items())
        parts.append("<table><caption>Your score per question</caption><thead><tr><th scope='col'>question</th>"
                     f"<th scope='col'>score</th></tr></thead><tbody>{rows}</tbody></table>")
    parts += [_question(i, n, q) for i, (n, q) in enumerate(questions.items(), start=1)]
    parts.append(regrade_section(result.get(REGRADES), questions))
    return ("<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body><main>"
            + "".join(parts) + "</main></body></html>\n")
