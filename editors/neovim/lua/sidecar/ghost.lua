-- Ghost text for Neovim 0.7-0.11, which have no native LSP inline completion.
--
-- While you type in Insert mode it asks the sidecar for `textDocument/inlineCompletion`
-- (lightly debounced: the sidecar debounces too), draws the first item as ghost text with
-- extmarks (`virt_text` for the rest of the current line, `virt_lines` below), grows it as
-- `sidecar/inlineCompletionUpdate` notifications arrive, keeps it while you type the
-- characters it shows, clears it when the cursor goes elsewhere or you leave Insert mode,
-- and on accept inserts it and runs the item's command (`sidecar.acceptCompletion`), so
-- the sidecar learns what was accepted. `accept_word` / `accept_line` insert a part of it
-- (partial.lua), report `sidecar.acceptCompletion [id, units]` (UTF-16 units of the item's
-- text taken so far) and keep the rest on screen, to be taken further. The first time a
-- request's suggestion is drawn it sends `sidecar/didShowCompletion`.
local compat = require("sidecar.compat")
local partial = require("sidecar.partial")

local api = vim.api
local M = {}

M.ns = api.nvim_create_namespace("sidecar_ghost")

local TRIGGER_INVOKED = 1
local TRIGGER_AUTOMATIC = 2

M.config = {
  debounce_ms = 30,
  hl_group = "SidecarGhost",
  keymaps = {
    accept = "<Tab>",
    trigger_or_accept = "<C-l>",
    accept_word = "<M-w>",
    accept_line = "<M-l>",
    dismiss = false,
  },
}

-- bufnr -> state:
--   client_id, uri, timer, seq (of the latest request), req (the latest request),
--   req_id (its JSON-RPC id, while pending), shown (what is drawn), typed (a typed char
--   that may agree with the ghost text), notified_req (the last request whose suggestion
--   was reported with sidecar/didShowCompletion).
-- shown: req, item, row, col (where the rest starts: the cursor), rest (the text not in
--   the buffer yet), replace_end, skip (bytes of the item's text that were already in the
--   buffer when it was drawn), taken (what was typed through or accepted of the item's
--   text since), tick (the changedtick right after a partial accept; nil once anything
--   else happens), refetch (asked again at the cursor for the rest of a grown suggestion).
local buffers = {}

vim.cmd("highlight default link SidecarGhost Comment")

function M.setup(config)
  config = config or {}
  for k, v in pairs(config) do
    if k == "keymaps" and type(v) == "table" then
      M.config.keymaps = vim.tbl_extend("force", M.config.keymaps, v)
    elseif v ~= nil then
      M.config[k] = v
    end
  end
end

local function in_insert_mode()
  return api.nvim_get_mode().mode:sub(1, 1) == "i"
end

--- Cursor of the current window as 0-based row, byte column (only if it shows bufnr).
local function cursor(bufnr)
  if api.nvim_get_current_buf() ~= bufnr then
    return nil
  end
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function get_client(st)
  local client = st and st.client_id and vim.lsp.get_client_by_id(st.client_id)
  if client and not compat.is_stopped(client) then
    return client
  end
  return nil
end

