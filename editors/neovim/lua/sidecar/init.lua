-- sidecar for Neovim: AI inline code completion from the `sidecar serve` LSP server.
--
--   require("sidecar").setup({ ... })
--
-- Neovim 0.12+: configures the LSP client with vim.lsp.config/vim.lsp.enable and turns on
-- the native vim.lsp.inline_completion (lua/sidecar/native.lua adds partial accepts and
-- the shown notification); <Tab> accepts a shown suggestion.
-- Neovim 0.7-0.11: starts the client itself and draws ghost text with extmarks
-- (lua/sidecar/ghost.lua), streaming the suggestion as the sidecar's update
-- notifications arrive; <Tab> accepts a shown suggestion, <C-l> asks for one now.
-- Both: <M-w> accepts the next word of it, <M-l> the rest of its line; the rest stays.
local compat = require("sidecar.compat")

local api = vim.api
local M = {}

M.defaults = {
  -- The server command; e.g. { "/path/to/venv/bin/python", "-m", "sidecar", "serve" }.
  cmd = { "sidecar", "serve" },
  -- Extra environment for the server, e.g. { SIDECAR_MODE = "local" }. The API key is
  -- best kept in your shell's environment (SILICONFLOW_API_KEY), not in your config.
  cmd_env = nil,
  filetypes = {
    "python", "lua", "javascript", "javascriptreact", "typescript", "typescriptreact",
    "go", "rust", "c", "cpp", "java", "ruby", "sh", "php", "cs", "kotlin", "swift", "zig",
  },
  root_markers = { ".git", "pyproject.toml", "package.json", "go.mod", "Cargo.toml" },
  -- Sent as initializationOptions (same keys as the config file, e.g. { model = "..." }).
  settings = {},
  -- "auto": the native inline completion on 0.12+, the ghost-text plugin before.
  -- false: always the plugin (it streams updates; the native client does not).
  native = "auto",
  keymaps = {
    accept = "<Tab>", -- accepts when a suggestion is shown, else inserts a Tab
    trigger_or_accept = "<C-l>", -- plugin only: accepts, or asks for a suggestion now
    -- Partial accepts, when a suggestion is shown (else the key does what it did); the
    -- rest stays shown. Alt chords have no Insert-mode meaning of their own (unmapped,
    -- <M-w> is <Esc>w), unlike <C-Right> (word motion) or <C-w>/<C-u>/<C-j> (editing),
    -- and Ctrl-arrows are taken by some desktops. false maps none.
    accept_word = "<M-w>", -- the next word (with the white space before it)
    accept_line = "<M-l>", -- the rest of the current line (or the next line, at its end)
    dismiss = false, -- plugin only: e.g. "<C-]>"
  },
  debounce_ms = 30, -- plugin only; the sidecar has its own adaptive debounce
  hl_group = "SidecarGhost", -- plugin only; linked to Comment by default
  -- didChange is sent at once so the sidecar sees your typing cadence.
  flags = { debounce_text_changes = 0 },
}

M.status = nil -- the last `sidecar/status` notification
M.mode = nil -- "native" or "ghost" after setup

local function merge(opts)
  local o = {}
  for k, v in pairs(M.defaults) do
    o[k] = v
  end
  for k, v in pairs(opts or {}) do
    if k == "keymaps" and type(v) == "table" then
      o.keymaps = vim.tbl_extend("force", M.defaults.keymaps, v)
    else
      o[k] = v
    end
  end
  return o
end

