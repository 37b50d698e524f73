"""What every layer shares, at the bottom: a result's structured fields (`result_fields`), a score's text
(`score_text`), student-derived text escaped and bounded (`safe_text`) and an unwritten answer's stub message
(`stub_text`). Standard library only."""
