"""The documents the cross-file context tests open: app.py, whose cursor line (the blank
line in main()) uses a name geometry.py defines after 40 filler lines, and a TypeScript
util.ts."""

from __future__ import annotations

A = "file:///w/app.py"
B = "file:///w/geometry.py"
C = "file:///w/util.ts"

A_TEXT = "import geometry\n\ndef main():\n    total = compute_area(3, 4)\n    \ndef compute_local():\n    return 1\n"
B_TEXT = "".join(f"# filler line {i}\n" for i in range(40)) + (
    'def compute_area(w, h):\n    """Area of a w x h rectangle."""\n    return w * h\n\nclass Shape:\n    sides = 4\n'
)
C_TEXT = (
    "export function formatName(first: string, last: string): string {\n"
    "  return `${first} ${last}`;\n"
    "}\n"
    "export const MAX_USERS = 100;\n"
)
