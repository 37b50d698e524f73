"""attnlab: Jupyter labs that teach deep learning for text, and a grader for them."""

__version__ = "0.1.0"
