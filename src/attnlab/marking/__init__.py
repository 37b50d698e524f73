"""Human marking of written answers: the marks live in the gradebook's own database, beside the grader's
rows (``store``: a dynamic rubric per question, marks with optimistic concurrency, score changes with a reason, an
append-only audit log, and ``effective_scores``, the one function exports, the report and feedback read); similar
answers are clustered so that a marker can mark a group at once (``groups``); ``attnlab mark`` serves a small local
web application for the people who mark (``app`` and its pages), on 127.0.0.1 with a token, as Jupyter does."""
