"""The PDF of a notebook's written answers, for a course that marks them on Gradescope:

    python -m attnlab.kit.written_pdf lab05_self_attention.ipynb      # writes lab05_self_attention-written.pdf

Each written question (the cells between Otter's ``<!-- BEGIN QUESTION -->`` and ``<!-- END QUESTION -->``
comments: its prompt and the student's answer) starts a page of its own, as ``otter export --filtering
--pagebreaks`` lays it out, but drawn with matplotlib's PDF back end, which the kit installs: no LaTeX, no pandoc,
no browser. The text is shown as written (Markdown and ``$...$`` maths as typed), wrapped to the page.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

BEGIN, END = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"  # Otter Export's filtering comments
WIDTH, LINES = 92, 58  # characters per line and lines per A4 page at 9 pt monospace


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def written_blocks(notebook: dict) -> list[str]:
    """The text of each written question (prompt, then answer), in notebook order."""
    blocks, current = [], None
    for cell in notebook.get("cells", []):
        text = _source(cell).strip()
        if text == BEGIN:
            current = []
        elif text == END and current is not None:
            blocks.append("\n\n".join(current))
            current = None
        elif current is not None and cell.get("cell_type") == "markdown":
            current.append(text)
    return blocks


def _lines(block: str) -> list[str]:
    out = []
    for line in block.split("\n"):
        out += textwrap.wrap(line, WIDTH, replace_whitespace=False, drop_whitespace=True) or [""]
    return out


def write_pdf(blocks: list[str], out: Path, title: str) -> int:
    """One page or more per block; returns the number of pages written."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    pages = 0
    with PdfPages(out, metadata={"Title": title}) as pdf:
        for i, block in enumerate(blocks or ["(this notebook has no written questions)"]):
            lines = _lines(f"Written question {i + 1} of {len(blocks)}\n\n{block}")
            for start in range(0, len(lines), LINES):
                fig = Figure(figsize=(8.27, 11.69))  # A4
                text = "\n".join(lines[start:start + LINES]).replace("$", r"\$")  # as typed, not mathtext
                fig.text(0.06, 0.95, text, va="top", ha="left", family="monospace", fontsize=9)
                pdf.savefig(fig)
                pages += 1
    return pages


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m attnlab.kit.written_pdf", description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", help="your lab notebook (.ipynb), saved")
    p.add_argument("-o", "--output", default="", help="the PDF to write (default: <notebook>-written.pdf)")
    args = p.parse_args(argv)
    path = Path(args.notebook)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read {path}: {exc}. Save the notebook in Jupyter and give its .ipynb file.", file=sys.stderr)
        return 1
    out = Path(args.output) if args.output else path.with_name(f"{path.stem}-written.pdf")
    blocks = written_blocks(notebook)
    pages = write_pdf(blocks, out, f"{path.stem}: written answers")
    print(f"wrote {out}: {len(blocks)} written question(s) on {pages} page(s); upload it to the course's written "
          "assignment and mark the page of each question")
    return 0


if __name__ == "__main__":
    sys.exit(main())
