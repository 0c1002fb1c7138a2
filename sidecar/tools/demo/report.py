"""What the demo prints: typing as it happens, suggestions as ghost text, a summary.

On a terminal, ghost text is dimmed (ANSI) and the line being typed is redrawn in
place; elsewhere (pipes, CI logs, ``NO_COLOR``) output is plain, one event per
line, with ghost text in square brackets. Times are milliseconds.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from typing import Any, TextIO

from lsprotocol import types

DIM = "\x1b[2m"
BOLD = "\x1b[1m"
RESET = "\x1b[0m"
CLEAR_LINE = "\r\x1b[K"
MAX_GHOST_LINES = 8

_SNIPPET_FIELD = re.compile(r"\$\{\d+:([^}]*)\}|\$\{\d+\}|\$\d+")


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_stats(values_ms: list[float]) -> dict[str, float | int | None]:
    """p50, p90, max and mean of ``values_ms`` in milliseconds (None when empty)."""
    if not values_ms:
        return {"count": 0, "p50": None, "p90": None, "max": None, "mean": None}
    return {
        "count": len(values_ms),
        "p50": round(percentile(values_ms, 50), 1),
        "p90": round(percentile(values_ms, 90), 1),
        "max": round(max(values_ms), 1),
        "mean": round(sum(values_ms) / len(values_ms), 1),
    }


def item_text(item: types.InlineCompletionItem) -> str:
    """The text an item inserts; snippet placeholders become their default text."""
    text = item.insert_text
    if isinstance(text, types.StringValue):
        return _SNIPPET_FIELD.sub(lambda m: m.group(1) or "", text.value)
    return text or ""


def ghost_text(item: types.InlineCompletionItem, line_text: str, cursor: int) -> str:
    """What an editor would show after the cursor for ``item``.

    ``line_text`` is the cursor's line and ``cursor`` the cursor's code-point index
    in it. An item whose ``range`` starts before the cursor repeats the text
    already typed; that part is not ghost text.
    """
    text = item_text(item)
    rng = item.range
    if rng is not None and rng.start.character is not None:
        typed = _utf16_prefix(line_text, rng.start.character)
        already = line_text[typed:cursor] if typed <= cursor else ""
        if already and text.startswith(already):
            return text[len(already) :]
    return text


def backend_label(status: dict[str, Any]) -> str | None:
    """Where a ``sidecar/status`` payload says its model runs: "local engine" (the managed
    llama-cpp-python engine), "cloud: SiliconFlow", an external engine's name, or None."""
    backend, side = status.get("backend"), status.get("side")
    if isinstance(backend, str) and backend.startswith("local engine"):
        return "local engine"
    if side == "cloud":
        return f"cloud: {backend}" if backend else "cloud"
    return str(backend or side) if (backend or side) else None


def model_text(s: dict[str, Any]) -> str:
    """The summary's ``model`` line: the model of the server's last ``sidecar/status`` and
    where it runs, e.g. "qwen2.5-coder-0.5b-instruct (local engine)"."""
    model = s.get("model")
    if not model:
        return (
            "unknown (the server sent no status)"
            if not s.get("last_status")
            else "unknown (the server's status names none)"
        )
    where = s.get("model_backend")
    return f"{model} ({where})" if where else str(model)


def _utf16_prefix(line: str, units: int) -> int:
    """Code-point index of UTF-16 column ``units`` in ``line`` (clamped)."""
    count = 0
    for i, ch in enumerate(line):
        if count >= units:
            return i
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


