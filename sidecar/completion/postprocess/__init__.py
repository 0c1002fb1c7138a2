"""Streaming postprocessing: decide when a growing completion is finished, and clean it.

One rule per module, composed by :mod:`.pipeline` in this order (its docstring says why):

Stop rules, judged on each complete line while the text streams (the stream is closed at
the first line that ends the answer; a growing last line that may turn out to be a copy
is held back):

1. ``line_policy``: one line unless ``CompletionContext.multiline``; several lines end at
   the first blank line after text; leading blank lines are skipped, never an empty answer;
2. ``repetition``: stop at the second copy of any earlier line of the answer;
3. ``suffix_repeat``: stop at a line that the next lines after the cursor already have,
   also up to trailing punctuation and brackets (``foo(a, b)):`` over ``foo(a, b)``).

Text rules, applied to what is kept:

4. ``line_policy.collapse_leading_blank``: one line break before the first line with text;
5. ``indentation``: continuation lines in the document's indentation style;
6. ``join_whitespace``: no double space where the suggestion meets the cursor line;
7. ``trailing_whitespace``: no trailing blanks;
8. ``suffix_overlap``: never return text that already follows the cursor.

The cases each rule was written for are in ``tests/unit/test_postprocess_rules.py`` (one table
per rule) and ``tests/golden/postprocess/`` (recorded from the embedded model by
``scripts/record_golden.py``, checked by ``tests/unit/test_postprocess_golden.py``).
"""

from __future__ import annotations

from .pipeline import StreamFilter, clean, find_end
from .suffix_overlap import strip_suffix_overlap

__all__ = ["StreamFilter", "clean", "find_end", "strip_suffix_overlap"]
