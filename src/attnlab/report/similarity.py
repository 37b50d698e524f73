"""Pairs of submissions whose graded code is unusually alike: evidence for a person to review, never a verdict.

The library is ``copydetect`` (MIT, maintained): it tokenises Python with Pygments, replaces every name by
``V``/``F``/``O`` and every string by ``S`` (so renaming variables changes nothing), and fingerprints the result by
winnowing (Schleimer, Wilkerson and Aiken 2003, the algorithm behind MOSS). Our own winnowing would be 40 lines,
but the tokenising filter and the mapping of matches back onto the raw source (the highlighted side-by-side view)
are what make it useful, and copydetect has both, tested.

What is compared: each submission's graded code cells (``notebook_code.read_cells``) minus every cell that is
exactly a cell of the student template (the lab's released notebook: given code, set-up, stubs), and minus every
fingerprint of the template (a docstring or signature kept around the student's answer). Every student has
those, so they are never evidence.

The score of a pair: the share of each side's fingerprints found in the other, the smaller of the two (a short
submission inside a long one is not a copy of it). Identical code after renaming scores 1.0. The page lists pairs
at or above ``DEFAULT_THRESHOLD`` (0.8), measured on lab05: the reference and two solutions written from the
catalogue's variants score 0.09 to 0.15 with each other (``tests/report/test_similarity.py`` prints them), a copy
with renamed variables 1.0, a notebook that is another plus one changed function 0.83 to 0.96
(``tests/report/test_report_batch.py``). Pairs are counted on all fingerprints at once (one matrix product), so
500 submissions take seconds; the highlighted regions are computed for the pairs shown only. Tokenising (Pygments)
is most of the time: it runs once per distinct code, in worker processes from ``PARALLEL_FROM`` submissions on.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

DEFAULT_THRESHOLD = 0.8
NOISE = 25  # matches shorter than this many characters of filtered code are ignored (copydetect's default)
WINDOW = 6  # winnowing window: every match of NOISE + WINDOW - 1 = 30 characters or more is found
MAX_PAIRS_SHOWN = 25


@dataclass
class Fingerprint:
    name: str
    code: str  # the graded code compared (template cells left out)
    fp: object | None  # copydetect.CodeFingerprint, None for empty code


@dataclass
class Pair:
    """Two submissions (shown names), the score (``min(share_a, share_b)``) and, for the pairs shown, the
    copied regions of each side's code as ``(start, end)`` character offsets."""

    a: str
    b: str
    score: float
    share_a: float
    share_b: float
    regions_a: list[tuple[int, int]]
    regions_b: list[tuple[int, int]]
    code_a: str = ""
    code_b: str = ""


def _copydetect():
    try:
        from copydetect import CodeFingerprint
        from copydetect.utils import get_token_coverage
    except ImportError as exc:
        raise ImportError(f"attnlab report's similarity needs copydetect ({exc}): pip install 'attnlab[instructor]' "
                          "(or pip install copydetect)") from exc

    return CodeFingerprint, get_token_coverage


def template_sources(template_path) -> tuple[set[str], str]:
    """The student template's graded cells: their sources (a submission's cell equal to one is left out) and
    their code joined (whose fingerprints are removed from every submission's)."""
    from attnlab.grading.source.notebook_code import read_cells

    sources = [c.source for c in read_cells(template_path)]
    return {s.strip() for s in sources}, "\n\n".join(sources)


def graded_code(path, template: set[str]) -> str | None:
    """The submission's graded code cells that are not template cells, joined; None when it cannot be read."""
    from attnlab.grading.source.notebook_code import SubmissionError, read_cells

    try:
        cells = read_cells(path)
    except (SubmissionError, OSError):
        return None
    return "\n\n".join(c.source for c in cells if c.source.strip() not in template)


def _filter(code: str):
    """copydetect's tokenising filter (names -> V/F/O, strings -> S): ``(filtered code, offsets)``."""
    _copydetect()
    from copydetect.utils import filter_code

    return filter_code(code, "graded.py", "python")


