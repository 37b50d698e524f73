"""What a student's feedback says of their regrade requests (``result["regrades"]``, from
``marking.regrades.feedback_entries``): per request, the question, when they asked, what they wrote, and the
decision with its reason (a new score, or no change), or that it awaits a decision. As Markdown (``feedback.md``)
and as HTML (``feedback.html``); every text is escaped: the student's request as theirs, the reason as a marker's."""

from __future__ import annotations

import html
from datetime import datetime, timezone

from attnlab.records.safe_text import clip, escape_controls, for_markdown, markdown_inline
from attnlab.records.score_text import format_score

REGRADES = "regrades"
HEADING = "Your regrade requests"


def when(text) -> str:
    """A stored UTC time as a student reads it (``2027-02-15 09:00 UTC``); one that does not parse, escaped."""
    try:
        return datetime.fromisoformat(str(text)).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return markdown_inline(str(text))


def _decision(entry: dict, questions: dict) -> str:
    """The decision in words, without its reason."""
    if entry.get("status") != "resolved":
        return "awaiting a decision"
    if entry.get("decision") == "score change" and isinstance(entry.get("score"), (int, float)):
        most = (questions.get(entry.get("question")) or {}).get("max_score")
        out_of = f" / {format_score(most)}" if isinstance(most, (int, float)) else ""
        return f"score changed to {format_score(entry['score'])}{out_of} (decided {when(entry.get('decided_at'))})"
    return f"no change (decided {when(entry.get('decided_at'))})"


def regrade_lines(entries, questions: dict) -> list[str]:
    """The Markdown section, or none without a request."""
    if not isinstance(entries, list) or not entries:
        return []
    lines = [f"## {HEADING}", ""]
    for e in entries:
        # the question is one of the lab's (checked when the request was stored), as feedback.py shows it; the
        # times and the decision are written here from numbers
        lines += [f"### `{e.get('question', '')}`, asked {when(e.get('asked_at'))}: {_decision(e, questions)}", "",
                  "You wrote:", "",
                  for_markdown(clip(str(e.get("text", "")))), ""]
        if e.get("status") == "resolved" and e.get("reason"):
            lines += ["The reason:", "", for_markdown(str(e["reason"])), ""]
    return lines


def regrade_section(entries, questions: dict) -> str:
    """The HTML section, or "" without a request."""
    if not isinstance(entries, list) or not entries:
        return ""
    e_ = lambda text: html.escape(escape_controls(str(text)), quote=True)  # noqa: E731 - one escaping, used often
    items = []
    for e in entries:
        reason = (f"<p>The reason:</p><blockquote>{e_(e['reason'])}</blockquote>"
                  if e.get("status") == "resolved" and e.get("reason") else "")
        items.append(f"<li><p><code>{e_(e.get('question', ''))}</code>, asked {e_(when(e.get('asked_at')))}: "
                     f"<strong>{e_(_decision(e, questions))}</strong></p><p>You wrote:</p>"
                     f"<blockquote>{e_(clip(str(e.get('text', ''))))}</blockquote>{reason}</li>")
    return (f"<section aria-labelledby='regrades'><h2 id='regrades'>{HEADING}</h2><ul>{''.join(items)}</ul>"
            "</section>")
