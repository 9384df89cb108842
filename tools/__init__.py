"""Scripts that maintain the source (``unasync.py``: the async faces' docstrings)."""