def fingerprint(name: str, code: str, boilerplate: set | frozenset = frozenset(), filtered=None) -> Fingerprint:
    """Fingerprint ``code`` (Python) without the ``boilerplate`` hashes (``template_hashes``); ``filtered``:
    ``_filter(code)`` when already computed."""
    code_fingerprint, token_coverage = _copydetect()
    if not code.strip():
        return Fingerprint(name, code, None)
    text, offsets = _filter(code) if filtered is None else filtered
    # filter=False fingerprints the filtered text as it is; the offsets map matches back onto the raw code
    fp = code_fingerprint("graded.py", NOISE, WINDOW, filter=False, fp=io.StringIO(text))
    fp.raw_code, fp.offsets = code, offsets
    if boilerplate:
        # copydetect's own boilerplate removal assumes unique hashes (np.intersect1d(assume_unique=True)), which a
        # winnowed list is not; removing them from the hash set and index is exact.
        fp.hashes = {h for h in fp.hashes if h not in boilerplate}
        fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in boilerplate}
        fp.token_coverage = token_coverage(fp.hash_idx, NOISE, len(fp.filtered_code))
    return Fingerprint(name, code, fp if fp.hashes else None)


PARALLEL_FROM = 64  # submissions: from this many on, the tokenising runs in worker processes


def fingerprints(named: list[tuple[str, str]], boilerplate: set | frozenset = frozenset()) -> list[Fingerprint]:
    """``fingerprint`` of each ``(name, code)``. Tokenising (Pygments, 9/10 of the time) runs once per distinct
    code, in worker processes for large classes; the hashing stays here (Python's string hash differs between
    processes)."""
    distinct = sorted({code for _, code in named if code.strip()})
    if len(distinct) >= PARALLEL_FROM and (os.cpu_count() or 1) > 1:
        with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            filtered = dict(zip(distinct, pool.map(_filter, distinct, chunksize=16)))
    else:
        filtered = {code: _filter(code) for code in distinct}
    return [fingerprint(name, code, boilerplate, filtered.get(code)) for name, code in named]


def template_hashes(template_code: str) -> set:
    """Every k-gram hash of the template (window 1: all of them), to remove from the submissions'."""
    code_fingerprint, _ = _copydetect()
    if not template_code.strip():
        return set()
    return set(code_fingerprint("template.py", NOISE, 1, language="python", fp=io.StringIO(template_code)).hashes)


def _shares(prints: list[Fingerprint]) -> np.ndarray:
    """``shares[i, j]``: the share of i's fingerprints that j also has (0 on the diagonal)."""
    n = len(prints)
    index: dict = {}
    rows, cols = [], []
    for i, p in enumerate(prints):
        for h in p.fp.hashes:
            rows.append(i)
            cols.append(index.setdefault(h, len(index)))
    matrix = np.zeros((n, len(index)), dtype=np.float32)
    matrix[rows, cols] = 1.0
    matrix = matrix[:, matrix.sum(axis=0) >= 2]  # a hash only one submission has cannot be shared
    common = matrix @ matrix.T  # common[i, j]: hashes i and j share (exact: small integers in float32)
    sizes = np.array([len(p.fp.hashes) for p in prints], dtype=np.float64)
    shares = common / sizes[:, None]
    np.fill_diagonal(shares, 0.0)
    return shares


def similar_pairs(prints: list[Fingerprint], threshold: float = DEFAULT_THRESHOLD,
                  shown: int = MAX_PAIRS_SHOWN) -> list[Pair]:
    """The pairs at or above ``threshold``, highest score first (ties by name); the first ``shown`` of them
    carry their code and copied regions."""
    prints = [p for p in prints if p.fp is not None]
    if len(prints) < 2:
        return []
    shares = _shares(prints)
    score = np.minimum(shares, shares.T)
    i, j = np.nonzero(np.triu(score >= threshold - 1e-9, k=1))
    order = sorted(zip(i.tolist(), j.tolist()),
                   key=lambda ij: (-score[ij], prints[ij[0]].name, prints[ij[1]].name))
    pairs = []
    for rank, (a, b) in enumerate(order):
        pair = Pair(prints[a].name, prints[b].name, float(score[a, b]), float(shares[a, b]), float(shares[b, a]),
                    [], [])
        if rank < shown:
            add_regions(pair, prints[a], prints[b])
        pairs.append(pair)
    return pairs


def add_regions(pair: Pair, a: Fingerprint, b: Fingerprint) -> None:
    """The copied regions of both sides (copydetect's slices, mapped back onto the raw code)."""
    from copydetect import compare_files

    _, _, (slices_a, slices_b) = compare_files(a.fp, b.fp)
    pair.code_a, pair.code_b = a.code, b.code
    pair.regions_a = _regions(slices_a, len(a.code))
    pair.regions_b = _regions(slices_b, len(b.code))


def _regions(slices, length: int) -> list[tuple[int, int]]:
    """copydetect's ``2 x N`` slice array as sorted, merged, in-range ``(start, end)`` pairs."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    spans = sorted((max(0, int(s)), min(length, int(e))) for s, e in zip(slices[0], slices[1]))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
