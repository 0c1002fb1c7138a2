-- Small helpers that paper over Neovim API changes between 0.7 and 0.12.
local M = {}

local api = vim.api

-- 0.11 turned client methods into `client:method(...)`; the dot form is deprecated there.
local method_calls = vim.fn.has("nvim-0.11") == 1

function M.request(client, method, params, handler, bufnr)
  if method_calls then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(client, method, params)
  if method_calls then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.cancel_request(client, id)
  if method_calls then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

function M.is_stopped(client)
  if method_calls then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- Running LSP clients with this name.
function M.clients(name)
  local all
  if vim.lsp.get_clients then
    all = vim.lsp.get_clients({ name = name })
  else
    all = vim.lsp.get_active_clients()
  end
  local out = {}
  for _, c in ipairs(all) do
    if c.name == name then
      out[#out + 1] = c
    end
  end
  return out
end

--- Is the native inline completion of Neovim 0.12+ available?
function M.has_native_inline_completion()
  if vim.fn.has("nvim-0.12") ~= 1 then
    return false
  end
  local ok, mod = pcall(function()
    return vim.lsp.inline_completion
  end)
  return ok and type(mod) == "table" and vim.lsp.config ~= nil and vim.lsp.enable ~= nil
end

--- Length of a UTF-8 sequence from its first byte (invalid bytes count as one).
local function seq_len(b)
  if b < 0xC0 then
    return 1
  elseif b < 0xE0 then
    return 2
  elseif b < 0xF0 then
    return 3
  end
  return 4
end

--- LSP column (in `encoding` units) of byte offset `byte_col` in `line`.
function M.char_of_byte(line, byte_col, encoding)
  if encoding == "utf-8" then
    return byte_col
  end
  local n, i = 0, 1
  while i <= byte_col and i <= #line do
    local len = seq_len(line:byte(i))
    n = n + ((encoding == "utf-16" and len == 4) and 2 or 1)
    i = i + len
  end
  return n
end

--- Byte offset in `line` of LSP column `character` (in `encoding` units).
function M.byte_of_char(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local n, i = 0, 1
  while i <= #line and n < character do
    local len = seq_len(line:byte(i))
    n = n + ((encoding == "utf-16" and len == 4) and 2 or 1)
    i = i + len
  end
  return math.min(i - 1, #line)
end

--- Length of `s` in `encoding` units.
function M.units(s, encoding)
  return M.char_of_byte(s, #s, encoding)
end

function M.buf_line(bufnr, row)
  return api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
end

return M
