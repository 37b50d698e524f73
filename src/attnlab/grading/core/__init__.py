"""The core of grading one submission, below the diagnosis and the runner (`grading/runner.py`): the lab's bundle
(`bundle`) and its catalogue of mutants and variants (`mutants`), the hidden suite (`hidden`) with the comparisons
(`checks`) and inputs (`inputs`) hidden tests use. Everything here
decides; nothing here trusts the student's process.
"""
