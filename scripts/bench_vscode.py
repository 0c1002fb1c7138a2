#!/usr/bin/env python3
"""Latency in a real VS Code: keystroke -> first ghost text, and -> the complete multi-line
ghost text, over N pauses (default 20), against the simulated backend (TTFT 400 ms,
50 tokens/s by default).

The editor is code-server 4.100.3 (VS Code 1.100.3, from scripts/setup-code-server) with the
packaged extension (editors/vscode/sidecar.vsix; `npm run package` builds it), driven in
Debian's Chromium by playwright-core (editors/vscode/test/real/drive.mjs). Each pause types
a comment line and an indent at the end of the file; the times run from the last keystroke
to the first DOM poll (every 2 ms or so) that shows the ghost text. They include the
extension's debounce (`sidecar.debounceMinMs`..`MaxMs`), the simulated TTFT and stream, and
the editor's rendering.

Prints a table (p50/p90/min/max, ms) and writes JSON (``--out``, default
``bench-results/vscode.json``).
Run: ``.venv/bin/python scripts/bench_vscode.py [--pauses 20] [--ttft-ms 400] [--tokens-per-s 50]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "editors" / "vscode"
DRIVER = EXT / "test" / "real" / "drive.mjs"
CS_VERSION = "4.100.3"
OUTPUT = "total = 0\n    for x in xs:\n        total += x\n    return total"
SOURCE = "def total(xs):\n    pass\n"


def editors_cache() -> Path:
    cache = os.environ.get("SIDECAR_EDITORS_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sidecar-editors"
    )
    return Path(cache) / f"code-server-{CS_VERSION}"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_for(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise SystemExit(f"bench_vscode: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def run(a: argparse.Namespace) -> dict:
    home = editors_cache()
    entry = home / "code-server" / "out" / "node" / "entry.js"
    if not (home / ".installed").exists():
        raise SystemExit(f"bench_vscode: code-server is not installed in {home}; run scripts/setup-code-server")
    vsix = EXT / "sidecar.vsix"
    if not vsix.exists():
        raise SystemExit("bench_vscode: no editors/vscode/sidecar.vsix; run `npm run package` in editors/vscode")
    tmp = Path(tempfile.mkdtemp(prefix="sidecar-bench-vscode-"))
    procs: list[subprocess.Popen] = []
    try:
        url_file = tmp / "sim-url"
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "devtools.simulator",
                    "--port",
                    "0",
                    "--url-file",
                    str(url_file),
                    "--ttft-ms",
                    str(a.ttft_ms),
                    "--tokens-per-s",
                    str(a.tokens_per_s),
                    "--output",
                    OUTPUT,
                    "--log-level",
                    "WARNING",
                ],
                stdout=subprocess.DEVNULL,
                stderr=open(tmp / "simulator.log", "w"),
                start_new_session=True,
                cwd=str(ROOT),
            )
        )
        wait_for(lambda: url_file.exists() and url_file.read_text().strip(), 15, "the simulator starting")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_"))}
        env.update(
            SILICONFLOW_API_KEY="sk-test-bench-vscode",
            SIDECAR_BASE_URL=url_file.read_text().strip(),
            SIDECAR_PROVIDER="siliconflow",  # the simulator plays SiliconFlow on loopback
            SIDECAR_CONFIG=str(tmp / "none.toml"),
            SIDECAR_PREFETCH="false",
            XDG_CACHE_HOME=str(tmp / "cache"),
            XDG_STATE_HOME=str(tmp / "state"),
            XDG_DATA_HOME=str(tmp / "data"),
            XDG_CONFIG_HOME=str(tmp / "config"),
            HOME=str(tmp / "home"),
        )
        (tmp / "home").mkdir()
        data, exts = tmp / "user-data", tmp / "extensions"
        base = ["node", str(entry), "--user-data-dir", str(data), "--extensions-dir", str(exts)]
        subprocess.run(
            [*base, "--install-extension", str(vsix), "--force"], env=env, check=True, capture_output=True, timeout=180
        )
        (data / "User").mkdir(parents=True, exist_ok=True)
        (data / "User" / "settings.json").write_text(
            json.dumps(
                {
                    "sidecar.serverPath": sys.executable,
                    "sidecar.cacheEnabled": False,  # every pause goes upstream
                    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
                    "editor.suggestOnTriggerCharacters": False,
                    "editor.wordBasedSuggestions": "off",
                    "editor.autoIndent": "none",
                    "workbench.startupEditor": "none",
                    "security.workspace.trust.enabled": False,
                    "telemetry.telemetryLevel": "off",
                    "extensions.autoCheckUpdates": False,
                    "extensions.autoUpdate": False,
                    "git.enabled": False,
                }
            )
        )
        work = tmp / "work"
        work.mkdir()
        (work / "total.py").write_text(SOURCE)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs.append(
            subprocess.Popen(
                [
                    *base,
                    "--auth",
                    "none",
                    "--bind-addr",
                    f"127.0.0.1:{port}",
                    "--disable-telemetry",
                    "--disable-update-check",
                    "--disable-workspace-trust",
                    str(work),
                ],
                env=env,
                cwd=work,
                stdout=open(tmp / "code-server.log", "w"),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        wait_for(lambda: listening(port), 60, "code-server listening")
        cfg = {
            "url": f"http://127.0.0.1:{port}/?folder={work}",
            "playwright": str(home / "driver"),
            "chromium": "/usr/bin/chromium",
            "file": "total.py",
            "path": str(work / "total.py"),
            "screens": str(a.screens) if a.screens else None,
            "expect": OUTPUT,
            "scenario": "bench",
            "pauses": a.pauses,
        }
        (tmp / "drive.json").write_text(json.dumps(cfg))
        proc = subprocess.run(
            ["node", str(DRIVER), str(tmp / "drive.json")], capture_output=True, text=True, timeout=60 + a.pauses * 25
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise SystemExit(
                f"bench_vscode: the driver printed no result\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            )
        result = json.loads(lines[-1])
        if "error" in result:
            raise SystemExit(f"bench_vscode: the driver failed: {result['error']} (logs in {tmp})")
        return result
    finally:
        for p in reversed(procs):
            kill_group(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pauses", type=int, default=20)
    ap.add_argument("--ttft-ms", type=float, default=400.0)
    ap.add_argument("--tokens-per-s", type=float, default=50.0)
    ap.add_argument("--screens", type=Path, default=None, help="save screenshots of the first and last pause here")
    ap.add_argument("--out", type=Path, default=Path("bench-results/vscode.json"))
    a = ap.parse_args()
    t0 = time.monotonic()
    result = run(a)
    samples = result["samples"]
    report: dict = {
        "editor": f"code-server {CS_VERSION} (VS Code 1.100.3), Chromium headless",
        "simulator": {"ttft_ms": a.ttft_ms, "tokens_per_s": a.tokens_per_s, "output_lines": OUTPUT.count("\n") + 1},
        "pauses": a.pauses,
        "samples": samples,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    print(
        f"real VS Code ({report['editor']}), simulated TTFT {a.ttft_ms:.0f} ms, {a.tokens_per_s:.0f} tok/s, "
        f"{a.pauses} pauses"
    )
    print(f"{'keystroke ->':34} {'n':>3} {'p50 ms':>8} {'p90 ms':>8} {'min':>6} {'max':>6}")
    for key, label in (
        ("first_ms", "first ghost text"),
        ("complete_ms", f"all {report['simulator']['output_lines']} lines of ghost text"),
    ):
        xs = [s[key] for s in samples if s[key] is not None]
        report[key] = {"n": len(xs), "missing": len(samples) - len(xs)}
        if xs:
            report[key].update(p50=pct(xs, 50), p90=pct(xs, 90), min=min(xs), max=max(xs))
            print(f"{label:34} {len(xs):3d} {pct(xs, 50):8.0f} {pct(xs, 90):8.0f} {min(xs):6.0f} {max(xs):6.0f}")
        else:
            print(f"{label:34} {0:3d} {'-':>8} {'-':>8}")
    blanks = [s.get("blanks", 0) for s in samples]
    report["blanks_per_pause"] = {"p50": pct(blanks, 50), "max": max(blanks)} if blanks else None
    if blanks:
        print(
            f"the ghost text vanished and came back while growing: p50 {pct(blanks, 50)}, max {max(blanks)} times a pause"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"JSON: {a.out}")


if __name__ == "__main__":
    main()
