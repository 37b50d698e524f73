"""The name a person reads for each submission key: the key as the gradebook has it (the submitted file's name),
the roster's name beside it, or, anonymised, ``student-NNN`` numbered in an order that does not follow the names
(their SHA-256); ``Names.scrub`` takes them out of any text a submission produced. The report and the marking app
name students through it."""

from __future__ import annotations

import hashlib
from pathlib import Path


class Names:
    """The name shown for each submission key, and the scrubbing of names out of student-produced text."""

    MIN_SCRUB = 3  # a stem shorter than this ("a.ipynb") is not replaced inside other words' text

    def __init__(self, submissions, *, anonymise: bool = False, roster_names=None):
        self.anonymise = anonymise
        # key -> the roster's name for the student (never when anonymising: an alias names nobody)
        self.roster_names = {} if anonymise else {k: v for k, v in dict(roster_names or {}).items() if v}
        order = sorted(submissions, key=lambda s: hashlib.sha256(s.key.encode("utf-8", "replace")).hexdigest())
        width = max(3, len(str(len(order))))
        self._alias = {s.key: f"student-{i:0{width}d}" for i, s in enumerate(order, start=1)}
        self._paths = {s.key: s.path for s in submissions}

    def __call__(self, key: str) -> str:
        """The name a person reads: the key as in the gradebook, or its alias."""
        return self._alias[key] if self.anonymise else key

    def shown(self, key: str) -> str:
        """The student as every section of the report names them: the roster's name and the submission
        (``Alice Smith (alice.ipynb)``) where a roster names them, else ``self(key)``."""
        name = self.roster_names.get(key)
        return f"{name} ({self(key)})" if name else self(key)

    def alias(self, key: str) -> str:
        return self._alias[key]

    def stem(self, key: str) -> str:
        """The identifier for an LMS import: the key's stem (``alice.ipynb`` -> ``alice``), or the alias."""
        return self._alias[key] if self.anonymise else Path(key).stem

    def scrub(self, key: str, text: str, *, always: bool = False) -> str:
        """``text`` with the submission's path, file name and stem replaced by its alias (when anonymising, or
        ``always``: the anonymised example messages)."""
        if not (self.anonymise or always):
            return text
        alias = self._alias[key]
        for name in (self._paths.get(key) or "", key, Path(key).stem):
            if len(name) >= self.MIN_SCRUB:
                text = text.replace(name, alias)
        return text