local function item_text(item)
  local t = item and item.insertText
  if type(t) == "table" then
    -- A snippet: show and insert its plain text (placeholders' defaults, no tab stops).
    t = (t.value or ""):gsub("%${%d+:([^}]*)}", "%1"):gsub("%${%d+}", ""):gsub("%$%d+", "")
  end
  if type(t) ~= "string" then
    return nil
  end
  return (t:gsub("\r\n", "\n"):gsub("\r", "\n"))
end

local function clear(bufnr)
  local st = buffers[bufnr]
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
  if st then
    st.shown = nil
    st.typed = nil
  end
end

local function expand_tabs(s, bufnr)
  if not s:find("\t", 1, true) then
    return s
  end
  local ts = vim.bo[bufnr].tabstop
  return (s:gsub("\t", string.rep(" ", ts > 0 and ts or 8)))
end

--- Draw `shown.rest` (the text not yet in the buffer) at shown.row, shown.col.
local function draw(bufnr, shown)
  api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  local lines = vim.split(shown.rest, "\n", { plain = true })
  local hl = M.config.hl_group
  local opts = { hl_mode = "combine", priority = 200 }
  local first = expand_tabs(lines[1], bufnr)
  if first ~= "" then
    opts.virt_text = { { first, hl } }
    local line_len = #compat.buf_line(bufnr, shown.row)
    if vim.fn.has("nvim-0.10") == 1 then
      opts.virt_text_pos = "inline"
    elseif shown.col >= line_len then
      opts.virt_text_pos = "overlay" -- past the end of the line: nothing is covered
    else
      opts.virt_text_pos = "eol" -- text follows the cursor: do not cover it
    end
  end
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      opts.virt_lines[#opts.virt_lines + 1] = { { expand_tabs(lines[i], bufnr), hl } }
    end
  end
  if not opts.virt_text and not opts.virt_lines then
    return nil
  end
  return api.nvim_buf_set_extmark(bufnr, M.ns, shown.row, shown.col, opts)
end

--- `sidecar/didShowCompletion` for the first item of `req` that is drawn (once per
--- request: updates that grow the same suggestion are not shown again).
local function notify_shown(st, req, item)
  if st.notified_req == req then
    return
  end
  local id = partial.item_id(item)
  local client = get_client(st)
  if not id or not client then
    return
  end
  st.notified_req = req
  compat.notify(client, "sidecar/didShowCompletion", { id = id })
end

--- An update of the request a part of whose suggestion was accepted (the cursor is past
--- the request's position now). When it shows more of the suggestion than is drawn (or
--- cuts it), ask again at the cursor: the sidecar answers the rest from the same stream
--- as a new item, whose accepts count from here. Taking the update's item instead would
--- report the next accept against an item that starts before the part already taken,
--- which the sidecar would count again.
local function show_after_partial(bufnr, sh, text, final)
  local full = text:sub(sh.skip + 1)
  if full:sub(1, #sh.taken) ~= sh.taken then
    return
  end
  local rest = full:sub(#sh.taken + 1)
  if rest == sh.rest or (not final and vim.startswith(sh.rest, rest)) then
    return -- nothing new
  end
  if rest == "" then
    clear(bufnr) -- the suggestion ends where the accepted part ends
    return
  end
  if not sh.refetch then
    sh.refetch = true
    vim.schedule(function()
      if buffers[bufnr] and buffers[bufnr].shown == sh and in_insert_mode() then
        M.trigger(bufnr, true)
      end
    end)
  end
end

--- Show `item` (from the answer to, or an update of, request `req`) if the buffer is
--- still where the request was made. `final`: the last update of the request.
local function show(bufnr, req, item, from_update, final)
  local st = buffers[bufnr]
  if not st or st.req ~= req then
    return
  end
  local text = item_text(item)
  if not text then
    return
  end
  local row, col = cursor(bufnr)
  local sh = st.shown
  if sh and sh.req == req and sh.tick and row == sh.row and col == sh.col and in_insert_mode()
      and api.nvim_buf_get_changedtick(bufnr) == sh.tick then
    if from_update then
      show_after_partial(bufnr, sh, text, final)
    end
    return
  end
  if row ~= req.row or col ~= req.col or not in_insert_mode()
      or api.nvim_buf_get_changedtick(bufnr) ~= req.changedtick then
    return
  end
  local client = get_client(st)
  local enc = (client and client.offset_encoding) or "utf-16"
  -- Where the item's text goes: its range, or the cursor.
  local start_row, start_col, end_row, end_col = row, col, row, col
  if item.range then
    local s, e = item.range.start, item.range["end"]
    start_row, end_row = s.line, e.line
    start_col = compat.byte_of_char(compat.buf_line(bufnr, s.line), s.character, enc)
    end_col = compat.byte_of_char(compat.buf_line(bufnr, e.line), e.character, enc)
  end
  -- The part of the text from the range start to the cursor is already typed.
  local rest = text
  local skip = 0
  if start_row == row and start_col <= col then
    local typed = compat.buf_line(bufnr, row):sub(start_col + 1, col)
    if text:sub(1, #typed) ~= typed then
      return
    end
    rest = text:sub(#typed + 1)
    skip = #typed
  elseif start_row ~= row then
    return -- a multi-line range ending elsewhere: not a shape the sidecar sends
  end
  if rest == "" then
    if from_update then
      clear(bufnr)
    end
    return
  end
  local old = st.shown
  if old and not final and old.row == row and old.col == col and #old.rest > #rest
      and vim.startswith(old.rest, rest) then
    -- More of the same suggestion is already on screen (from an update, or from the
    -- stream the user is typing through): keep it rather than flicker, but take the
    -- new item (its accept command) and follow the new request's updates.
    old.req = req
    old.item = item
    old.skip = skip
    old.taken = ""
    old.tick = nil
    old.refetch = nil
    notify_shown(st, req, item)
    return
  end
  local replace_end = nil
  if end_row > row or (end_row == row and end_col > col) then
    replace_end = { end_row, end_col }
  end
  st.shown = {
    req = req,
    item = item,
    row = row,
    col = col,
    rest = rest,
    replace_end = replace_end,
    skip = skip,
    taken = "",
  }
  st.shown.extmark = draw(bufnr, st.shown)
  if st.shown.extmark then
    notify_shown(st, req, item)
  end
end

local function on_result(bufnr, req, err, result)
  local st = buffers[bufnr]
  if st and st.req == req then
    st.req_id = nil
  end
  if err or not result then
    return
  end
  local items = result.items or result
  if type(items) ~= "table" or not items[1] then
    return
  end
  show(bufnr, req, items[1], false, false)
end

--- Ask the sidecar for a suggestion at the cursor. The same path typing takes (after the
--- debounce); `invoked` marks an explicit request, which the sidecar does not debounce.
function M.trigger(bufnr, invoked)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = buffers[bufnr]
  local client = get_client(st)
  if not client then
    return false
  end
  local row, col = cursor(bufnr)
  if not row then
    return false
  end
  local line = compat.buf_line(bufnr, row)
  local enc = client.offset_encoding or "utf-16"
  st.seq = st.seq + 1
  local req = {
    seq = st.seq,
    uri = st.uri,
    row = row,
    col = col,
    line = row,
    character = compat.char_of_byte(line, col, enc),
    -- The document version the client last sent (its changedtick on 0.10+).
    version = (vim.lsp.util.buf_versions or {})[bufnr] or api.nvim_buf_get_changedtick(bufnr),
    changedtick = api.nvim_buf_get_changedtick(bufnr),
  }
  st.req = req
  local params = {
    textDocument = { uri = st.uri },
    position = { line = req.line, character = req.character },
    context = { triggerKind = invoked and TRIGGER_INVOKED or TRIGGER_AUTOMATIC },
  }
  -- Older clients do not know this method; the sidecar advertises inlineCompletionProvider.
  local ok, id = compat.request(client, "textDocument/inlineCompletion", params, function(err, result)
    on_result(bufnr, req, err, result)
  end, bufnr)
  if ok then
    st.req_id = id
  end
  return ok
end

local function cancel_pending(bufnr)
  local st = buffers[bufnr]
  if not st then
    return
  end
  if st.timer then
    st.timer:stop()
  end
  local client = get_client(st)
  if st.req_id and client then
    pcall(compat.cancel_request, client, st.req_id)
  end
  st.req_id = nil
  st.req = nil
end

local function schedule_trigger(bufnr)
  local st = buffers[bufnr]
  if not st then
    return
  end
  if not st.timer then
    st.timer = (vim.uv or vim.loop).new_timer()
  end
  st.timer:stop()
  st.timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
    if buffers[bufnr] and in_insert_mode() and api.nvim_get_current_buf() == bufnr then
      M.trigger(bufnr, false)
    end
  end))
end

--- After an edit or a cursor move: keep the ghost text if the user typed what it shows
--- (it shrinks by what was typed), else clear it.
local function sync(bufnr)
  local st = buffers[bufnr]
  local sh = st and st.shown
  if not sh then
    if st then
      st.typed = nil
    end
    return
  end
  local row, col = cursor(bufnr)
  local typed = st.typed
  st.typed = nil
  if typed and row == sh.row and col == sh.col + #typed and sh.rest:sub(1, #typed) == typed
      and compat.buf_line(bufnr, row):sub(sh.col + 1, col) == typed then
    sh.col = col
    sh.rest = sh.rest:sub(#typed + 1)
    sh.taken = sh.taken .. typed
    sh.tick = nil
    sh.req = nil -- updates of the old request no longer apply; the next request's will
    if sh.rest == "" then
      clear(bufnr)
    else
      sh.extmark = draw(bufnr, sh)
    end
    return
  end
  if row ~= sh.row or col ~= sh.col then
    clear(bufnr)
  end
end

--- Is a suggestion shown in bufnr (default: current)?
function M.visible(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = buffers[bufnr]
  return st ~= nil and st.shown ~= nil
end

local function execute_command(client, command, bufnr)
  if not command or not command.command then
    return
  end
  compat.request(client, "workspace/executeCommand", {
    command = command.command,
    arguments = command.arguments,
  }, function() end, bufnr)
end

--- Insert the shown suggestion and tell the sidecar. Returns true if there was one.
--- Must not run under textlock (an <expr> mapping): use `accept_expr` there.
function M.accept(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = buffers[bufnr]
  local sh = st and st.shown
  if not sh then
    return false
  end
  local row, col = cursor(bufnr)
  clear(bufnr)
  if row ~= sh.row or col ~= sh.col then
    return false
  end
  if st.timer then
    st.timer:stop()
  end
  local lines = vim.split(sh.rest, "\n", { plain = true })
  local end_row, end_col = row, col
  if sh.replace_end then
    end_row, end_col = sh.replace_end[1], sh.replace_end[2]
  end
  api.nvim_buf_set_text(bufnr, row, col, end_row, end_col, lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { last_row + 1, last_col })
  local client = get_client(st)
  if client then
    execute_command(client, sh.item.command, bufnr)
  end
  return true
end

--- Insert the next word or line (`unit`: "word" or "line", see partial.lua) of the shown
--- suggestion, report it (`sidecar.acceptCompletion [id, UTF-16 units taken so far]`) and
--- keep the rest shown. Taking all that is left is a whole accept. Returns true if
--- something was inserted. Not from an `<expr>` mapping: use `accept_part_expr` there.
function M.accept_part(bufnr, unit)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = buffers[bufnr]
  local sh = st and st.shown
  if not sh then
    return false
  end
  local row, col = cursor(bufnr)
  if row ~= sh.row or col ~= sh.col then
    clear(bufnr)
    return false
  end
  local piece = partial.take(sh.rest, unit)
  if piece == "" then
    return false
  end
  if #piece >= #sh.rest then
    return M.accept(bufnr)
  end
  if st.timer then
    st.timer:stop()
  end
  local lines = vim.split(piece, "\n", { plain = true })
  api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  if sh.replace_end then
    -- What the item replaces after the cursor moves with the inserted text.
    local end_row, end_col = sh.replace_end[1], sh.replace_end[2]
    if end_row == row then
      sh.replace_end = { last_row, last_col + (end_col - col) }
    else
      sh.replace_end = { end_row + #lines - 1, end_col }
    end
  end
  api.nvim_win_set_cursor(0, { last_row + 1, last_col })
  sh.row, sh.col = last_row, last_col
  sh.rest = sh.rest:sub(#piece + 1)
  sh.taken = sh.taken .. piece
  -- The rest stays: no new request for this edit (TextChangedI); the request's updates
  -- are still watched (show_after_partial) while the cursor stays here.
  sh.tick = api.nvim_buf_get_changedtick(bufnr)
  sh.extmark = draw(bufnr, sh)
  local client = get_client(st)
  local id = partial.item_id(sh.item)
  if client and id then
    execute_command(client, { command = sh.item.command.command, arguments = { id, partial.utf16_units(sh.taken) } },
      bufnr)
  end
  return true
end

function M.accept_word(bufnr)
  return M.accept_part(bufnr, "word")
end

function M.accept_line(bufnr)
  return M.accept_part(bufnr, "line")
end

--- For <expr> mappings: schedules the partial accept and returns true if a suggestion is shown.
function M.accept_part_expr(bufnr, unit)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not M.visible(bufnr) then
    return false
  end
  vim.schedule(function()
    M.accept_part(bufnr, unit)
  end)
  return true
end

--- For <expr> mappings: schedules the accept and returns true if a suggestion is shown.
function M.accept_expr(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not M.visible(bufnr) then
    return false
  end
  vim.schedule(function()
    M.accept(bufnr)
  end)
  return true
end

function M.dismiss(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  cancel_pending(bufnr)
  clear(bufnr)
end

--- Handler of the sidecar's `sidecar/inlineCompletionUpdate` notification: redraw the
--- growing suggestion when it belongs to the buffer's latest request (same uri, document
--- version and position) and nothing moved since.
function M.on_update(_err, params, _ctx)
  if type(params) ~= "table" or not params.uri then
    return
  end
  for bufnr, st in pairs(buffers) do
    local req = st.req
    if st.uri == params.uri and req and params.version == req.version and params.position
        and params.position.line == req.line and params.position.character == req.character then
      local items = params.items or {}
      if items[1] then
        show(bufnr, req, items[1], true, params.done)
      elseif params.done and st.shown and st.shown.req == req then
        clear(bufnr)
      end
    end
  end
end

local function map_keys(bufnr)
  local km = M.config.keymaps or {}
  local function expr_map(lhs, fn)
    vim.keymap.set("i", lhs, fn, { buffer = bufnr, expr = true, replace_keycodes = true, silent = true,
      desc = "sidecar: accept the suggestion" })
  end
  if km.accept then
    local lhs = km.accept
    expr_map(lhs, function()
      if M.accept_expr(bufnr) then
        return ""
      end
      return lhs
    end)
  end
  if km.trigger_or_accept then
    expr_map(km.trigger_or_accept, function()
      if M.accept_expr(bufnr) then
        return ""
      end
      vim.schedule(function()
        M.trigger(bufnr, true)
      end)
      return ""
    end)
  end
  for _, part in ipairs({ { km.accept_word, "word" }, { km.accept_line, "line" } }) do
    local lhs, unit = part[1], part[2]
    if lhs then
      vim.keymap.set("i", lhs, function()
        if M.accept_part_expr(bufnr, unit) then
          return ""
        end
        return lhs
      end, { buffer = bufnr, expr = true, replace_keycodes = true, silent = true,
        desc = "sidecar: accept the next " .. unit .. " of the suggestion" })
    end
  end
  if km.dismiss then
    local lhs = km.dismiss
    expr_map(lhs, function()
      if M.visible(bufnr) then
        vim.schedule(function()
          M.dismiss(bufnr)
        end)
        return ""
      end
      return lhs
    end)
  end
end

--- Start drawing suggestions of `client` in `bufnr` (called from the client's on_attach).
function M.attach(client, bufnr)
  if buffers[bufnr] then
    buffers[bufnr].client_id = client.id
    return
  end
  buffers[bufnr] = { client_id = client.id, uri = vim.uri_from_bufnr(bufnr), seq = 0 }
  local group = api.nvim_create_augroup("sidecar_ghost_" .. bufnr, { clear = true })
  local function au(events, fn)
    api.nvim_create_autocmd(events, { group = group, buffer = bufnr, callback = fn })
  end
  au("InsertCharPre", function()
    local st = buffers[bufnr]
    if st and st.shown then
      -- Several keys may arrive before the next redraw (a paste, a mapping, fast
      -- typing): they add up until CursorMovedI/TextChangedI runs sync().
      local typed = (st.typed or "") .. vim.v.char
      if vim.v.char ~= "" and st.shown.rest:sub(1, #typed) == typed then
        st.typed = typed
      else
        clear(bufnr)
      end
    end
  end)
  au("TextChangedI", function()
    sync(bufnr)
    local st = buffers[bufnr]
    local sh = st and st.shown
    if sh and sh.tick and sh.tick == api.nvim_buf_get_changedtick(bufnr) then
      return -- a partial accept: the rest of the suggestion is still shown
    end
    schedule_trigger(bufnr)
  end)
  au("CursorMovedI", function()
    sync(bufnr)
  end)
  au({ "InsertLeave", "BufLeave" }, function()
    M.dismiss(bufnr)
  end)
  au({ "BufUnload", "BufWipeout" }, function()
    M.detach(bufnr)
  end)
  map_keys(bufnr)
end

function M.detach(bufnr)
  local st = buffers[bufnr]
  if not st then
    return
  end
  cancel_pending(bufnr)
  clear(bufnr)
  if st.timer then
    st.timer:stop()
    st.timer:close()
  end
  buffers[bufnr] = nil
  pcall(api.nvim_del_augroup_by_name, "sidecar_ghost_" .. bufnr)
end

function M.attached(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  return buffers[bufnr] ~= nil
end

return M
