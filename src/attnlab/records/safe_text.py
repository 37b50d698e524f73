"""Student-derived text, made safe for where it is shown: a terminal, Markdown, Gradescope, a CSV file opened in a
spreadsheet, and bounded in size.

Anything a submission controls (its error messages, file names, exception text) may hold control characters
(``ESC[2K``, ``\\r`` to overwrite a score on a terminal), bidirectional overrides, Markdown headings, raw HTML,
spreadsheet formulas (``=HYPERLINK(...)``), line breaks that would forge a ``Total:`` line, bytes that are not UTF-8
(a file name) or megabytes of text. Every string that leaves the grader for a person goes through one of these.

    >>> for_terminal("9.0 / 30\\r\\x1b[2K30.0 / 30")
    '9.0 / 30\\\\x0d\\\\x1b[2K30.0 / 30'
    >>> clip("x" * 50, 10)
    'xxxxxxxxxx… (40 more characters)'
"""

from __future__ import annotations

import os
import re
import unicodedata

# What the grader keeps of the text a submission controls, per submission (the byte budget of messages):
MAX_MESSAGE_CHARS = 2000  # one message (an error, a failed test's explanation): at most 8 KB of UTF-8
MAX_MESSAGES = 20  # notebook-level errors kept per submission; the rest are counted

# What is escaped (shown visibly) wherever student text is shown, by Unicode category, not by a list of cases:
# control characters (Cc, tab and newline aside), format characters (Cf: zero-width spaces and joiners, the
# byte-order mark, bidirectional controls such as U+202E and U+2066-U+2069, U+061C, tags), line and paragraph
# separators (Zl, Zp), every space but U+0020 (Zs), lone surrogates (Cs: a file name that is not UTF-8), private
# use (Co) and unassigned (Cn) code points, and the other code points Unicode says a renderer may show as nothing
# (Default_Ignorable_Code_Point: Hangul fillers, variation selectors, U+034F...). ``alice\u200b.ipynb`` never
# reads as ``alice.ipynb``: it shows as ``alice<U+200B>.ipynb``.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_IGNORABLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
                        "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def is_invisible(ch: str) -> bool:
    """Whether ``ch`` is escaped where a person reads it (see above); tab, newline and U+0020 are not."""
    if ch in "\t\n ":
        return False
    return unicodedata.category(ch) in _ESCAPED_CATEGORIES or _IGNORABLE.match(ch) is not None


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0xa0 else f"<U+{code:04X}>"


def escape_controls(text: str) -> str:
    """Control, format and other invisible characters as visible escapes (``\\x1b``, ``<U+200B>``); tab and
    newline stay."""
    text = str(text)
    if text.isascii():
        return _ASCII_CONTROL.sub(lambda m: _visible(m.group(0)), text)
    return "".join(_visible(ch) if is_invisible(ch) else ch for ch in text)


def for_terminal(text: str) -> str:
    """One line for a terminal table: controls escaped, newlines and tabs shown as ``\\n`` and ``\\t``."""
    return escape_controls(text).replace("\n", "\\n").replace("\t", "\\t")


def readable_name(name) -> str:
    """A file name (``str`` from the file system, or ``bytes``) as text that always encodes as UTF-8: bytes
    that are not UTF-8 (the file system's ``surrogateescape``) become visible ``\\xNN`` escapes and a backslash
    is doubled, so that two different names never give the same text (the gradebook key).

        >>> readable_name(os.fsdecode(b"caf\\xe9.ipynb")), readable_name("caf\\\\xe9.ipynb")
        ('caf\\\\xe9.ipynb', 'caf\\\\\\\\xe9.ipynb')
    """
    text = os.fsdecode(name) if isinstance(name, (bytes, os.PathLike)) else str(name)
    return _SURROGATE.sub(_escape_surrogate, text.replace("\\", "\\\\"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match) -> str:
    code = ord(match.group(0))
    return f"\\x{code - 0xdc00:02x}" if 0xdc80 <= code <= 0xdcff else f"\\u{code:04x}"


def for_csv(text) -> str:
    """A text cell of a CSV file: one line, controls escaped, and a leading ``= + - @``, tab or CR
    neutralised with a ``'`` so that a spreadsheet never runs it as a formula. Numbers are not text: write
    them as they are (a negative score stays a number)."""
    body = for_terminal(text)
    return "'" + body if body.startswith(_FORMULA_START) else body


def bullet_lines(messages: list[str]) -> str:
    """Messages as plain-text bullets whose structure the text cannot forge: each message starts a line
    with ``- ``, its own line breaks continue it indented by two spaces, controls are escaped. No line of
    a message can start at the left margin, so no message can add a line such as ``Total: 30 / 30``."""
    return "\n".join("- " + escape_controls(m).replace("\n", "\n  ") for m in messages)


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def cap_messages(messages: list[str], limit: int = MAX_MESSAGES) -> list[str]:
    """At most ``limit`` messages, each clipped, then one line counting the rest."""
    kept = [clip(m) for m in messages[:limit]]
    if len(messages) > limit:
        kept.append(f"… and {len(messages) - limit:,} more")
    return kept


def for_markdown(text: str) -> str:
    """A fenced code block that the text cannot close: headings, HTML, links and tables inside stay literal."""
    body = escape_controls(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def markdown_inline(text: str) -> str:
    """Text for one Markdown line (a name in a heading or a table cell): escaped, never markup."""
    body = for_terminal(text)
    body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~])", r"\\\1", body)
