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
;; TAB (`sidecar-accept-keys') accepts it all, C-<right> / M-<right>
;; (`sidecar-accept-word-keys') its next word, C-<down> / M-<down>
;; (`sidecar-accept-line-keys') its next line, C-g cancels, C-n / C-p cycle (lsp-mode 10
;; binds no RET).  After a word or a line the rest stays shown.
;;
;; The API key comes from the environment (SILICONFLOW_API_KEY) or the sidecar's config
;; file (~/.config/sidecar/config.toml); other settings can go in `sidecar-settings'.
;;
;; The server is told when a suggestion shows (`sidecar/didShowCompletion') and how much
;; of it was taken (`sidecar.acceptCompletion' with the item id and UTF-16 units).
;;
;; Commands: `sidecar-accept-word', `sidecar-accept-line', `sidecar-stats',
;; `sidecar-set-mode', `sidecar-toggle-local-gpu', `sidecar-clear-cache'; `sidecar-status'
;; shows the last status the server sent.

;;; Code:

(require 'lsp-mode)
(require 'cl-lib)
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

(defvar lsp-inline-completion-active-map)

(defun sidecar--set-keys (symbol keys)
  "Set SYMBOL (one of the `sidecar-accept-*-keys' options) to KEYS and rebind them.
The keys bound before are unbound in `lsp-inline-completion-active-map'."
  (let ((command (get symbol 'sidecar-command)))
    (when (and (boundp symbol) (boundp 'lsp-inline-completion-active-map))
      (dolist (key (symbol-value symbol))
        (when (eq (lookup-key lsp-inline-completion-active-map (kbd key)) command)
          (define-key lsp-inline-completion-active-map (kbd key) nil))))
    (set-default symbol keys)
    (when (boundp 'lsp-inline-completion-active-map)
      (dolist (key keys)
        (define-key lsp-inline-completion-active-map (kbd key) command)))))

(put 'sidecar-accept-keys 'sidecar-command #'lsp-inline-completion-accept)
(put 'sidecar-accept-word-keys 'sidecar-command #'sidecar-accept-word)
(put 'sidecar-accept-line-keys 'sidecar-command #'sidecar-accept-line)

(defcustom sidecar-accept-keys '("<tab>" "TAB")
  "Keys that accept the whole shown suggestion, for `kbd'.
Bound in `lsp-inline-completion-active-map', the keymap lsp-mode turns on only while a
suggestion shows (lsp-mode's own C-<return> accepts too).  nil binds none.  Set it
with `customize-set-variable' (or `setopt'), or with `setq' before loading sidecar."
  :type '(repeat string)
  :set #'sidecar--set-keys
  :group 'sidecar)

(defcustom sidecar-accept-word-keys '("C-<right>" "M-<right>")
  "Keys that accept the next word of the shown suggestion, for `kbd'.
A word is the leading white space and the next run of word characters (or, where the
suggestion goes on with punctuation, the next run of other non-space characters).
Active only while a suggestion shows.  nil binds none; set it like `sidecar-accept-keys'."
  :type '(repeat string)
  :set #'sidecar--set-keys
  :group 'sidecar)

(defcustom sidecar-accept-line-keys '("C-<down>" "M-<down>")
  "Keys that accept the next line of the shown suggestion, for `kbd'.
A line is the rest of the current line; where the suggestion goes on with a line break,
the break, the next line's indentation and that line.  Active only while a suggestion
shows.  nil binds none; set it like `sidecar-accept-keys'."
  :type '(repeat string)
  :set #'sidecar--set-keys
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
(declare-function lsp-inline-completion-show-overlay "lsp-inline-completion" ())
(declare-function lsp-inline-completion--clear-overlay "lsp-inline-completion" ())
(defvar lsp-inline-completion--items)
(defvar lsp-inline-completion--current)
(defvar lsp-inline-completion-accepted-functions)
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

;;;; Shown, accepted, partly accepted (docs/editors.md, "What every editor tells the server")

(defconst sidecar--accept-command "sidecar.acceptCompletion"
  "The command of every sidecar item: arguments item id and accepted UTF-16 units.")

(defvar sidecar--shown-ids (make-hash-table :test 'eq :weakness 'key)
  "Per sidecar workspace, the item ids it was told were shown, newest first.")

(defun sidecar--current-item ()
  "The inline completion item lsp-mode shows (or last showed), or nil."
  (and (bound-and-true-p lsp-inline-completion--items)
       (integerp lsp-inline-completion--current)
       (elt lsp-inline-completion--items lsp-inline-completion--current)))

(defun sidecar--item-id (item)
  "The sidecar's id of ITEM, or nil when ITEM is not one of the sidecar's."
  (when-let* ((command (and item (lsp:inline-completion-item-command? item)))
              ((equal (lsp:command-command command) sidecar--accept-command))
              (args (lsp:command-arguments? command))
              ((> (length args) 0))
              (id (elt args 0))
              ((stringp id)))
    id))

(defun sidecar--units (text)
  "Length of TEXT in UTF-16 code units (as LSP counts)."
  (cl-loop for char across text sum (if (> char #xFFFF) 2 1)))

(defun sidecar--on-shown ()
  "Tell the sidecar that its item now shows (`sidecar/didShowCompletion'), once per item.
In `lsp-inline-completion-shown-hook', which also runs when the same item is drawn
again (cycling with C-n / C-p)."
  (when-let* ((id (sidecar--item-id (sidecar--current-item)))
              (workspace (sidecar--workspace)))
    (let ((sent (gethash workspace sidecar--shown-ids)))
      (unless (member id sent)
        (puthash workspace (seq-take (cons id sent) 32) sidecar--shown-ids)
        (with-lsp-workspace workspace
          (lsp-notify "sidecar/didShowCompletion" (list :id id)))))))

(defun sidecar--report-accept (id &optional units)
  "Run `sidecar.acceptCompletion' for item ID (UNITS of it accepted, or all) in the sidecar."
  (when-let ((workspace (or (sidecar--workspace) (lsp-find-workspace 'sidecar nil))))
    (with-lsp-workspace workspace
      (lsp-request-async "workspace/executeCommand"
                         (list :command sidecar--accept-command
                               :arguments (if units (vector id units) (vector id)))
                         #'ignore
                         :mode 'detached
                         :error-handler (lambda (err)
                                          (lsp--warn "sidecar.acceptCompletion failed: %s"
                                                     (if (hash-table-p err) (lsp--json-serialize err) err)))))))

(defun sidecar--accept-action (command)
  "Run the sidecar item's COMMAND (a full accept) in the sidecar's workspace only.
lsp-mode would send it to every server of the buffer."
  (let ((args (lsp:command-arguments? command)))
    (when (and args (> (length args) 0) (stringp (elt args 0)))
      (sidecar--report-accept (elt args 0) (and (> (length args) 1) (elt args 1))))))

(defun sidecar--word-part (text)
  "The next word of TEXT: leading white space, then the next run of word characters or,
where TEXT goes on with punctuation, of other non-space characters."
  (when (string-match "\\`[ \t\n\r\f\v]*\\(?:[[:alnum:]_]+\\|[^[:alnum:]_ \t\n\r\f\v]+\\)?" text)
    (match-string 0 text)))

(defun sidecar--line-part (text)
  "The next line of TEXT: the rest of its first line; where TEXT starts with a line
break, the break and the whole next line (its indentation included)."
  (when (string-match "\\`\\(?:\r\n\\|[\n\r]\\)?[^\r\n]*" text)
    (match-string 0 text)))

(defun sidecar--rest-item (item rest)
  "A copy of sidecar ITEM that shows REST at point and, accepted, reports REST's units."
  (let ((pos (lsp--point-to-position (point)))
        (id (sidecar--item-id item)))
    (lsp-make-inline-completion-item
     :insert-text rest
     :range (lsp-make-range :start pos :end pos)
     :command (and id (lsp-make-command :title "Accept suggestion"
                                        :command sidecar--accept-command
                                        :arguments (vector id (sidecar--units rest)))))))

(defun sidecar--accept-part (cut)
  "Accept the part of the shown suggestion that CUT (a function) takes from its text.
Report it to the server, then show the rest: asked again at the new point (the sidecar
answers the rest of the same suggestion as a new item) or, when no answer comes back,
the rest of this item."
  (unless (and (featurep 'lsp-inline-completion) (overlayp lsp-inline-completion--overlay))
    (user-error "No suggestion shown"))
  (let* ((item (sidecar--current-item))
         (text (lsp:inline-completion-item-insert-text item))
         (part (and (stringp text) (funcall cut text))))
    (if (or (null part) (string-empty-p part) (>= (length part) (length text)))
        (lsp-inline-completion-accept)  ; all of it, or a snippet: a full accept
      (lsp-inline-completion--clear-overlay)
      (let* ((range (lsp:inline-completion-item-range? item))
             (start (if range (lsp--position-to-point (lsp:range-start range))
                      lsp-inline-completion--start-point))
             (end (if range (lsp--position-to-point (lsp:range-end range)) start))
             (id (sidecar--item-id item))
             (rest (substring text (length part))))
        (goto-char start)
        (delete-region start end)
        (insert part)
        (when id
          (sidecar--report-accept id (sidecar--units part)))
        (run-hook-with-args 'lsp-inline-completion-accepted-functions part start (point))
        (let ((here (point)))
          (lsp-inline-completion-display 'implicit)
          (unless (overlayp lsp-inline-completion--overlay)
            (goto-char here)
            (setq lsp-inline-completion--items (list (sidecar--rest-item item rest))
                  lsp-inline-completion--current 0
                  lsp-inline-completion--start-point here)
            (lsp-inline-completion-show-overlay)))))))

(defun sidecar-accept-word ()
  "Accept the next word of the shown suggestion; the rest stays shown."
  (interactive)
  (sidecar--accept-part #'sidecar--word-part))

(defun sidecar-accept-line ()
  "Accept the next line of the shown suggestion; the rest stays shown."
  (interactive)
  (sidecar--accept-part #'sidecar--line-part))

;; Keep the suggestion while these run (lsp-mode cancels it before other commands).
(put 'sidecar-accept-word 'lsp-inline-completion-keep t)
(put 'sidecar-accept-line 'lsp-inline-completion-keep t)

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () sidecar-server-command))
  :activation-fn #'sidecar--activate-p
  :server-id 'sidecar
  :add-on? t
  :priority -1
  :initialization-options #'sidecar--init-options
  :notification-handlers (sidecar--notification-handlers)
  :action-handlers (let ((table (make-hash-table :test 'equal)))
                     (puthash sidecar--accept-command #'sidecar--accept-action table)
                     table)))

(add-hook 'lsp-configure-hook #'sidecar--configure-buffer)

(if (featurep 'lsp-inline-completion)
    (add-hook 'lsp-inline-completion-shown-hook #'sidecar--on-shown)
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
