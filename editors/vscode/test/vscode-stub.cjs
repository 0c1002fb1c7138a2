// A small stand-in for the `vscode` module: enough of the API for vscode-languageclient
// and the extension to run in plain Node (test/extension.test.mjs). It records what the
// extension does (commands run, messages shown, status bar text, registered providers).
// Members it does not define answer with a no-op that returns a Disposable, and their
// names are collected in `stub.missing`.

'use strict';

const path = require('path');

class Disposable {
    constructor(fn) { this._fn = fn; }
    static from(...items) { return new Disposable(() => items.forEach((d) => d && d.dispose && d.dispose())); }
    dispose() { if (this._fn) { const f = this._fn; this._fn = undefined; f(); } }
}

class EventEmitter {
    constructor() {
        this._listeners = new Set();
        this.event = (listener, thisArg, disposables) => {
            const l = thisArg ? listener.bind(thisArg) : listener;
            this._listeners.add(l);
            const d = new Disposable(() => this._listeners.delete(l));
            if (Array.isArray(disposables)) disposables.push(d);
            return d;
        };
    }
    fire(e) { for (const l of [...this._listeners]) l(e); }
    dispose() { this._listeners.clear(); }
}

class Uri {
    constructor(scheme, p) { this.scheme = scheme; this.path = p; this.fsPath = p; this.authority = ''; this.query = ''; this.fragment = ''; }
    static file(p) { return new Uri('file', path.resolve(p)); }
    static parse(s) {
        const m = /^([a-z][a-z0-9+.-]*):(?:\/\/[^/]*)?(.*)$/i.exec(s);
        return m ? new Uri(m[1], decodeURIComponent(m[2])) : new Uri('file', s);
    }
    with(change) { return new Uri(change.scheme ?? this.scheme, change.path ?? this.path); }
    toString() { return `${this.scheme}://${encodeURI(this.path).replace(/[?#]/g, encodeURIComponent)}`; }
    toJSON() { return this.toString(); }
}

class Position {
    constructor(line, character) { this.line = line; this.character = character; }
    isEqual(o) { return o.line === this.line && o.character === this.character; }
    isBefore(o) { return this.line < o.line || (this.line === o.line && this.character < o.character); }
}

class Range {
    constructor(a, b, c, d) {
        if (typeof a === 'number') { this.start = new Position(a, b); this.end = new Position(c, d); }
        else { this.start = a; this.end = b; }
    }
    get isEmpty() { return this.start.isEqual(this.end); }
}

class Selection extends Range {
    constructor(anchor, active) { super(anchor, active); this.anchor = anchor; this.active = active; }
}

class SnippetString { constructor(value) { this.value = value ?? ''; } }
class MarkdownString { constructor(value) { this.value = value ?? ''; } appendMarkdown(s) { this.value += s; return this; } }
class ThemeColor { constructor(id) { this.id = id; } }
class InlineCompletionItem { constructor(insertText, range, command) { this.insertText = insertText; this.range = range; this.command = command; } }
class InlineCompletionList { constructor(items) { this.items = items; } }
class CancellationError extends Error { constructor() { super('Canceled'); this.name = 'Canceled'; } }

class CancellationTokenSource {
    constructor() {
        const emitter = new EventEmitter();
        this._emitter = emitter;
        this.token = { isCancellationRequested: false, onCancellationRequested: emitter.event };
    }
    cancel() { if (!this.token.isCancellationRequested) { this.token.isCancellationRequested = true; this._emitter.fire(undefined); } }
    dispose() { this._emitter.dispose(); }
}

/** A text document over a string (no edits: tests open and read). */
function textDocument(uri, languageId, text, version = 1) {
    const lines = text.split('\n');
    const offsetAt = (p) => lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
    return {
        uri, languageId, version, isClosed: false, isDirty: false, isUntitled: false, fileName: uri.fsPath, eol: 1,
        lineCount: lines.length,
        getText: () => text,
        offsetAt,
        positionAt(offset) {
            let line = 0;
            while (line < lines.length - 1 && offset > lines[line].length) { offset -= lines[line].length + 1; line++; }
            return new Position(line, offset);
        },
        lineAt: (l) => ({ text: lines[typeof l === 'number' ? l : l.line] }),
    };
}

function noop() { return new Disposable(); }

