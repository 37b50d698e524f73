"""The student's own outputs beside a written answer: what the code cells of the question's section printed, showed
or plotted in the notebook they handed in (the cells after the last heading before the answer cell: the experiment
the question asks about), since rubric items ask about the student's own numbers.

The notebook is read from the path the gradebook recorded (``read_submission``: a regular file within the size
limit) and used only when its digest is still the one that was graded. Everything in it is untrusted: text (a
stream, a result's ``text/plain``, an error) is cut to ``MAX_TEXT_CHARS``, its ANSI colours dropped, its invisible and
bidi characters shown (``escape_controls``), and escaped by the template; HTML is never rendered (a table's
``text/plain`` is shown, or its HTML as source); an image only as a PNG whose bytes are checked, re-encoded as a
``data:`` URI, at most ``MAX_IMAGE_BYTES``. Why nothing is shown (no notebook, a changed one, no such cells) is
said."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field

from attnlab.grading.core.written_answers import Question, answer_position, notebook_cells
from attnlab.grading.source.notebook_code import SubmissionError, read_submission
from attnlab.records.safe_text import escape_controls

MAX_CELLS = 4  # the section's last code cells
MAX_OUTPUTS = 8  # per cell
MAX_TEXT_CHARS = 6_000
MAX_IMAGE_BYTES = 1_000_000
PNG = b"\x89PNG\r\n\x1a\n"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Output:
    kind: str  # "text" or "image"
    text: str = ""  # the text, or an image's alternative text
    src: str = ""  # an image's data: URI


@dataclass
class OwnOutputs:
    note: str = ""  # why nothing (or not everything) is shown
    cells: list[list[Output]] = field(default_factory=list)


def own_outputs(gradebook, lab: str, key: str, question: Question) -> OwnOutputs:
    """The outputs of ``key``'s code cells before its answer to ``question`` (``OwnOutputs.note`` says why none)."""
    row = gradebook.transaction(lambda ex: ex("SELECT path, sha256 FROM submissions WHERE lab = ? AND key = ?",
                                              (lab, key)).fetchone())
    if row is None:
        return OwnOutputs("no graded notebook is recorded for this answer: no outputs to show")
    path, sha = row[0].replace("\\\\", "\\"), row[1]
    try:
        data = read_submission(path)
    except (OSError, SubmissionError) as exc:  # SubmissionUnreadable included
        return OwnOutputs(f"the notebook that was graded cannot be read where it was graded ({exc}): no outputs to "
                          "show")  # its path is not shown: it names the student
    if hashlib.sha256(data).hexdigest() != sha:
        return OwnOutputs("the notebook changed since it was graded: its outputs are not shown (grade it again)")
    cells = notebook_cells(data)
    at = answer_position(cells, question)
    if at is None:
        return OwnOutputs("the answer's cell is not in the notebook: no outputs to show")
    section = []
    for cell in reversed(cells[:at]):
        if cell.get("cell_type") == "markdown" and _source(cell).lstrip().startswith("#"):
            break  # the section's heading
        if cell.get("cell_type") == "code":
            section.insert(0, cell)
    shown = [[o for o in map(_output, _outputs(c)[:MAX_OUTPUTS]) if o] for c in section[-MAX_CELLS:]]
    shown = [c for c in shown if c]
    return OwnOutputs("" if shown else "the code cells before this question have no saved outputs", shown)


def _source(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(t for t in text if isinstance(t, str)) if isinstance(text, list) else str(text)


def _outputs(cell: dict) -> list[dict]:
    outputs = cell.get("outputs")
    return [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []


def _text(value) -> str:
    text = "".join(t for t in value if isinstance(t, str)) if isinstance(value, list) else value
    if not isinstance(text, str):
        return ""
    text = _ANSI.sub("", text)
    if len(text) > MAX_TEXT_CHARS:
        text = f"{text[:MAX_TEXT_CHARS]}\n[... {len(text) - MAX_TEXT_CHARS:,} more characters not shown]"
    return escape_controls(text)


def _output(out: dict) -> Output | None:
    kind = out.get("output_type")
    if kind == "stream":
        return Output("text", _text(out.get("text"))) if _text(out.get("text")) else None
    if kind == "error":
        lines = out.get("traceback") if isinstance(out.get("traceback"), list) else []
        return Output("text", _text([f"{out.get('ename')}: {out.get('evalue')}\n", *[f"{t}\n" for t in lines
                                                                                  if isinstance(t, str)]]))
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    image = _png(data.get("image/png"))
    if image:
        return Output("image", "a plot from the student's notebook", image)
    for mime in ("text/plain", "text/html"):  # HTML never rendered: shown as its source
        if _text(data.get(mime)):
            return Output("text", _text(data.get(mime)))
    return None


def _png(value) -> str:
    """A ``data:`` URI of the PNG ``value`` (base64 text) holds, or ``""`` when it is no PNG or too large."""
    text = "".join(t for t in value if isinstance(t, str)) if isinstance(value, list) else value
    if not isinstance(text, str) or len(text) > MAX_IMAGE_BYTES * 4 // 3 + 4096:
        return ""
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return ""
    if not raw.startswith(PNG) or len(raw) > MAX_IMAGE_BYTES:
        return ""
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")
