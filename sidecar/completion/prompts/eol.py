"""The line-break lift: at the end of a finished line, the prompt ends with the line break.

At the end of a line that is finished (it ends in ``;``, ``)``, ``]``, ``}``, ``{``, ``:``
or a closing ``>``), what comes next is almost always a new line. Asked with the cursor
right after the last character, a fill-in-the-middle model must first decide that the
middle begins with a line break; measured with Qwen2.5-Coder-0.5B on the quality
fixtures' end-of-line holes, it often did not: it ended the middle after a lone ``"\\n"``
(an empty suggestion, ``#include <string.h>`` then nothing), or continued the finished
line (``time.sleep(wait) if now + wait > deadline:``), where the same model asked at the
start of the next line wrote that line. So the prompt's prefix gets the line break (the
model starts on the new line, as on a blank line), and the suggestion gets it back in
front of the model's text (:class:`~sidecar.completion.stream.StreamRunner` feeds it to
the filter before the first delta), so the editor inserts ``"\\n" + line`` at the cursor.

Measured (``python -m devtools.bench quality --kinds end_of_line --holes-per-kind 20``, the 0.5B,
a 60 s deadline so that only the prompt differs): exact first line 4 of 20 without the
lift, 6 of 20 with it; empty answers 5 -> 1. Lifting with the current line's indentation
as well (``"\\n" + indent``, as an editor's Enter does) gave 4 of 20 and 3 empty: the
model then cannot dedent, and after ``;`` the next line often closes a block.

Not lifted: text after the cursor on its line, a line ending in a word or an operator
(the user may still be typing it; token healing handles words), trailing spaces, and the
``chat`` strategy (its answer is a message, not a continuation). See
docs/architecture.md, "Local code models".
"""

from __future__ import annotations

from ..context import CompletionContext

#: Last characters of a finished line.
FINISHED = (";", ")", "]", "}", "{", ":")


def line_break_lift(ctx: CompletionContext, strategy: str) -> str:
    """``"\\n"`` when the prompt should end with a line break the cursor line does not
    have yet (see the module doc), else ``""``. Lines are ``\\n``-normalized in ``ctx``."""
    if strategy == "chat" or ctx.mid_line:
        return ""
    line = ctx.line_prefix
    if not line.strip() or line != line.rstrip():
        return ""
    if line.endswith(FINISHED) and not line.endswith("::"):  # C++/Rust paths go on
        return "\n"
    if line.endswith(">") and len(line) > 1 and line[-2] not in " -=>":  # #include <x.h>, Vec<T>
        return "\n"
    return ""