function create({ settings = {}, version = '1.91.0' } = {}) {
    const missing = new Set();
    const record = {
        commandsRun: [], messages: [], statusBarMessages: [], outputs: new Map(), statusItems: [],
        inlineProviders: [], registeredCommands: new Map(), configListeners: new EventEmitter(),
        selectionListeners: new EventEmitter(),
    };

    function guard(name, obj) {
        return new Proxy(obj, {
            get(target, prop) {
                if (prop in target || typeof prop === 'symbol' || prop === 'then') return target[prop];
                missing.add(`${name}.${String(prop)}`);
                return noop;
            },
        });
    }

    function outputChannel(name) {
        const lines = [];
        record.outputs.set(name, lines);
        const ch = {
            name, lines, logLevel: 2,
            onDidChangeLogLevel: new EventEmitter().event,
            append: (s) => lines.push(s), appendLine: (s) => lines.push(s), replace: (s) => { lines.length = 0; lines.push(s); },
            clear: () => { lines.length = 0; }, show() {}, hide() {}, dispose() {},
        };
        for (const level of ['trace', 'debug', 'info', 'warn', 'error']) ch[level] = (msg, ...rest) => lines.push(`[${level}] ${msg}${rest.length ? ' ' + rest.map(String).join(' ') : ''}`);
        return ch;
    }

    const configuration = (section) => ({
        get(key, dflt) {
            const full = section ? `${section}.${key}` : key;
            return full in settings ? settings[full] : dflt;
        },
        has(key) { return `${section}.${key}` in settings; },
        inspect(key) {
            const full = section ? `${section}.${key}` : key;
            return full in settings ? { key: full, globalValue: settings[full] } : { key: full };
        },
        update: async () => undefined,
    });

    const window = guard('window', {
        activeTextEditor: undefined,
        visibleTextEditors: [],
        tabGroups: { all: [], onDidChangeTabs: noop, onDidChangeTabGroups: noop },
        createOutputChannel: (name) => outputChannel(name),
        createStatusBarItem: (id) => {
            const item = { id, text: '', tooltip: undefined, command: undefined, name: '', show() {}, hide() {}, dispose() {} };
            record.statusItems.push(item);
            return item;
        },
        showInformationMessage: async (m) => { record.messages.push(['info', m]); return undefined; },
        showWarningMessage: async (m) => { record.messages.push(['warning', m]); return undefined; },
        showErrorMessage: async (m) => { record.messages.push(['error', m]); return undefined; },
        setStatusBarMessage: (m) => { record.statusBarMessages.push(m); return new Disposable(); },
        showQuickPick: async (items) => (record.quickPick ? record.quickPick(await items) : undefined),
        showInputBox: async () => record.inputBox,
        onDidChangeActiveTextEditor: noop,
        onDidChangeVisibleTextEditors: noop,
        onDidChangeTextEditorSelection: record.selectionListeners.event,
        withProgress: async (_o, task) => task({ report() {} }, new CancellationTokenSource().token),
    });

    const textDocuments = [];
    const workspace = guard('workspace', {
        workspaceFolders: undefined,
        textDocuments,
        notebookDocuments: [],
        getConfiguration: configuration,
        onDidChangeConfiguration: record.configListeners.event,
        onDidOpenTextDocument: noop, onDidCloseTextDocument: noop, onDidChangeTextDocument: noop,
        onDidSaveTextDocument: noop, onWillSaveTextDocument: noop, onDidChangeWorkspaceFolders: noop,
        createFileSystemWatcher: () => ({ onDidCreate: noop, onDidChange: noop, onDidDelete: noop, dispose() {} }),
    });

    const commands = guard('commands', {
        registerCommand(id, fn) {
            if (record.registeredCommands.has(id)) throw new Error(`command '${id}' already exists`);
            record.registeredCommands.set(id, fn);
            return new Disposable(() => record.registeredCommands.delete(id));
        },
        async executeCommand(id, ...args) {
            record.commandsRun.push(id);
            const fn = record.registeredCommands.get(id);
            return fn ? fn(...args) : undefined;
        },
    });

    const languages = guard('languages', {
        match: (selector, doc) => {
            const sel = Array.isArray(selector) ? selector : [selector];
            return sel.some((s) => typeof s === 'string' ? s === doc.languageId || s === '*'
                : (!s.scheme || s.scheme === doc.uri.scheme) && (!s.language || s.language === doc.languageId)) ? 10 : 0;
        },
        registerInlineCompletionItemProvider(selector, provider) {
            // VS Code 1.100 refuses a provider with the proposed event handlers unless the
            // extension may use the proposal (code-server allows every proposal).
            if (record.refuseProposals && (provider.handleDidShowCompletionItem || provider.handleDidPartiallyAcceptCompletionItem)) {
                throw new Error("Extension 'sidecar.sidecar' CANNOT use API proposal: inlineCompletionsAdditions.");
            }
            record.inlineProviders.push({ selector, provider });
            return new Disposable(() => { record.inlineProviders = record.inlineProviders.filter((p) => p.provider !== provider); });
        },
        createDiagnosticCollection: () => ({ set() {}, delete() {}, clear() {}, dispose() {}, forEach() {} }),
    });

    const vscode = guard('vscode', {
        version,
        Disposable, EventEmitter, Uri, Position, Range, Selection, SnippetString, MarkdownString, ThemeColor,
        InlineCompletionItem, InlineCompletionList, CancellationError, CancellationTokenSource,
        InlineCompletionTriggerKind: { Invoke: 0, Automatic: 1 },
        StatusBarAlignment: { Left: 1, Right: 2 },
        ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
        LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
        TextDocumentSaveReason: { Manual: 1, AfterDelay: 2, FocusOut: 3 },
        TabInputText: class {}, TabInputTextDiff: class {}, TabInputNotebook: class {}, TabInputCustom: class {},
        env: { appName: 'Visual Studio Code', language: 'en', machineId: 'test', sessionId: 'test', uiKind: 1, openExternal: async () => true },
        window, workspace, commands, languages,
    });

    return { vscode, record, missing, textDocument, settings };
}

module.exports = { create };
