"""What every layer shares, at the bottom: a result's structured fields (`result_fields`), a score's text
(`score_text`), student-derived text escaped and bounded (`safe_text`) and a built lab's file names
(`bundle_names`). Standard library only."""
