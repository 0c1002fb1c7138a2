;;; sidecar.el --- AI inline code completion from the sidecar LSP server  -*- lexical-binding: t; -*-

;; Keywords: languages, tools, convenience
;; Package-Requires: ((emacs "27.1") (lsp-mode "9.0.1"))
;; Version: 0.1.0

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Registers `sidecar serve' (a stdio LSP server for inline code completion) as an
;; lsp-mode add-on client, so it runs next to your usual language server, and sets up
;; lsp-mode's `lsp-inline-completion-mode' (lsp-mode 9.0.1 or later) to show its
;; suggestions as ghost text.
;;
;;   (add-to-list 'load-path "~/.emacs.d/lisp")
;;   (with-eval-after-load 'lsp-mode
;;     (require 'sidecar))
;;
;; then `M-x lsp' in a Python, Go, Rust, ... buffer (or `lsp-deferred' in a mode hook).
;; Suggestions appear after `sidecar-idle-delay' seconds of idle time; with one shown,
;; TAB (`sidecar-accept-keys') accepts, C-g cancels, C-n / C-p cycle (lsp-mode 10
;; binds no RET).
;;
;; The API key comes from the environment (SILICONFLOW_API_KEY) or the sidecar's config
;; file (~/.config/sidecar/config.toml); other settings can go in `sidecar-settings'.
;;
;; Commands: `sidecar-stats', `sidecar-set-mode', `sidecar-toggle-local-gpu',
;; `sidecar-clear-cache'; `sidecar-status' shows the last status the server sent.

;;; Code:

(require 'lsp-mode)
(require 'seq)
(require 'lsp-inline-completion nil t)

(defgroup sidecar nil
  "AI inline code completion from the sidecar LSP server."
  :group 'lsp-mode
  :prefix "sidecar-")

(defcustom sidecar-server-command '("sidecar" "serve")
  "Command that starts the sidecar LSP server on stdio.
For a virtual environment, e.g. (\"/path/to/.venv/bin/python\" \"-m\" \"sidecar\" \"serve\")."
  :type '(repeat string)
  :group 'sidecar)

(defcustom sidecar-major-modes
  '(python-mode python-ts-mode js-mode js-ts-mode typescript-mode typescript-ts-mode
    tsx-ts-mode go-mode go-ts-mode rust-mode rust-ts-mode c-mode c-ts-mode c++-mode
    c++-ts-mode java-mode java-ts-mode ruby-mode ruby-ts-mode sh-mode bash-ts-mode
    lua-mode lua-ts-mode emacs-lisp-mode)
  "Major modes (and modes derived from them) in which the sidecar runs."
  :type '(repeat symbol)
  :group 'sidecar)

(defcustom sidecar-settings nil
  "Settings sent to the server as initializationOptions.
An alist of (KEY . VALUE) with the keys of the sidecar's config file, e.g.
\\='((\"model\" . \"Qwen/Qwen2.5-Coder-7B-Instruct\") (\"mode\" . \"cloud\")).
Keep the API key in the environment, not here."
  :type '(alist :key-type string :value-type sexp)
  :group 'sidecar)

(defcustom sidecar-idle-delay 0.1
  "Idle seconds before asking for a suggestion, in sidecar buffers.
Set as the buffer-local `lsp-inline-completion-idle-delay' (lsp-mode's default, 2 s, is
meant for slower servers; the sidecar debounces on its own)."
  :type 'number
  :group 'sidecar)

(defcustom sidecar-accept-keys '("<tab>" "TAB")
  "Keys that accept the shown suggestion, for `kbd'.
lsp-mode binds TAB to the next suggestion; nil keeps its bindings.  Set before loading."
  :type '(repeat string)
  :group 'sidecar)

(defcustom sidecar-refresh-on-update t
  "Show the rest of a multi-line suggestion once the server has streamed it.
The sidecar answers as soon as the first line is complete and then sends
`sidecar/inlineCompletionUpdate' notifications; when the last one arrives and a
suggestion is still shown at the same place, ask again (answered at once from the
finished stream)."
  :type 'boolean
  :group 'sidecar)

(defvar sidecar-last-status nil
  "The last `sidecar/status' notification (a hash table), or nil.")

(defvar sidecar--refresh-timer nil)

(declare-function lsp-inline-completion-display "lsp-inline-completion" (&optional implicit))
(declare-function lsp-inline-completion-accept "lsp-inline-completion" ())
(declare-function lsp-inline-completion-mode "lsp-inline-completion" (&optional arg))
(defvar lsp-inline-completion-active-map)
(defvar lsp-inline-completion-idle-delay)
(defvar lsp-inline-completion-mode)
(defvar lsp-inline-completion--overlay)
(defvar lsp-inline-completion--start-point)

(defun sidecar--init-options ()
  "`sidecar-settings' as a hash table (JSON object) for initializationOptions."
  (let ((table (make-hash-table :test 'equal)))
    (dolist (pair sidecar-settings)
      (puthash (format "%s" (car pair)) (cdr pair) table))
    ;; With `sidecar-refresh-on-update' this client renders the server's updates (it
    ;; asks again when a stream is done): say so, and the server answers early.
    ;; Without it the server sends complete lines only.
    (when sidecar-refresh-on-update
      (puthash "inlineCompletionUpdates" t table))
    table))

(defun sidecar--activate-p (_file-name &optional mode)
  "Whether the sidecar should run in a buffer in major MODE."
  (apply #'provided-mode-derived-p (or mode major-mode) sidecar-major-modes))

(defun sidecar--get (params key)
  "KEY (a string) of notification PARAMS, a hash table or a plist (`lsp-use-plists')."
  (if (hash-table-p params)
      (gethash key params)
    (plist-get params (intern (concat ":" key)))))

(defun sidecar--workspace ()
  "The sidecar's workspace in the current buffer, or nil."
  (seq-find (lambda (workspace)
              (eq (lsp--client-server-id (lsp--workspace-client workspace)) 'sidecar))
            (lsp-workspaces)))

(defun sidecar--on-status (_workspace params)
  "Store the `sidecar/status' notification PARAMS."
  (setq sidecar-last-status params))

(defun sidecar--shown-at-point-p ()
  "Whether lsp-mode shows an inline suggestion that started at point.
At the end of a line lsp-mode 10 parks point one character before its start point
while the suggestion shows, so that position counts too."
  (and (bound-and-true-p lsp-inline-completion-mode)
       (overlayp lsp-inline-completion--overlay)
       (overlay-buffer lsp-inline-completion--overlay)
       (integerp lsp-inline-completion--start-point)
       (or (eq (point) lsp-inline-completion--start-point)
           (and (eq (1+ (point)) lsp-inline-completion--start-point)
                (save-excursion (goto-char lsp-inline-completion--start-point) (eolp))))))

(defun sidecar--refresh (buffer point)
  "Ask again in BUFFER if a suggestion is still shown at POINT (from its start point)."
  (setq sidecar--refresh-timer nil)
  (when (and (buffer-live-p buffer) (eq buffer (current-buffer)) (eq point (point))
             (sidecar--shown-at-point-p)
             (fboundp 'lsp-inline-completion-display))
    (goto-char lsp-inline-completion--start-point)
    (lsp-inline-completion-display 'implicit)))

(defun sidecar--on-update (_workspace params)
  "Handle `sidecar/inlineCompletionUpdate' PARAMS: refresh when the stream is done."
  (when (and sidecar-refresh-on-update
             (eq t (sidecar--get params "done"))
             (sidecar--shown-at-point-p)
             (equal (sidecar--get params "uri") (lsp--buffer-uri)))
    (when sidecar--refresh-timer
      (cancel-timer sidecar--refresh-timer))
    (setq sidecar--refresh-timer
          (run-with-idle-timer 0 nil #'sidecar--refresh (current-buffer) (point)))))

(defun sidecar--notification-handlers ()
  "Handlers of the sidecar's own notifications."
  (let ((table (make-hash-table :test 'equal)))
    (puthash "sidecar/status" #'sidecar--on-status table)
    (puthash "sidecar/inlineCompletionUpdate" #'sidecar--on-update table)
    table))

(defun sidecar--configure-buffer ()
  "Set up inline completion in a buffer where the sidecar runs."
  (when (and (sidecar--workspace) (featurep 'lsp-inline-completion))
    (setq-local lsp-inline-completion-idle-delay sidecar-idle-delay)
    (unless lsp-inline-completion-mode
      (lsp-inline-completion-mode 1))))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () sidecar-server-command))
  :activation-fn #'sidecar--activate-p
  :server-id 'sidecar
  :add-on? t
  :priority -1
  :initialization-options #'sidecar--init-options
  :notification-handlers (sidecar--notification-handlers)))

(add-hook 'lsp-configure-hook #'sidecar--configure-buffer)

(if (featurep 'lsp-inline-completion)
    (dolist (key sidecar-accept-keys)
      (define-key lsp-inline-completion-active-map (kbd key) #'lsp-inline-completion-accept))
  (display-warning 'sidecar "lsp-inline-completion is missing: update lsp-mode to 9.0.1 or later \
to see suggestions"))

(defun sidecar--execute (command &optional args)
  "Run the sidecar's COMMAND with ARGS and return the result."
  (let ((workspace (or (sidecar--workspace) (lsp-find-workspace 'sidecar nil))))
    (unless workspace
      (user-error "The sidecar is not running in this buffer"))
    (with-lsp-workspace workspace
      (lsp-request "workspace/executeCommand"
                   (list :command command :arguments (apply #'vector args))))))

(defun sidecar--show (result)
  "Show RESULT of a command."
  (message "%s" (if (hash-table-p result) (lsp--json-serialize result) result)))

(defun sidecar-stats ()
  "Show the sidecar's counters and latencies."
  (interactive)
  (sidecar--show (sidecar--execute "sidecar.stats")))

(defun sidecar-set-mode (mode)
  "Switch the sidecar to MODE: cloud, local or auto."
  (interactive (list (completing-read "sidecar mode: " '("cloud" "local" "auto") nil t)))
  (sidecar--show (sidecar--execute "sidecar.setMode" (list mode))))

(defun sidecar-toggle-local-gpu ()
  "Switch the sidecar between the cloud backend and the local engine."
  (interactive)
  (sidecar--show (sidecar--execute "sidecar.toggleLocalGpu")))

(defun sidecar-clear-cache ()
  "Empty the sidecar's completion cache."
  (interactive)
  (sidecar--show (sidecar--execute "sidecar.clearCache")))

(defun sidecar-status ()
  "Show the last status the sidecar sent (mode, backend, model, health, latency)."
  (interactive)
  (sidecar--show (or sidecar-last-status "no status received yet")))

(provide 'sidecar)
;;; sidecar.el ends here
