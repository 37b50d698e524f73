"""What a grade leaves behind for people: the gradebook (`gradebook`, over `connection`),
per-submission files written atomically (`files`), feedback (`feedback`)
and Gradescope's results.json (`gradescope`).
"""
