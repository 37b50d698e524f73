"""A student's answer as sanitised Markdown: markdown-it-py's CommonMark with raw HTML off (a ``<script>`` or an
``<img onerror>`` is shown as text), images and links off (no remote image is fetched, no link leaves the page),
maths as the text the student typed (``$x_1$``). The answer is untrusted: this is its only way into a page."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable(["image", "link", "autolink"])


def answer_html(text: str) -> Markup:
    """The answer's HTML: markdown-it escapes every character of raw HTML; the tags come from Markdown only."""
    return Markup(_MARKDOWN.render(text))