local function on_status(_err, params)
  if type(params) ~= "table" then
    return
  end
  M.status = params
  local parts = { "sidecar" }
  for _, key in ipairs({ "mode", "model", "health" }) do
    if params[key] ~= nil and params[key] ~= vim.NIL then
      parts[#parts + 1] = tostring(params[key])
    end
  end
  if type(params.recentTtftMs) == "number" then
    parts[#parts + 1] = string.format("%dms", params.recentTtftMs)
  end
  vim.g.sidecar_status = table.concat(parts, " ")
end

--- A short status string for your statusline, e.g. "sidecar cloud Qwen/... ready 180ms".
function M.statusline()
  return vim.g.sidecar_status or ""
end

local function find_root(bufnr, markers)
  local name = api.nvim_buf_get_name(bufnr)
  local dir = name ~= "" and vim.fn.fnamemodify(name, ":p:h") or vim.fn.getcwd()
  while dir and dir ~= "" do
    for _, marker in ipairs(markers or {}) do
      if (vim.uv or vim.loop).fs_stat(dir .. "/" .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return vim.fn.getcwd()
end

local function execute(command, args, callback)
  local clients = compat.clients("sidecar")
  if #clients == 0 then
    vim.notify("sidecar: no running sidecar client", vim.log.levels.WARN)
    return
  end
  compat.request(clients[1], "workspace/executeCommand", { command = command, arguments = args },
    function(err, result)
      if err then
        vim.notify("sidecar: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      elseif callback then
        callback(result)
      end
    end, api.nvim_get_current_buf())
end

local function show_result(result)
  vim.notify(vim.inspect(result), vim.log.levels.INFO)
end

local function create_command()
  local subs = {
    stats = function()
      execute("sidecar.stats", {}, show_result)
    end,
    mode = function(arg)
      execute("sidecar.setMode", { arg }, show_result)
    end,
    ["toggle-local"] = function()
      execute("sidecar.toggleLocalGpu", {}, show_result)
    end,
    ["clear-cache"] = function()
      execute("sidecar.clearCache", {}, show_result)
    end,
    status = function()
      show_result(M.status or "no status received yet")
    end,
  }
  api.nvim_create_user_command("Sidecar", function(cmd)
    local sub, arg = cmd.args:match("^(%S+)%s*(%S*)")
    local fn = subs[sub or ""]
    if not fn then
      vim.notify("sidecar: :Sidecar stats | mode cloud|local|auto | toggle-local | clear-cache | status",
        vim.log.levels.ERROR)
      return
    end
    fn(arg)
  end, {
    nargs = "+",
    complete = function(_, line)
      if line:match("^%S+%s+mode%s+") then
        return { "cloud", "local", "auto" }
      end
      return vim.tbl_keys(subs)
    end,
    desc = "sidecar commands",
  })
end

local function handlers(ghost)
  return {
    ["sidecar/status"] = on_status,
    ["sidecar/inlineCompletionUpdate"] = ghost and ghost.on_update or function() end,
  }
end

-- Neovim 0.12+: the native client and inline completion.
local function setup_native(opts)
  vim.lsp.config("sidecar", {
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    filetypes = opts.filetypes,
    root_markers = opts.root_markers,
    init_options = opts.settings,
    handlers = handlers(nil),
    flags = opts.flags,
  })
  vim.lsp.enable("sidecar")
  vim.lsp.inline_completion.enable()
  local native = require("sidecar.native")
  local km = opts.keymaps or {}
  local group = api.nvim_create_augroup("sidecar_native", { clear = true })
  api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if not client or client.name ~= "sidecar" then
        return
      end
      native.attach(client, args.buf)
      local function map(lhs, fn, desc)
        if lhs then
          vim.keymap.set("i", lhs, function()
            if not fn() then
              return lhs
            end
          end, { buffer = args.buf, expr = true, replace_keycodes = true, silent = true, desc = desc })
        end
      end
      map(km.accept, function()
        return vim.lsp.inline_completion.get()
      end, "sidecar: accept the suggestion")
      map(km.accept_word, function()
        return native.accept_part(args.buf, "word")
      end, "sidecar: accept the next word of the suggestion")
      map(km.accept_line, function()
        return native.accept_part(args.buf, "line")
      end, "sidecar: accept the next line of the suggestion")
    end,
  })
end

-- Neovim 0.7-0.11 (or native = false): our own client start and the ghost-text plugin.
local function setup_ghost(opts)
  local ghost = require("sidecar.ghost")
  ghost.setup({ debounce_ms = opts.debounce_ms, hl_group = opts.hl_group, keymaps = opts.keymaps })
  local clients_by_root = {} -- 0.7 has no vim.lsp.start

  local function attach(bufnr)
    if not api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
      return
    end
    local root = find_root(bufnr, opts.root_markers)
    local config = {
      name = "sidecar",
      cmd = opts.cmd,
      cmd_env = opts.cmd_env,
      root_dir = root,
      workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
      -- The ghost-text plugin renders sidecar/inlineCompletionUpdate: say so, and the
      -- server answers early and streams the rest (the native path does not, and gets
      -- complete lines only).
      init_options = vim.tbl_extend("force", opts.settings or {}, { inlineCompletionUpdates = true }),
      handlers = handlers(ghost),
      flags = opts.flags,
      on_attach = function(client, b)
        ghost.attach(client, b)
      end,
    }
    if vim.lsp.start then
      api.nvim_buf_call(bufnr, function()
        vim.lsp.start(config)
      end)
      return
    end
    local id = clients_by_root[root]
    local client = id and vim.lsp.get_client_by_id(id)
    if not client or compat.is_stopped(client) then
      id = vim.lsp.start_client(config)
      if not id then
        return
      end
      clients_by_root[root] = id
    end
    vim.lsp.buf_attach_client(bufnr, id)
  end

  local group = api.nvim_create_augroup("sidecar", { clear = true })
  api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = opts.filetypes,
    callback = function(args)
      attach(args.buf)
    end,
  })
  -- Buffers opened before setup (lazy loading).
  local wanted = {}
  for _, ft in ipairs(opts.filetypes) do
    wanted[ft] = true
  end
  for _, bufnr in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(bufnr) and wanted[vim.bo[bufnr].filetype] then
      attach(bufnr)
    end
  end
end

--- Configure and start the sidecar client. See M.defaults for the options.
function M.setup(opts)
  opts = merge(opts)
  M.options = opts
  local native = opts.native
  if native == "auto" or native == nil then
    native = compat.has_native_inline_completion()
  elseif native and not compat.has_native_inline_completion() then
    vim.notify("sidecar: this Neovim has no vim.lsp.inline_completion (0.12+); using ghost text",
      vim.log.levels.WARN)
    native = false
  end
  if native then
    setup_native(opts)
    M.mode = "native"
  else
    setup_ghost(opts)
    M.mode = "ghost"
  end
  create_command()
end

return M
