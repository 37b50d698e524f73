"""The course's late policy on nbgrader's route: a late-submission plugin for ``nbgrader autograde``.

nbgrader computes how late each submission is (its ``timestamp.txt`` against the assignment's ``duedate``, which
``nbgrader_setup.set_due_dates`` writes from course.yml's ``due:``) and, for a late one, asks the configured
``LateSubmissionPlugin`` for a penalty: ``late_submission_penalty(student_id, score, total_seconds_late)``, the
points to take off that notebook's score (``None``: none). nbgrader then keeps it as the notebook's
``late_submission_penalty``, apart from the question scores, and its exports, feedback and formgrader show the
score less the penalty. The course's ``nbgrader_config.py`` (written by ``attnlab build`` when a lab has a due date
and a policy or extensions) sets::

    c.AssignLatePenalties.plugin_class = "attnlab.grading.bridges.nbgrader_late.CourseLatePenalty"
    c.CourseLatePenalty.deadlines = {"lab05_self_attention": {...}}   # late_policy.deadline_to_config

so nbgrader's route takes what ``attnlab grade`` takes: the same percent of the points earned (grace, per day or
hour, cap, last day), the student's extension matched by nbgrader's student id as the roster's submission id.
nbgrader gives the plugin no assignment: it is read from the plugin's parent, nbgrader's ``AssignLatePenalties``
preprocessor, which sets ``assignment_id`` before it makes the plugin (nbgrader 0.9).
"""

from __future__ import annotations

from datetime import timedelta

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Dict

from attnlab.late_policy import deadline_from_config, end_of


class CourseLatePenalty(LateSubmissionPlugin):
    """The points taken off a late notebook under its lab's policy (course.yml's ``late:`` and ``extensions:``)."""

    deadlines = Dict(help="lab id -> its due date, policy and extensions (attnlab.late_policy.deadline_to_config)"
                     ).tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        lab = getattr(self.parent, "assignment_id", None)
        if lab is None:
            raise RuntimeError("CourseLatePenalty was made without nbgrader's AssignLatePenalties as its parent, "
                               "so it cannot tell which lab is graded; set it as c.AssignLatePenalties.plugin_class")
        data = self.deadlines.get(lab)
        if data is None:  # a lab without a policy: nbgrader's own default, no penalty
            return None
        deadline = deadline_from_config(data)
        submitted_at = end_of(deadline.due) + timedelta(seconds=float(total_seconds_late))
        late = deadline.lateness(student_id, submitted_at, source="nbgrader")
        penalty = round(float(score) * late.percent / 100.0, 4)  # as late_work.apply_late rounds it
        self.log.warning("attnlab late policy, %s of %s: %s (-%g points)", lab, student_id, late.reason, penalty)
        return penalty if penalty > 0 else None
