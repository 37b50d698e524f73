"""Student branch guard: no line of a solution block, of the hidden tests or of a catalogue entry (mutants are
near-solutions), and no part of a written question's reference answer or rubric, may reach the student notebook or
the packaged public checks.

Runs on the master (labelled by parse_questions), the finished student notebook and the public test files.
``secret_line`` is the one rule of what counts as a secret line, and ``written_secrets`` / ``written_leak`` of what
counts as a written question's secret, for this gate and the release's (``release/leak_gate.py``).
"""

from __future__ import annotations

from textwrap import dedent

from .markers import BEGIN_SOLUTION, END_SOLUTION, GIVEN_PREFIX, META, SOLUTION_SUFFIX
from .parse_questions import parse_questions

MIN_LENGTH = 13  # shorter lines ("return out", "x = x + 1") are too common to mean anything
WRITTEN_MIN_LENGTH = 24  # shorter text of a written question ("the model", "Says why") is no secret
SHINGLE = 8  # words: a run this long of a reference answer found in a student's file is a copy of it
_NOT_CODE = ("#", "import ", "from ", '"""', "'''")  # comments, imports and docstring fences are no secret


class LeakError(ValueError):
    """Solution code would ship to students."""


def secret_line(raw: str) -> str | None:
    """``raw`` stripped when it is long enough to be a secret (``MIN_LENGTH``) and is code, else None."""
    text = raw.strip()
    return text if len(text) >= MIN_LENGTH and not text.startswith(_NOT_CODE) else None


def solution_lines(nb) -> set[str]:
    lines, inside = set(), False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.split("\n"):
            if BEGIN_SOLUTION.match(line):
                inside = True
            elif END_SOLUTION.match(line):
                inside = False
            elif inside or SOLUTION_SUFFIX.search(line):
                text = secret_line(SOLUTION_SUFFIX.sub("", line))
                if text:
                    lines.add(text)
    return lines


def instructor_lines(texts, master_nb) -> set[str]:
    """The secret lines of ``texts`` (hidden tests, catalogue entries' sources) that the master does not show
    students anyway (a signature, ``super().__init__()``, a line of the given code outside the solution blocks is
    no secret)."""
    public: set[str] = set()
    for cell in master_nb.cells:
        public.update(t for t in map(secret_line, cell.source.split("\n")) if t)
    public -= solution_lines(master_nb)
    return {t for text in texts for t in map(secret_line, dedent(text).split("\n")) if t and t not in public}


def catalogue_lines(entries, master_nb) -> set[str]:
    """The secret lines of the catalogue entries' sources (``instructor_lines``)."""
    return instructor_lines([entry.source for entry in entries], master_nb)


def flat(text: str) -> str:
    """``text`` with every run of white space one space: a re-wrapped copy of a secret is still found."""
    return " ".join(text.split())


def _shingles(text: str) -> set[str]:
    """Every run of ``SHINGLE`` words of ``text`` (white space aside), as flattened text."""
    words = text.split()
    return {" ".join(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def written_shown(master_nb) -> str:
    """The text (flattened) a master shows students: every cell but the reference answers and the markers (the
    written questions' configuration, rubric included)."""
    labelled, _ = parse_questions(master_nb)
    return "\n".join(flat(c.source) for c in labelled.cells if c.metadata[META]["role"] not in ("reference", "marker"))


def written_secrets(master_nb) -> dict[str, str]:
    """Secret text (flattened) -> what it is: every run of ``SHINGLE`` words of a written question's reference
    answer (a shorter reference: all of it), and each rubric criterion of at least ``WRITTEN_MIN_LENGTH``
    characters, unless the master shows it to students anyway (in a prompt, in prose outside the reference
    answers)."""
    labelled, questions = parse_questions(master_nb)
    shown = written_shown(labelled)
    shown_runs = _shingles(shown)
    secrets: dict[str, str] = {}
    for q in (q for q in questions if q.manual):
        runs = _shingles(q.reference) or {flat(q.reference)}
        for run in sorted(runs - shown_runs):
            if len(run) >= WRITTEN_MIN_LENGTH and run not in shown:
                secrets.setdefault(run, f"the reference answer of written question {q.name!r}")
        for criterion in (flat(c) for c, _ in q.rubric):
            if len(criterion) >= WRITTEN_MIN_LENGTH and criterion not in shown:
                secrets.setdefault(criterion, f"a rubric criterion of written question {q.name!r}")
    return secrets


def _found(text: str, secrets) -> list[str]:
    """The secrets that ``text`` holds, white space aside: a run of ``SHINGLE`` words is looked up among the text's
    own runs; anything else is searched for."""
    runs, text = _shingles(text), flat(text)
    return [secret for secret in secrets if (secret in runs if secret.count(" ") == SHINGLE - 1 else secret in text)]


def written_leak(text: str, secrets: dict[str, str]) -> str | None:
    """The first secret of ``secrets`` (``written_secrets``) that ``text`` holds; None if none."""
    return next(iter(_found(text, secrets)), None)


def shown_elsewhere(secrets: dict[str, str], text: str) -> dict[str, str]:
    """``secrets`` without those that ``text`` holds: what students see anyway (the kit's own modules) is no
    secret."""
    shown = set(_found(text, secrets))
    return {secret: what for secret, what in secrets.items() if secret not in shown}


def check_no_leak(master_nb, student_nb, *, catalogue=(), hidden_tests: str = "",
                  public_files: dict[str, str] | None = None) -> None:
    """Given cells (earlier labs' code, see include_given) are meant to be there and are not checked.

    ``catalogue``: the lab's mutants and variants (``Entry`` objects); ``hidden_tests``: the text of the lab's
    hidden tests; ``public_files``: the packaged public test files (name -> text), checked for all three too.
    """
    kinds = {"solution code": solution_lines(master_nb),
             "a line of a catalogue entry": catalogue_lines(catalogue, master_nb),
             "a line of the hidden tests": instructor_lines([hidden_tests], master_nb)}
    fix = {"solution code": "put it inside # BEGIN SOLUTION / # END SOLUTION only once, or reword the hint",
           "a line of a catalogue entry": "the catalogue's mutants are near-solutions: reword the notebook or the entry",
           "a line of the hidden tests": "the hidden tests must stay hidden: reword the notebook or the test"}

    def leaked(line: str) -> str | None:
        return next((kind for kind, lines in kinds.items() if line.strip() in lines), None)

    for i, cell in enumerate(student_nb.cells):
        if cell.source.startswith(GIVEN_PREFIX):
            continue
        for line in cell.source.split("\n"):
            kind = leaked(line)
            if kind:
                raise LeakError(f"student notebook cell {i} contains {kind}: {line.strip()!r}; {fix[kind]}")
    for name, text in (public_files or {}).items():
        for line in text.split("\n"):
            kind = leaked(line)
            if kind:
                raise LeakError(f"public check file {name} contains {kind}: {line.strip()!r}; "
                                "a public check must not show the answer")
    written = written_secrets(master_nb)
    for where, text in [*((f"student notebook cell {i}", c.source) for i, c in enumerate(student_nb.cells)),
                        *((f"public check file {name}", text) for name, text in (public_files or {}).items())]:
        secret = written_leak(text, written)
        if secret:
            raise LeakError(f"{where} contains {written[secret]}: {secret[:120]!r}; the reference answer and the "
                            "rubric stay in the instructor's files: reword the prompt or the notebook")
