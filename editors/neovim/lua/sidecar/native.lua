-- Neovim 0.12+: what the sidecar adds to the native `vim.lsp.inline_completion`.
--
-- * `sidecar/didShowCompletion` when an item of the sidecar is drawn: the client's
--   `textDocument/inlineCompletion` responses are seen after Neovim's own handler has
--   drawn them (its extmark in the `nvim.lsp.inline_completion` namespace), once per item.
-- * Accept word / accept line: through `vim.lsp.inline_completion.get({ on_accept })`,
--   which hands over the shown item; the next word or line of it goes into the buffer,
--   `sidecar.acceptCompletion [id, units]` reports the UTF-16 units of the item's text
--   taken so far, and the rest is put back as the current item (same command, a range
--   starting at the cursor), so it stays on screen and the next partial or whole accept
--   takes from it. Neovim's automatic request after that cursor move is called off while
--   the rest is shown, so the same suggestion is not fetched (and counted) again.
--   Putting the rest back uses the inline completion's internals (vim.lsp._capability,
--   Neovim 0.12); where they differ, the partial accept still works and the rest comes
--   back with Neovim's next automatic request.
local compat = require("sidecar.compat")
local partial = require("sidecar.partial")

local api = vim.api
local M = {}

local NS_NAME = "nvim.lsp.inline_completion"
local METHOD = "textDocument/inlineCompletion"

