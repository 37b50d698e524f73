"""The course rules as code: what a graded cell may reach (`rules`), a lab's forbidden library calls
(`forbidden_calls`) and what a breach costs, question by question (`rule_costs`). The notebook's opening and
docs/CURRICULUM.md state the same rules to students.
"""
