"""The report: one line per check (status, title, measured value) and, for anything not
OK, an indented ``->`` line with the fix, then the verdict (``all good``, ``usable, with
warnings`` or ``problems found``) and the counts of OK, WARN and FAIL; or the same as JSON
(``ok``, ``exit_code``, ``checks`` with each check's ``data``). It measures nothing. See
docs/architecture.md (``tools/``).
"""

from __future__ import annotations

import json
from dataclasses import asdict

from .base import FAIL, OK, WARN, Check


def render_text(checks: list[Check], exit_code: int) -> str:
    lines = []
    width = max(len(c.title) for c in checks)
    for c in checks:
        lines.append(f"{c.status:<4}  {c.title:<{width}}  {c.value}")
        if c.fix and c.status != OK:
            lines.append(f"{'':<4}  {'':<{width}}  -> {c.fix}")
    counts = {k: sum(1 for c in checks if c.status == k) for k in (OK, WARN, FAIL)}
    verdict = "problems found" if exit_code else ("all good" if not counts[WARN] else "usable, with warnings")
    lines.append(f"\n{verdict}: {counts[OK]} OK, {counts[WARN]} WARN, {counts[FAIL]} FAIL")
    return "\n".join(lines) + "\n"


def render_json(checks: list[Check], exit_code: int) -> str:
    return (
        json.dumps({"ok": exit_code == 0, "exit_code": exit_code, "checks": [asdict(c) for c in checks]}, indent=2)
        + "\n"
    )
