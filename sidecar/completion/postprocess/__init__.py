"""Streaming postprocessing: decide when a growing completion is finished, and clean it.

One rule per module: the line policy (``line_policy``), the stop rules (``fence``,
``block_end``, ``repetition``, ``suffix_repeat``, ``suffix_copy``), the confidence cut
(``confidence``, applied by ``pipeline.StreamFilter`` where the backend sent token
log-probabilities) and the text rules (``join_whitespace``, ``indentation``,
``trailing_whitespace``, ``suffix_overlap``); ``common`` holds what they share. Their
order is written once, in :mod:`.pipeline`: the stop rules after the line policy in
``pipeline.STOP_RULES``, the text rules in ``pipeline.TEXT_RULES``; its docstring says
why that order.

The cases each rule was written for are in ``tests/unit/test_postprocess_rules.py`` (one table
per rule) and ``tests/golden/postprocess/`` (recorded from the embedded model by
``scripts/record_golden.py``, checked by ``tests/unit/test_postprocess_golden.py``).
"""

from __future__ import annotations

from .pipeline import StreamFilter, clean, find_end
from .suffix_overlap import strip_suffix_overlap

__all__ = ["StreamFilter", "clean", "find_end", "strip_suffix_overlap"]