-- bufnr -> { shown_id (the last item reported shown), item (the rest put back after a
-- partial accept), taken (what of that item's text was typed or accepted), tick, row, col
-- (the buffer and cursor right after the partial accept) }
local buffers = {}

local function state(bufnr)
  local st = buffers[bufnr]
  if not st then
    st = { taken = "" }
    buffers[bufnr] = st
  end
  return st
end

--- The buffer's inline completion instance (Neovim 0.12 internals), or nil.
local function completor(bufnr)
  local ok, cap = pcall(require, "vim.lsp._capability")
  if not ok or type(cap) ~= "table" or type(cap.all) ~= "table" then
    return nil
  end
  local class = cap.all.inline_completion
  local c = type(class) == "table" and type(class.active) == "table" and class.active[bufnr] or nil
  if type(c) == "table" and type(c.show) == "function" then
    return c
  end
  return nil
end

local function drawn(bufnr)
  local ns = api.nvim_get_namespaces()[NS_NAME]
  return ns ~= nil and #api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { limit = 1 }) > 0
end

--- After Neovim's handler took an answer: report the item it draws, if it is ours.
local function on_answer(client, bufnr, result)
  if not api.nvim_buf_is_valid(bufnr) or not drawn(bufnr) then
    return
  end
  local items = type(result) == "table" and (result.items or result) or nil
  if type(items) ~= "table" then
    return
  end
  local item = items[1]
  local c = completor(bufnr)
  if c then
    -- The current item is the one drawn (the first of all clients' items).
    local cur = c.current
    if not cur or cur.client_id ~= client.id then
      return
    end
    item = nil
    for _, it in ipairs(items) do
      if it.command ~= nil and it.command == cur.command then
        item = it
      end
    end
  end
  local id = partial.item_id(item)
  if not id then
    return
  end
  local st = state(bufnr)
  if st.shown_id == id then
    return
  end
  st.shown_id, st.item, st.taken, st.tick = id, nil, "", nil
  compat.notify(client, "sidecar/didShowCompletion", { id = id })
end

--- See the client's inline completion answers after Neovim's own handler (once per client).
function M.hook_client(client)
  if type(client) ~= "table" or client._sidecar_hooked or type(client.request) ~= "function" then
    return
  end
  client._sidecar_hooked = true
  local request = client.request
  client.request = function(self, method, params, handler, bufnr, ...)
    if method == METHOD and type(handler) == "function" then
      local handle = handler
      handler = function(err, result, ctx, ...)
        handle(err, result, ctx, ...)
        if not err and result then
          local ok, e = pcall(on_answer, client, (type(ctx) == "table" and ctx.bufnr) or bufnr, result)
          if not ok then
            vim.notify_once("sidecar: " .. tostring(e), vim.log.levels.WARN)
          end
        end
      end
    end
    return request(self, method, params, handler, bufnr, ...)
  end
end

local function plain_text(insert_text)
  local t = insert_text
  if type(t) == "table" then
    -- A snippet: its text as Neovim draws it (placeholders' defaults, no tab stops).
    local ok, grammar = pcall(require, "vim.lsp._snippet_grammar")
    local parsed_ok, parsed = false, nil
    if ok then
      parsed_ok, parsed = pcall(grammar.parse, t.value or "")
    end
    if parsed_ok then
      t = tostring(parsed)
    else
      t = (t.value or ""):gsub("%${%d+:([^}]*)}", "%1"):gsub("%${%d+}", ""):gsub("%$%d+", "")
    end
  end
  if type(t) ~= "string" then
    return nil
  end
  return (t:gsub("\r\n", "\n"))
end

local function make_range(bufnr, row, col, end_row, end_col)
  if vim.range and vim.range.extmark then
    local ok, r = pcall(vim.range.extmark, bufnr, row, col, end_row, end_col)
    if ok then
      return r
    end
  end
  return nil -- Neovim then draws at, and inserts at, the cursor
end

local function report(bufnr, item, taken)
  local id = partial.item_id(item)
  local client = id and vim.lsp.get_client_by_id(item.client_id)
  if not client then
    return
  end
  compat.request(client, "workspace/executeCommand", {
    command = item.command.command,
    arguments = { id, partial.utf16_units(taken) },
  }, function() end, bufnr)
end

--- Make `new` the current item again and draw it; keep the client's items in step, so
--- that cycling (vim.lsp.inline_completion.select) finds the rest too.
local function put_back(bufnr, old, new)
  local c = completor(bufnr)
  if not c then
    return
  end
  c.current = new
  local cs = type(c.client_state) == "table" and c.client_state[new.client_id]
  local client = vim.lsp.get_client_by_id(new.client_id)
  if cs and type(cs.items) == "table" and old.command ~= nil and client then
    for i, it in ipairs(cs.items) do
      if it.command == old.command then
        local ok, lsp_range = pcall(function()
          return new.range and new.range:to_lsp(client.offset_encoding)
        end)
        cs.items[i] = { insertText = new.insert_text, range = ok and lsp_range or nil, command = it.command }
      end
    end
  end
  pcall(c.show, c)
end

--- on_accept of vim.lsp.inline_completion.get(): insert the next `unit` of `item`.
--- Returns the item when that is all of it (Neovim accepts it whole), else nil.
local function take(bufnr, item, unit)
  local win = api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) ~= bufnr then
    return nil
  end
  local pos = api.nvim_win_get_cursor(win)
  local row, col = pos[1] - 1, pos[2]
  local text = plain_text(item.insert_text)
  if not text then
    return nil
  end
  local start_row, start_col, end_row, end_col = row, col, row, col
  if item.range then
    start_row, start_col, end_row, end_col = item.range:to_extmark()
  end
  if start_row ~= row or start_col > col then
    return nil
  end
  local typed = compat.buf_line(bufnr, row):sub(start_col + 1, col)
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  local rest = text:sub(#typed + 1)
  local piece = partial.take(rest, unit)
  if piece == "" then
    put_back(bufnr, item, item)
    return nil
  end
  if #piece >= #rest then
    return item -- all that is left: the whole accept (and its command)
  end
  local lines = vim.split(piece, "\n", { plain = true })
  api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  -- What the item replaces after the cursor moves with the inserted text.
  local new_end_row, new_end_col = last_row, last_col
  if end_row == row and end_col > col then
    new_end_col = last_col + (end_col - col)
  elseif end_row > row then
    new_end_row, new_end_col = end_row + #lines - 1, end_col
  end
  api.nvim_win_set_cursor(win, { last_row + 1, last_col })
  local st = state(bufnr)
  st.taken = (st.item == item and st.taken or "") .. typed .. piece
  local new = {
    _index = item._index,
    client_id = item.client_id,
    insert_text = rest:sub(#piece + 1),
    range = make_range(bufnr, last_row, last_col, new_end_row, new_end_col),
    command = item.command,
  }
  st.item, st.tick, st.row, st.col = new, api.nvim_buf_get_changedtick(bufnr), last_row, last_col
  report(bufnr, item, st.taken)
  put_back(bufnr, item, new)
  return nil
end

--- Accept the next `unit` ("word" or "line") of the shown suggestion. Returns false when
--- none is shown. Fine from an <expr> mapping (the edit is scheduled).
function M.accept_part(bufnr, unit)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      local ok, res = pcall(take, bufnr, item, unit)
      if not ok then
        vim.notify("sidecar: " .. tostring(res), vim.log.levels.ERROR)
        return nil
      end
      return res
    end,
  })
end

--- Set up `bufnr` for `client` (LspAttach of the sidecar).
function M.attach(client, bufnr)
  M.hook_client(client)
  if not api.nvim_buf_is_valid(bufnr) then
    return
  end
  local group = api.nvim_create_augroup("sidecar_native_" .. bufnr, { clear = true })
  api.nvim_create_autocmd("CursorMovedI", {
    group = group,
    buffer = bufnr,
    callback = function()
      local st = buffers[bufnr]
      if not (st and st.tick) then
        return
      end
      local pos = api.nvim_win_get_cursor(0)
      if st.tick == api.nvim_buf_get_changedtick(bufnr) and pos[1] - 1 == st.row and pos[2] == st.col then
        -- The move of a partial accept: Neovim just scheduled a new request (after its
        -- debounce); the rest is on screen already, so call it off.
        vim.schedule(function()
          local c = completor(bufnr)
          if c and c.current == st.item and type(c.reset_timer) == "function" then
            pcall(c.reset_timer, c)
          end
        end)
      else
        st.tick = nil
      end
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      buffers[bufnr] = nil
    end,
  })
end

return M
