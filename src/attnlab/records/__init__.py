"""What every layer shares, at the bottom: a result's structured fields (`result_fields`), a score's text
(`score_text`), student-derived text escaped and bounded (`safe_text`), a built lab's file names (`bundle_names`),
a stub's text until a student answers (`stub_text`) and the names people read (`student_names`). Standard library
only."""
