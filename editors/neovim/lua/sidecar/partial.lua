-- What a partial accept takes of the suggestion's rest (the text not yet in the buffer),
-- shared by the native path (0.12+) and the ghost-text plugin (0.7-0.11); the rule every
-- editor follows (docs/editors.md, "What every editor tells the server"):
--
--   word: the leading white space (line breaks too), then a run of word characters
--         (letters, digits, `_`, and any non-ASCII character) or, where the text goes on
--         with punctuation, a run of other non-space characters: "total = 0" is taken as
--         "total", " =", " 0"; "\n    for x" as "\n    for".
--   line: the rest of the current line, without its line break ("total = 0"); where what
--         is left starts with a line break: the break, the next line's indentation and
--         that line, so the key walks down line by line.
local M = {}

local WORD = "^%s*[%w_\128-\255]+"
local SYMBOLS = "^%s*[^%w_%s\128-\255]+"

--- The start of `rest` that accepting one `unit` ("word" or "line") takes ("" if none).
function M.take(rest, unit)
  if type(rest) ~= "string" or rest == "" then
    return ""
  end
  if unit == "line" then
    return rest:match("^\n?[^\n]*")
  end
  return rest:match(WORD) or rest:match(SYMBOLS) or rest:match("^%s*")
end

--- Length of `s` in UTF-16 code units: what `sidecar.acceptCompletion [id, units]` counts.
function M.utf16_units(s)
  local n, i = 0, 1
  while i <= #s do
    local b = s:byte(i)
    if b >= 0xF0 then
      n, i = n + 2, i + 4
    elseif b >= 0xE0 then
      n, i = n + 1, i + 3
    elseif b >= 0xC0 then
      n, i = n + 1, i + 2
    else
      n, i = n + 1, i + 1
    end
  end
  return n
end

--- The id of an item of the sidecar (its accept command's first argument), or nil.
function M.item_id(item)
  local cmd = type(item) == "table" and item.command
  if type(cmd) ~= "table" or cmd.command ~= "sidecar.acceptCompletion" or type(cmd.arguments) ~= "table" then
    return nil
  end
  local id = cmd.arguments[1]
  return type(id) == "string" and id or nil
end

return M
