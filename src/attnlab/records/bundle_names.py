"""The names of a built lab's files, spelled once: what ``autograder/<lab>/`` holds (the hidden tests and the catalogue
keep the names of the instructor's files they are copied from) and the zips the build makes beside it."""

MANIFEST = "manifest.json"
HIDDEN_TESTS = "hidden_tests.py"
REFERENCE = "reference.py"
CATALOGUE = "catalogue.py"
FILES = (MANIFEST, HIDDEN_TESTS, REFERENCE, CATALOGUE)  # what only instructors and graders may see


def otter_zip_name(lab: str) -> str:
    return f"{lab}-otter.zip"


def gradescope_zip_name(lab: str) -> str:
    return f"{lab}-gradescope.zip"
