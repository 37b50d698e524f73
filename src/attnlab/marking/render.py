"""A student's answer as sanitised Markdown: markdown-it-py's CommonMark with raw HTML off (a ``<script>`` or an
``<img onerror>`` is shown as text), images and links off (no remote image is fetched, no link leaves the page),
tables as tables, maths kept whole (``$a \\, b$``: no backslash lost to Markdown's escapes) and typeset as MathML
on the server (``maths``: no script in the page) in a ``math`` span or block; invisible and bidirectional characters
shown as visible escapes (``safe_text.escape_controls``: ``<U+202E>``), so that no answer reads otherwise than it
is. The answer is untrusted: this is its only way into a page."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup
from mdit_py_plugins.dollarmath import dollarmath_plugin

from attnlab.marking.maths import formula_html
from attnlab.records.safe_text import escape_controls

_MARKDOWN = (MarkdownIt("commonmark", {"html": False, "linkify": False}).disable(["image", "link", "autolink"])
             .enable("table").use(dollarmath_plugin, double_inline=True,
                                  renderer=lambda tex, options: formula_html(tex, options["display_mode"])))


def answer_html(text: str) -> Markup:
    """The answer's HTML: markdown-it escapes every character of raw HTML; the tags come from Markdown only."""
    return Markup(_MARKDOWN.render(escape_controls(text)))


def snippet_html(text: str, limit: int = 160) -> Markup:
    """The start of an answer (``limit`` characters, its lines joined) as inline Markdown: emphasis, code and maths
    as in the answer, never a block, never raw HTML; a formula cut in two shows as its text."""
    flat = " ".join(text.split())
    flat = flat if len(flat) <= limit else f"{flat[:limit]}… ({len(flat) - limit} more characters)"
    return Markup(_MARKDOWN.renderInline(escape_controls(flat)))