class Reporter:
    """Writes the demo's progress to ``stream`` (stdout by default)."""

    def __init__(self, stream: TextIO | None = None, fancy: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        if fancy is None:
            isatty = getattr(self.stream, "isatty", lambda: False)()
            fancy = bool(isatty) and "NO_COLOR" not in os.environ
        self.fancy = fancy
        self._live = ""  # what is drawn on the current, unfinished terminal line

    # -- low level --------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.fancy and text else text

    def _bold(self, text: str) -> str:
        return f"{BOLD}{text}{RESET}" if self.fancy else text

    def _clear_live(self) -> None:
        if self._live:
            self._write(CLEAR_LINE)
            self._live = ""

    def _draw_live(self, text: str, dimmed: str = "") -> None:
        """Redraw the unfinished line as ``text`` followed by dimmed ``dimmed``."""
        width = shutil.get_terminal_size((100, 24)).columns - 1
        if len(text) + len(dimmed) > width:
            keep = max(width - len(text) - 1, 0)
            if keep > 0 and dimmed:
                dimmed = "…" + dimmed[-keep:]
            else:
                text, dimmed = "…" + (text + dimmed)[-(width - 1) :], ""
        self._write(CLEAR_LINE + text + self._dim(dimmed))
        self._live = text + self._dim(dimmed) or " "

    def println(self, text: str = "") -> None:
        """Print one finished line, keeping the live typing line below it."""
        live = self._live
        self._clear_live()
        self._write(text + "\n")
        if live:
            self._write(live)
            self._live = live

    @staticmethod
    def _gutter(line_no: int | None) -> str:
        return f"{line_no:>5} │ " if line_no is not None else "      │ "

    # -- events -----------------------------------------------------------------------

    def header(self, file: str, plan_info: dict[str, Any], command: list[str]) -> None:
        self.println(self._bold("sidecar demo") + f" · {file}")
        self.println(
            f"  typing lines {plan_info['first_line']}-{plan_info['last_line']} "
            f"({plan_info['typed_chars']} characters, {plan_info['keystrokes']} keystrokes, "
            f"{plan_info['planned_pauses']} pauses, seed {plan_info['seed']}, "
            f"speed {plan_info['speed']:g}x, about {plan_info['typing_time_s']:.0f} s)"
        )
        self.println(f"  server: {' '.join(command)}")

    def info(self, text: str) -> None:
        self.println(f"  {text}")

    def server_message(self, kind: str, text: str) -> None:
        """A server notification: ``kind`` is "status" or a message type ("error", ...)."""
        label = "" if kind in ("info", "log") else f"{kind}: "
        if text.startswith("sidecar: "):
            text = text[len("sidecar: ") :]
        self.println(f"[sidecar] {label}{text}")

    def typing(self, line_no: int, line_text: str) -> None:
        """Redraw the line being typed (terminal only; 1-based ``line_no``)."""
        if self.fancy:
            self._draw_live(self._gutter(line_no) + line_text)

    def line_done(self, line_no: int, line_text: str) -> None:
        """The typist pressed Enter: leave the finished line on screen (terminal only)."""
        if self.fancy:
            self._clear_live()
            self._write(self._gutter(line_no) + line_text + "\n")

    def waiting(self, text: str) -> None:
        """Show a transient note until the next output (terminal only)."""
        if self.fancy:
            self._draw_live("  ", text)

    def streaming(self, text: str, updates: int) -> None:
        """Show the suggestion growing while the server streams it (terminal only)."""
        if not self.fancy:
            return
        last = text.split("\n")[-1] if text else ""
        lines = text.count("\n") + 1 if text else 0
        note = f"  ⋯ streaming ({updates} updates, {lines} lines): "
        self._draw_live(note, last)

    def suggestion(
        self,
        index: int,
        total: int,
        line_no: int,
        column: int,
        reason: str,
        before: str,
        after: str,
        ghost: str,
        elapsed_ms: float,
        extra_items: int = 0,
        updates: int = 0,
        first_update_ms: float | None = None,
        late_ms: float | None = None,
    ) -> None:
        """Show one answered pause: the cursor line with the ghost text and the time.
        ``late_ms``: the answer was empty and the suggestion came after it as updates,
        its text after ``late_ms``."""
        self._clear_live()
        meta = f"{elapsed_ms:.0f} ms"
        if late_ms is not None:
            meta = (
                f"{late_ms:.0f} ms (the answer at {elapsed_ms:.0f} ms was empty; the suggestion "
                f"followed in {updates} update{'s' if updates != 1 else ''})"
            )
        elif updates:
            meta += f", {updates} streamed updates, first after {first_update_ms:.0f} ms"
        if extra_items:
            meta += f", +{extra_items} more item{'s' if extra_items > 1 else ''}"
        if not ghost.strip():
            meta += ", no suggestion"
        self._write(self._bold(f"  ▸ pause {index}/{total}") + f" at {line_no}:{column} ({reason}) → {meta}\n")
        ghost_lines = ghost.split("\n")
        shown = ghost_lines[:MAX_GHOST_LINES]
        first = shown[0]
        rest = shown[1:]
        if self.fancy:
            self._write(self._gutter(line_no) + before + self._dim(first) + after + "\n")
            for text in rest:
                self._write(self._gutter(None) + self._dim(text) + "\n")
        else:
            close = "]" if not rest else ""
            self._write(self._gutter(line_no) + before + "[" + first + close + after + "\n")
            for i, text in enumerate(rest):
                end = "]" if i == len(rest) - 1 else ""
                self._write(self._gutter(None) + text + end + "\n")
        if len(ghost_lines) > MAX_GHOST_LINES:
            self._write(self._gutter(None) + self._dim(f"… {len(ghost_lines) - MAX_GHOST_LINES} more lines") + "\n")

    def failure(self, index: int, total: int, line_no: int, column: int, reason: str, error: str) -> None:
        self._clear_live()
        self._write(self._bold(f"  ✗ pause {index}/{total}") + f" at {line_no}:{column} ({reason}): {error}\n")

    def cold_start(self, elapsed_ms: float, ghost: str | None, error: str | None, late_ms: float | None = None) -> None:
        self._clear_live()
        if error:
            self.println(f"  cold start: FAILED after {elapsed_ms:.0f} ms: {error}")
        else:
            first = (ghost or "").split("\n")[0]
            shown = f": {self._dim(first[:60])}" if first.strip() else " (empty suggestion)"
            if late_ms is not None:
                self.println(
                    f"  cold start: empty answer after {elapsed_ms:.0f} ms, "
                    f"the suggestion followed as an update after {late_ms:.0f} ms{shown}"
                )
            else:
                self.println(f"  cold start: first answer after {elapsed_ms:.0f} ms{shown}")

    def stderr_tail(self, lines: list[str]) -> None:
        if not lines:
            return
        self.println("  last lines the server wrote to stderr:")
        for line in lines:
            self.println(f"    {line}")

    def summary(self, s: dict[str, Any]) -> None:
        self._clear_live()
        lat = s["time_to_suggestion_ms"]

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.0f} ms"

        self.println()
        self.println(self._bold("summary"))
        self.println(f"  model                {model_text(s)}")
        self.println(f"  pauses               {s['pauses']} (planned {s['planned_pauses']})")
        self.println(f"  answered             {s['answered']}/{s['pauses']}")
        self.println(f"  non-empty            {s['non_empty']}/{s['pauses']}")
        self.println(
            f"  time to suggestion   p50 {ms(lat['p50'])} · p90 {ms(lat['p90'])} · "
            f"max {ms(lat['max'])} · mean {ms(lat['mean'])}"
        )
        fu = s.get("first_update_ms") or {}
        if fu.get("count"):
            self.println(f"  first streamed text  p50 {ms(fu['p50'])} · max {ms(fu['max'])}")
        cold_late = s.get("cold_start_suggestion_ms")
        late_note = (
            f" (empty; the suggestion followed after {ms(cold_late)})"
            if cold_late is not None and s["cold_start_ms"] is not None and cold_late != s["cold_start_ms"]
            else ""
        )
        self.println(f"  cold start           {ms(s['cold_start_ms'])}{late_note}")
        if s.get("late_suggestions"):
            n = s["late_suggestions"]
            self.println(
                f"  late suggestions     {n} (empty answer at the server's deadline, then the "
                f"suggestion as update{'s' if n > 1 else ''}; timed at their text)"
            )
        server = s.get("server_latency_ms") or {}
        for key, label in (("upstream_ttft", "backend TTFT       "), ("sidecar_overhead", "sidecar overhead   ")):
            st = server.get(key)
            if st and st.get("count"):
                self.println(f"  {label}  p50 {st['p50']:.2f} ms · p90 {st['p90']:.2f} ms  (from sidecar.stats)")
        shown, pauses = s.get("suggestions_shown", s["non_empty"]), s["pauses"]
        self.println(f"  suggestions shown    {shown} of {pauses} pauses")
        if not s["all_answered"]:
            answered = "NO"
        elif shown or (not pauses and (s.get("cold_start_suggestion") or "").strip()):
            answered = "yes"
        else:  # answered, but with nothing: never a bare "yes" over a run that showed nothing
            answered = "only with empty answers (nothing was shown)"
        self.println(f"  every request answered: {answered}")
        engine = s.get("engine") or {}
        if engine.get("died"):
            what = f"crashed with {engine['signal']}" if engine.get("signal") else "died"
            if engine.get("gave_up"):
                what += "; the server gave up restarting it"
            self.println(f"  local engine         {what}")
        notices = s.get("server_notices") or []
        if notices:
            self.println(
                f"  the server said ({len(notices)} notice{'s' if len(notices) > 1 else ''}"
                + (", the last 5" if len(notices) > 5 else "")
                + "):"
            )
            for n in notices[-5:]:
                text = n["text"][len("sidecar: ") :] if n["text"].startswith("sidecar: ") else n["text"]
                text = text if len(text) <= 160 else text[:159] + "…"
                times = f" (×{n['count']})" if n.get("count", 1) > 1 else ""
                self.println(f"    {n['kind']}{times}: {text}")
        shown_errors = [e for e in s.get("errors", []) if e not in (s.get("failure") or "")]
        for err in shown_errors[:10]:
            self.println(f"    - {err}")
        if s.get("ok"):
            self.println(
                self._bold("  PASS") + f": suggestions shown at {shown} of {pauses} pauses, every request answered"
            )
        else:
            reasons = s.get("failure_reasons") or [s.get("failure") or "see above"]
            self.println(self._bold("  FAIL") + f": {reasons[0]}")
            for more in reasons[1:]:
                self.println(f"        also: {more}")
