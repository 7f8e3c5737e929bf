"""Review gates: a second agent judges a phase whose own checks passed, read-only.

What a reviewer is shown (``prompt.py``, the attempt's change from ``diff.py``), how its answer is
read and what it decides (``verdict.py``), and the watch on the tree that makes sure a review
changed nothing (``guard.py``). The review step itself, which calls the reviewer, is
``phase/review.py``. See docs/architecture.md, "Review gates".
"""
