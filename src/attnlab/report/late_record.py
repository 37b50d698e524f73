"""After a batch of a lab with a due date: each graded row's lateness recorded in the gradebook, and the late
rows' feedback written again with their penalty (``attnlab grade`` calls ``record_late``)."""

from __future__ import annotations

import sys


def record_late(lab_info, target: str, out: str, times: dict | None = None) -> dict:
    """Record each graded row's lateness under the lab's due date and late policy in the gradebook ``target``, and
    write the feedback files of the late ones in ``out`` again with their penalty; key -> ``Lateness``."""
    from attnlab.grading.outputs.gradebook import open_gradebook
    from attnlab.grading.scale.submission_times import assess_lateness

    from .load import load_submissions
    from .students import refresh_feedback

    with open_gradebook(target) as book:
        found = assess_lateness(book, lab_info.id, lab_info.deadline, times)
    _, subs = load_submissions(target, lab_info.id)
    refresh_feedback(out, [s for s in subs if s.late and s.late["percent"]])
    sources = sorted({e.source for e in found.values()})
    late = [k for k, e in found.items() if e.percent]
    print(f"late work: {len(found)} submission time(s) recorded (from {', '.join(sources) or 'nowhere'}), "
          f"{len(late)} with a penalty under {lab_info.id}'s policy ({lab_info.late.describe()})", file=sys.stderr)
    by_file = [k for k, e in found.items() if e.source == "file time" and e.percent]
    if by_file:
        print(f"late work: {len(by_file)} penalty(ies) come from the files' modification times, which a copy or an "
              f"unzip sets to when it ran ({', '.join(by_file[:5])}); check them, or pass the real times with "
              "--times FILE and grade again", file=sys.stderr)
    return found
