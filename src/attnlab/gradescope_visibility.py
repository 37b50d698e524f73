"""When Gradescope shows students what (``gradescope:`` in ``instructor/course.yml``, course-wide and per lab): a
course setting, carried by the bundle's manifest to the Gradescope output (``grading/outputs/gradescope.py``)."""

from __future__ import annotations

from dataclasses import dataclass

# Gradescope's values (https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Controlling test case
# visibility"), each with when a student sees a test that has it.
VISIBILITIES = {
    "visible": "at once",
    "after_due_date": "after the due date (after the late due date, if late submission is allowed)",
    "after_published": "once the grades are published",
    "hidden": "never",
}
MANIFEST_KEY = "gradescope_visibility"  # in the bundle's manifest.json, written by the build from course.yml


@dataclass(frozen=True)
class Visibility:
    """When students see the "Your notebook" test (``public_checks``) and the questions' tests (``hidden_tests``)."""

    public_checks: str = "visible"
    hidden_tests: str = "after_due_date"

    def __post_init__(self):
        for key, value in (("public_checks", self.public_checks), ("hidden_tests", self.hidden_tests)):
            if value not in VISIBILITIES:
                raise ValueError(f"Gradescope visibility {key}: {value!r} is not one of Gradescope's values: "
                                 f"{', '.join(VISIBILITIES)}")

    def as_dict(self) -> dict[str, str]:
        return {"public_checks": self.public_checks, "hidden_tests": self.hidden_tests}

    @classmethod
    def from_manifest(cls, manifest: dict) -> Visibility:
        """The manifest's setting; the defaults where it has none or a bad one (never more visible than those)."""
        raw = manifest.get(MANIFEST_KEY) if isinstance(manifest, dict) else None
        try:
            return cls(**{k: str(v) for k, v in raw.items() if k in ("public_checks", "hidden_tests")})
        except (AttributeError, TypeError, ValueError):
            return cls()
