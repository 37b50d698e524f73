"""nbgrader's configuration for this course (written by `attnlab build`; edit instructor/course.yml instead).

    cd nbgrader && nbgrader generate_assignment lab05_self_attention && nbgrader autograde lab05_self_attention
"""

c = get_config()  # noqa: F821 - nbgrader provides it
c.CourseDirectory.course_id = 'attnlab'
# The kit raises NotImplementedError("... not written yet") in its own stubs; nbgrader's stub says the same.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError(\"not written yet\")"}
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
