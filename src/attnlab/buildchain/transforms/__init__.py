"""Build transforms: each takes a notebook (and what it needs) and returns a new notebook or files."""
