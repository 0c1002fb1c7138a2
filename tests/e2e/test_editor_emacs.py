"""A real Emacs (28, `emacs -nw` in a private tmux server) with lsp-mode 10 and
editors/emacs/sidecar.el drives the sidecar: keys typed through the terminal, lsp-mode's
`lsp-inline-completion-mode` shows the first line of the suggestion, the rest after the
server's `sidecar/inlineCompletionUpdate` notifications, and TAB accepts it; or
C-<right> takes its first word, M-<down> its next line and TAB the rest, each reported to
the server (`sidecar.acceptCompletion` with the units taken), which counts the suggestion
displayed once (`sidecar/didShowCompletion`), two partial accepts and one full one.

Why not `emacs --batch`: idle timers never fire there (there is no command loop), and
lsp-mode sends didChange and asks for inline completions from idle timers, as sidecar.el
refreshes from one; a batch test would have to fake Emacs's command loop.

Needs emacs, lsp-mode >= 10 and tmux: scripts/setup-emacs installs them (lsp-mode from
Debian sid) when run as root; skipped only when they are still missing after that."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LSP_TRACE, sidecar_env, simulator_process, skip_or_fail, tapped, write_editor_events

pytestmark = pytest.mark.timeout(180)  # includes installing lsp-mode on a bare machine

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "emacs"
OUTPUT = "total = 0\n    for x in xs:\n        total += x\n    return total"
SOURCE = "def total(xs):\n\n\nprint(total([1, 2]))\n"

# Loaded with -l after site-start (-q, not -Q: Debian's site-start puts its elpa-*
# packages on the load path). It starts lsp in the file's buffer, records every suggestion lsp-mode
# shows, and writes its state to a JSON file every 50 ms; the test types through tmux.
HARNESS = r""";;; -*- lexical-binding: t; -*-
;; Debian's Emacs 28 compiles the Lisp it loads natively, in the background, into the
;; eln-cache of this test's fresh HOME: compilers would run beside every test. Off.
(setq native-comp-deferred-compilation nil native-comp-enable-subr-trampolines nil)
(require 'json)
(defvar h-cfg (json-read-file __CFG__))
(defun h-get (k) (alist-get k h-cfg))
(package-activate-all)  ; lsp-mode's autoloads (lsp-lens, ...)
(setq make-backup-files nil auto-save-default nil create-lockfiles nil
      inhibit-startup-screen t
      lsp-session-file (expand-file-name "lsp-session" (h-get 'tmp))
      lsp-server-install-dir (expand-file-name "lsp-servers" (h-get 'tmp))
      lsp-enabled-clients '(sidecar)
      lsp-keep-workspace-alive nil
      lsp-restart 'ignore
      lsp-enable-file-watchers nil
      lsp-headerline-breadcrumb-enable nil
      lsp-modeline-code-actions-enable nil
      lsp-modeline-diagnostics-enable nil
      lsp-signature-auto-activate nil
      lsp-eldoc-enable-hover nil
      lsp-enable-on-type-formatting nil
      lsp-enable-indentation nil
      lsp-log-io t)
(require 'lsp-mode)
(add-to-list 'load-path (h-get 'plugin))
(require 'sidecar)
(setq sidecar-server-command (append (h-get 'cmd) nil))

(defvar h-buffer nil)
(defvar h-shown nil "What lsp-mode showed, newest first.")
(defvar h-started nil)

(defun h-overlay-text ()
  (let ((ov (and (boundp 'lsp-inline-completion--overlay) lsp-inline-completion--overlay)))
    (when (and (overlayp ov) (overlay-buffer ov))
      (substring-no-properties
       (concat (or (overlay-get ov 'display) "") (or (overlay-get ov 'after-string) ""))))))

(add-hook 'lsp-inline-completion-shown-hook
          (lambda ()
            (push `((text . ,(h-overlay-text))
                    (id . ,(sidecar--item-id (sidecar--current-item)))
                    (overlay_start . ,(overlay-start lsp-inline-completion--overlay))
                    (point . ,(point))
                    (start_point . ,lsp-inline-completion--start-point))
                  h-shown)))

;; What the editor told the server: didShowCompletion and acceptCompletion messages as
;; they went out, JSON, newest first.
(defvar h-sent nil)
(advice-add 'lsp--send-no-wait :before
            (lambda (message _proc)
              (let ((method (plist-get message :method))
                    (params (plist-get message :params)))
                (when (or (equal method "sidecar/didShowCompletion")
                          (and (equal method "workspace/executeCommand")
                               (not (equal (plist-get params :command) "sidecar.stats"))))
                  (push (lsp--json-serialize (list :method method :params params)) h-sent)))))

;; sidecar.stats' acceptance section, asked for every 0.3 s.
(defvar h-acceptance nil)
(defun h-poll-stats ()
  (when (buffer-live-p h-buffer)
    (with-current-buffer h-buffer
      (let ((ws (ignore-errors (sidecar--workspace))))
        (when (and ws (eq (lsp--workspace-status ws) 'initialized))
          (with-lsp-workspace ws
            (lsp-request-async "workspace/executeCommand" (list :command "sidecar.stats")
                               (lambda (r) (setq h-acceptance (gethash "acceptance" r)))
                               :mode 'detached :error-handler #'ignore)))))))

;; After a full accept (TAB) ask for nothing more: the counts stay those of the test.
(defvar h-done nil)
(add-hook 'lsp-inline-completion-accepted-functions
          (lambda (&rest _) (when (eq this-command 'lsp-inline-completion-accept) (setq h-done t))))
(add-to-list 'lsp-inline-completion-inhibit-predicates (lambda () h-done))

(defun h-dump ()
  (when (buffer-live-p h-buffer)
    (with-current-buffer h-buffer
      (let* ((ws (ignore-errors (sidecar--workspace)))
             (state `((ready . ,(and ws (eq (lsp--workspace-status ws) 'initialized)
                                     (bound-and-true-p lsp-inline-completion-mode) t))
                      (lsp_mode . ,(ignore-errors (lsp-version)))
                      (emacs . ,emacs-version)
                      (shown . ,(vconcat (reverse h-shown)))
                      (overlay . ,(h-overlay-text))
                      (accepted . ,(and h-acceptance (gethash "accepted" h-acceptance)))
                      (acceptance . ,h-acceptance)
                      (sent . ,(vconcat (mapcar #'json-read-from-string (reverse h-sent))))
                      (point . ,(point))
                      (selected . ,(eq (window-buffer (selected-window)) h-buffer))
                      (text . ,(buffer-substring-no-properties (point-min) (point-max))))))
        ;; Written aside, then renamed over the file: the test reads it every 50 ms and must
        ;; never see it half written.
        (let ((tmp (concat (h-get 'result) ".tmp")))
          (with-temp-file tmp
            (insert (json-encode state)))
          (rename-file tmp (h-get 'result) t))))))

(add-hook 'emacs-startup-hook
          (lambda ()
            (setq h-buffer (find-file-noselect (h-get 'file)))
            (switch-to-buffer h-buffer)
            (delete-other-windows)
            (goto-char (point-min))
            (forward-line 1)
            (lsp-workspace-folders-add (h-get 'work))
            (lsp)
            (run-with-timer 0.05 0.05 #'h-dump)
            (run-with-timer 0.3 0.3 #'h-poll-stats)))
"""


def _tools_ready() -> str | None:
    """Why Emacs with lsp-mode 10 cannot run here, or None."""
    if not (shutil.which("emacs") and shutil.which("tmux")):
        return "emacs or tmux is not installed"
    out = subprocess.run(
        ["emacs", "--batch", "-q", "--eval", "(progn (require 'lsp-mode) (princ (lsp-version)))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    version = out.stdout.strip()  # "lsp-mode 10.0.0, Emacs 28.2, gnu/linux"
    m = re.match(r"lsp-mode (\d+)\.", version)
    if m and int(m.group(1)) >= 10:
        return None
    return f"lsp-mode 10 or later is not installed (found {version or out.stderr.strip()[-200:]!r})"


@pytest.fixture(scope="module")
def emacs() -> str:
    why = _tools_ready()
    if why is not None:
        setup = subprocess.run(
            [str(ROOT / "scripts" / "setup-emacs")],
            timeout=600,
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        why = _tools_ready()
        if why is not None:
            skip_or_fail(f"{why}; scripts/setup-emacs: {setup.stderr.strip()[-500:]}")
    return shutil.which("emacs")


@pytest.fixture
def simulator(tmp_path):
    """40 tokens/s: the rest of the suggestion streams over a few hundred ms, after the first line was shown."""
    with simulator_process(tmp_path, OUTPUT, ttft_ms=20, tokens_per_s=40) as url:
        yield url


class _Emacs:
    """`emacs -nw` in a tmux server of its own; keys go in through the terminal."""

    def __init__(self, tmp_path: Path, base_url: str):
        self.tmp = tmp_path
        work = tmp_path / "work"
        work.mkdir()
        self.file = work / "total.py"
        self.file.write_text(SOURCE)
        self.result = tmp_path / "state.json"
        self.sock = str(tmp_path / "tmux.sock")
        cfg = {
            "tmp": str(tmp_path),
            "plugin": str(PLUGIN),
            "file": str(self.file),
            "work": str(work),
            "result": str(self.result),
            # Behind the LSP tap: a failure shows every request and answer.
            "cmd": tapped([sys.executable, "-m", "sidecar", "serve"], tmp_path / LSP_TRACE),
        }
        (tmp_path / "cfg.json").write_text(json.dumps(cfg))
        harness = tmp_path / "harness.el"
        harness.write_text(HARNESS.replace("__CFG__", json.dumps(str(tmp_path / "cfg.json"))))
        env = sidecar_env(
            tmp_path,
            SILICONFLOW_API_KEY="test",
            SIDECAR_BASE_URL=base_url,
            SIDECAR_PROVIDER="siliconflow",  # the simulator plays SiliconFlow on loopback
            SIDECAR_CONFIG=str(tmp_path / "none.toml"),
            HOME=str(tmp_path / "home"),
            XDG_CONFIG_HOME=str(tmp_path / "config"),
            XDG_DATA_HOME=str(tmp_path / "data"),
            TERM="xterm-256color",
        )
        (tmp_path / "home").mkdir()
        self.env = env
        # What the test saw Emacs show and what it typed, (unix ms, line), for the failure report.
        self.events: list[tuple[float, str]] = []
        self._seen: tuple | None = None
        subprocess.run(
            [
                "tmux",
                "-S",
                self.sock,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "90",
                "-y",
                "30",
                "-s",
                "e",
                f"emacs -nw -q -l {harness} 2>{tmp_path / 'emacs.stderr'}",
            ],
            env=env,
            cwd=work,
            check=True,
            timeout=20,
        )

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.events.append((time.time() * 1000, f"keys {json.dumps(keys)}"))
        subprocess.run(
            ["tmux", "-S", self.sock, "send-keys", "-t", "e", *(["-l"] if literal else []), *keys],
            env=self.env,
            check=True,
            timeout=10,
        )

    def screen(self) -> list[str]:
        out = subprocess.run(
            ["tmux", "-S", self.sock, "capture-pane", "-p", "-t", "e"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return [line.rstrip() for line in out.stdout.split("\n")]

    def wait_screen(self, lines: list[str], timeout: float = 5.0) -> list[str]:
        """The screen once it shows ``lines`` one below the other (redisplay may lag the state)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            for at in range(len(screen) - len(lines) + 1):
                if screen[at : at + len(lines)] == lines:
                    return screen
            assert time.monotonic() < deadline, f"the screen does not show {lines}:\n" + "\n".join(screen)
            time.sleep(0.05)

    def state(self) -> dict:
        try:
            s = json.loads(self.result.read_text())
        except (OSError, ValueError):
            return {}
        seen = (s.get("overlay"), len(s.get("shown") or []), s.get("point"))
        if seen != self._seen and len(self.events) < 400:
            self._seen = seen
            self.events.append(
                (
                    time.time() * 1000,
                    f"overlay {json.dumps(seen[0])} (suggestions shown so far {seen[1]}, point {seen[2]})",
                )
            )
        return s

    def wait(self, what: str, pred, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            s = self.state()
            if s and pred(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}\nstate: {s}\nscreen:\n" + "\n".join(self.screen()) + self.logs()
                )
            time.sleep(0.05)

    def logs(self) -> str:
        return "".join(
            f"\n--- {p.relative_to(self.tmp)}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.tmp.rglob("*.log")) + [self.tmp / "emacs.stderr"]
            if p.exists()
        )

    def close(self) -> None:
        write_editor_events(self.tmp, self.events)
        subprocess.run(
            ["tmux", "-S", self.sock, "kill-server"],
            env=self.env,
            timeout=10,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def test_emacs_lsp_mode_shows_streams_and_accepts(emacs, tmp_path, simulator):
    first, *rest = OUTPUT.split("\n")
    t0 = time.monotonic()
    e = _Emacs(tmp_path, simulator)
    try:
        s = e.wait("lsp-mode to start the sidecar", lambda s: s.get("ready"), timeout=30)
        t_ready = time.monotonic()
        assert int(re.match(r"lsp-mode (\d+)", s["lsp_mode"]).group(1)) >= 10 and s["selected"]
        e.keys("    ", literal=True)  # four spaces at the end of the empty line 2

        s = e.wait("a suggestion", lambda s: s.get("shown"))
        shown = s["shown"][0]
        # The first answer is the first line only (the stream is still running). lsp-mode
        # shows it at the end of the line from one character before its start point (the
        # overlay's display repeats that character), and parks point there.
        assert shown["text"] == " " + first, s
        assert shown["start_point"] == len("def total(xs):\n    ") + 1
        assert shown["overlay_start"] == shown["point"] == shown["start_point"] - 1

        # sidecar.el asks again when the stream is done: the whole suggestion shows.
        full = " " + OUTPUT
        s = e.wait("the whole suggestion", lambda s: s.get("overlay") == full)
        assert [x["text"] for x in s["shown"]][-1] == full
        shows = ["    " + first, *rest]
        e.wait_screen(shows)  # ghost text as drawn on the terminal
        t_full = time.monotonic()

        e.keys("Tab")
        want = SOURCE.replace("def total(xs):\n\n", "def total(xs):\n    " + OUTPUT + "\n", 1)
        s = e.wait("TAB to accept", lambda s: s.get("text") == want and s.get("overlay") is None)
        e.wait_screen(shows)  # now buffer text
        # lsp-mode ran the item's command: the sidecar counted the acceptance.
        s = e.wait("sidecar.stats to count the acceptance", lambda s: (s.get("accepted") or 0) >= 1)
        print(
            f"{s['lsp_mode']}: ready {t_ready - t0:.1f}s, "
            f"full suggestion {t_full - t_ready:.1f}s after typing, {len(s['shown'])} overlays shown"
        )
    finally:
        e.close()


def _whole_suggestion(e: _Emacs) -> dict:
    """Type four spaces on the empty line 2 and wait for the whole streamed suggestion."""
    e.wait("lsp-mode to start the sidecar", lambda s: s.get("ready"), timeout=30)
    e.keys("    ", literal=True)
    s = e.wait("the whole suggestion", lambda s: s.get("overlay") == " " + OUTPUT)
    e.wait_screen(["    " + OUTPUT.split("\n")[0], *OUTPUT.split("\n")[1:]])
    return s


def _last_shown_id(s: dict) -> str:
    ids = [x["id"] for x in s["shown"]]
    assert all(ids), s["shown"]  # every item shown is the sidecar's (it names its accept command)
    return ids[-1]


def test_emacs_accepts_a_word_a_line_then_the_rest(emacs, tmp_path, simulator):
    """C-<right> takes `total`, M-<down> ` = 0`, TAB the rest; after each part the rest
    shows again (asked again at the new point: the server answers it as a new item)."""
    before = SOURCE.replace("def total(xs):\n\n", "def total(xs):\n    \n", 1)  # four spaces typed
    word, line = "total", " = 0"
    rest = OUTPUT[len(word + line) :]
    assert rest.startswith("\n    for")
    e = _Emacs(tmp_path, simulator)
    try:
        s = _whole_suggestion(e)
        id_word = _last_shown_id(s)

        e.keys("C-Right")
        # At the end of a line lsp-mode shows the rest from the character before its start.
        want = before.replace("    \n", "    " + word + "\n", 1)
        s = e.wait(
            "C-<right> to take a word",
            lambda s: s.get("text") == want and s.get("overlay") == word[-1] + OUTPUT[len(word) :],
        )
        id_line = _last_shown_id(s)
        assert id_line != id_word, "the rest was not asked for again"

        e.keys("M-Down")  # the other default of sidecar-accept-line-keys
        want = before.replace("    \n", "    " + word + line + "\n", 1)
        s = e.wait("M-<down> to take the line", lambda s: s.get("text") == want and s.get("overlay") == "0" + rest)
        id_rest = _last_shown_id(s)
        assert id_rest != id_line, "the rest was not asked for again"
        e.wait_screen(["    " + OUTPUT.split("\n")[0], *OUTPUT.split("\n")[1:]])

        e.keys("Tab")
        want = SOURCE.replace("def total(xs):\n\n", "def total(xs):\n    " + OUTPUT + "\n", 1)
        s = e.wait("TAB to take the rest", lambda s: s.get("text") == want and s.get("overlay") is None)

        # What went to the server: each item shown reported once, in order, and the three
        # accepts with the item shown at the time and the UTF-16 units taken from it.
        shown_ids = list(dict.fromkeys(x["id"] for x in s["shown"]))
        sent = s["sent"]
        assert [m["params"]["id"] for m in sent if m["method"] == "sidecar/didShowCompletion"] == shown_ids
        accepts = [m["params"]["arguments"] for m in sent if m["method"] == "workspace/executeCommand"]
        assert accepts == [[id_word, len(word)], [id_line, len(line)], [id_rest, len(rest)]], sent

        want_counts = {
            "displayed": 1,
            "partial": 2,
            "full": 1,
            "partial_chars": len(word + line),
            "full_chars": len(rest),
            "accepted_chars": len(OUTPUT),
            "accepted": 1,
        }

        def counted(s):
            acc = s.get("acceptance") or {}
            return acc.get("full", 0) >= 1 and acc.get("partial", 0) >= 2

        s = e.wait("sidecar.stats to count the accepts", counted)
        time.sleep(0.7)  # nothing more may arrive: the next polls must say the same
        acc = e.wait("the counts", lambda s: "acceptance" in s)["acceptance"]
        assert {k: acc.get(k) for k in want_counts} == want_counts, acc
    finally:
        e.close()
