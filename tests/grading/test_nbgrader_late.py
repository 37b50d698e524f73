"""nbgrader's route takes what ``attnlab grade`` takes for late work: the course's plugin, made by nbgrader's own
``AssignLatePenalties`` from the config the build writes, gives the policy's percent of the notebook's points
(on time, two days late, late after an extension, past the last day), and a lab without a policy gets none. The
whole round trip through ``nbgrader autograde``: tests/test_nbgrader.py (the course named with spaces)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from nbgrader.preprocessors import AssignLatePenalties
from traitlets.config import Config

from attnlab.buildchain.transforms.nbgrader_source import nbgrader_config
from attnlab.late_policy import LabDeadline, LatePolicy, deadline_from_config, deadline_to_config

DUE = datetime(2027, 2, 14, 23, 59, tzinfo=timezone.utc)
DEADLINE = LabDeadline(DUE, LatePolicy(grace=timedelta(minutes=15), percent=10.0, last=timedelta(days=7)),
                       {"carol": timedelta(days=2), "dan": datetime(2027, 2, 20, 12, 0, tzinfo=timezone.utc)})


def _plugin(lab: str = "lab01_text_as_vectors"):
    """The plugin as ``nbgrader autograde`` makes it: from the config's lines, by its preprocessor."""
    config = Config()
    config.AssignLatePenalties.plugin_class = "attnlab.grading.bridges.nbgrader_late.CourseLatePenalty"
    config.CourseLatePenalty.deadlines = {"lab01_text_as_vectors": deadline_to_config(DEADLINE)}
    pre = AssignLatePenalties(config=config)
    pre.assignment_id = lab  # what preprocess() sets before init_plugin()
    pre.init_plugin()
    return pre.plugin_inst


def test_a_deadline_goes_through_the_config_unchanged():
    assert deadline_from_config(deadline_to_config(DEADLINE)) == DEADLINE
    dated = LabDeadline(DUE.date(), LatePolicy(percent=5.0, unit="hour", cap=50.0, last=DUE.date()), {})
    assert deadline_from_config(deadline_to_config(dated)) == dated


@pytest.mark.parametrize("student, late, penalty", [
    ("alice", timedelta(minutes=10), None),  # within the grace period
    ("bob", timedelta(hours=34), 4.0),  # two days (or part of one) late: 20% of 20 points
    ("carol", timedelta(days=2, hours=12), 2.0),  # her 2 extra days: 12 hours late, 10%
    ("dan", timedelta(days=5), None),  # his new deadline is later than that
    ("erin", timedelta(days=8), 20.0),  # past the last day for late work: every point
])
def test_the_penalty_is_the_policys_percent_of_the_points(student, late, penalty):
    assert _plugin().late_submission_penalty(student, 20.0, late.total_seconds()) == penalty


def test_a_lab_without_a_policy_gets_none_and_the_config_names_the_plugin():
    assert _plugin("lab02_word_embeddings").late_submission_penalty("bob", 20.0, 10 * 86400.0) is None
    text = nbgrader_config("dl-for-text", {"lab01_text_as_vectors": DUE.isoformat()},
                           {"lab01_text_as_vectors": deadline_to_config(DEADLINE)})
    assert 'c.AssignLatePenalties.plugin_class = "attnlab.grading.bridges.nbgrader_late.CourseLatePenalty"' in text
    assert "AssignLatePenalties" not in nbgrader_config("dl-for-text", {"lab01_text_as_vectors": DUE.isoformat()})
