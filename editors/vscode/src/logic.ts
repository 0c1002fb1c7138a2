// Editor-independent logic of the extension: no `vscode` import, so the Node tests
// (test/logic.test.mjs) run it directly.

import * as path from 'path';

/** The `sidecar.*` settings forwarded to the server, in the camelCase the server accepts. */
export const FORWARDED_SETTINGS = [
    'mode',
    'model',
    'baseUrl',
    'siliconflowRegion',
    'maxTokens',
    'debounceMinMs',
    'debounceMaxMs',
    'prefetchEnabled',
    'cacheEnabled',
    'localEngine',
    'localUrl',
    'localModel',
    'localModelPath',
    'localNGpuLayers',
    'logLevel',
] as const;

export type ForwardedSetting = (typeof FORWARDED_SETTINGS)[number];

/** What `WorkspaceConfiguration.inspect(key)` returns, reduced to what we read. */
export interface Inspected {
    globalValue?: unknown;
    workspaceValue?: unknown;
    workspaceFolderValue?: unknown;
}

/**
 * The settings the user set explicitly (user, workspace or folder), most specific first.
 * Defaults are never sent: a VS Code default would otherwise override the server's
 * config file and environment variables, which rank below LSP settings. Empty strings
 * mean "not set" (the settings UI cannot unset a string).
 */
export function explicitSettings(inspect: (key: string) => Inspected | undefined): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const key of FORWARDED_SETTINGS) {
        const info = inspect(key);
        if (!info) continue;
        const value = info.workspaceFolderValue ?? info.workspaceValue ?? info.globalValue;
        if (value === undefined || value === null) continue;
        if (typeof value === 'string' && value.trim() === '') continue;
        out[key] = typeof value === 'string' ? expandHome(value.trim()) : value;
    }
    return out;
}

/**
 * True when `next` dropped a key that the server got in initializationOptions: LSP
 * settings only add layers, so going back to the config file or environment value
 * takes a server restart (initializationOptions are computed afresh then).
 */
export function needsRestart(initOptions: Record<string, unknown>, next: Record<string, unknown>): boolean {
    return Object.keys(initOptions).some((k) => !(k in next));
}

export function expandHome(p: string, home = process.env.HOME ?? process.env.USERPROFILE ?? ''): string {
    if (home && (p === '~' || p.startsWith('~/') || p.startsWith('~\\'))) return path.join(home, p.slice(1));
    return p;
}

export interface ServerCommand {
    command: string;
    args: string[];
}

/** `python`, `python3`, `python3.12`, `python.exe`, `pythonw.exe`, ... */
export function isPython(executable: string): boolean {
    const base = executable.split(/[\\/]/).pop() ?? '';
    return /^python(w)?(\d+(\.\d+)*)?(\.exe)?$/i.test(base);
}

/**
 * How to start the server. Empty: `sidecar` on PATH. A Python interpreter:
 * `<python> -m sidecar serve`. Anything else: `<executable> serve`. `~` is expanded and a
 * relative path with a separator is taken from the first workspace folder (so
 * `.venv/bin/python` works in a checkout). vscode-languageclient appends `--stdio`.
 */
export function serverCommand(serverPath: string | undefined, workspaceDir?: string, home?: string): ServerCommand {
    let exe = (serverPath ?? '').trim();
    if (!exe) return { command: 'sidecar', args: ['serve'] };
    exe = expandHome(exe, home);
    if (!path.isAbsolute(exe) && /[\\/]/.test(exe) && workspaceDir) exe = path.join(workspaceDir, exe);
    if (isPython(exe)) return { command: exe, args: ['-m', 'sidecar', 'serve'] };
    return { command: exe, args: ['serve'] };
}

/** The server's `sidecar/status` notification (docs/operations.md "Protocol"). */
export interface SidecarStatus {
    mode?: string;
    side?: string;
    backend?: string;
    provider?: string;
    model?: string;
    health?: string;
    recentTtftMs?: number | null;
    enginePid?: number | null;
}

/** `Qwen/Qwen2.5-Coder-7B-Instruct` -> `Qwen2.5-Coder-7B-Instruct`; a GGUF path -> its file stem. */
export function shortModel(model: string | undefined): string {
    if (!model) return '';
    let m = model.replace(/[\\/]+$/, '');
    m = m.slice(Math.max(m.lastIndexOf('/'), m.lastIndexOf('\\')) + 1);
    return m.replace(/\.gguf$/i, '');
}

export function formatMs(ms: number | null | undefined): string {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return '';
    return ms >= 10_000 ? `${(ms / 1000).toFixed(0)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** Status bar text (with codicons): mode, model and the recent time to first token. */
export function statusText(s: SidecarStatus): string {
    const icon =
        s.health === 'starting' ? '$(loading~spin)'
            : s.health === 'error' ? '$(error)'
                : s.health === 'fallback' ? '$(warning)'
                    : s.side === 'local' ? '$(circuit-board)' : '$(cloud)';
    const mode = s.mode === 'auto' && s.side ? `auto→${s.side}` : (s.mode ?? '?');
    const parts = [mode];
    const model = shortModel(s.model);
    if (model) parts.push(model);
    const ms = formatMs(s.recentTtftMs);
    if (ms) parts.push(ms);
    return `${icon} ${parts.join(' · ')}`;
}

/** Status bar tooltip (Markdown). */
export function statusTooltip(s: SidecarStatus): string {
    const rows: [string, unknown][] = [
        ['mode', s.mode], ['side', s.side], ['backend', s.backend], ['provider', s.provider],
        ['model', s.model], ['health', s.health], ['recent time to first token', formatMs(s.recentTtftMs) || '–'],
    ];
    if (s.enginePid) rows.push(['engine pid', s.enginePid]);
    const table = rows.map(([k, v]) => `| ${k} | ${String(v ?? '–').replace(/\|/g, '\\|')} |`).join('\n');
    return `**sidecar**\n\n| | |\n|---|---|\n${table}\n\nClick to switch mode (cloud, local, auto).`;
}

export interface LspPosition {
    line: number;
    character: number;
}

/** `sidecar/inlineCompletionUpdate` params (docs/operations.md "Protocol"). */
export interface UpdateParams {
    uri: string;
    version: number;
    position: LspPosition;
    requestId: number;
    seq: number;
    items: { insertText: string | { value: string } }[];
    done: boolean;
}

/** Where the cursor is in the active editor (uri as the language client sends it). */
export interface CursorPlace {
    uri: string;
    version: number;
    position: LspPosition;
}

export interface RetriggerOptions {
    /** Least time between two triggers, ms. */
    intervalMs: number;
    /** The active editor's cursor, or undefined (no editor, a selection, ...). */
    cursor: () => CursorPlace | undefined;
    /**
     * Re-asks the editor for inline suggestions. In VS Code: hide the suggestion, then
     * `editor.action.inlineSuggest.trigger`, whose promise settles once the editor's fetch
     * is over. When it returns a promise, re-triggers run one at a time: VS Code folds an
     * explicit trigger into an explicit fetch already running at the same place and
     * version, and shows that fetch's answer, which the server gave before the newer
     * update; a trigger started then would be lost (docs/editors.md, "VS Code").
     */
    trigger: () => void | PromiseLike<unknown>;
    /**
     * Re-trigger only when an update brings a line the editor does not show yet (or is
     * the last one). In VS Code each re-trigger must hide the suggestion first, which
     * blanks the ghost text for a frame or two; growth within a line is not worth that.
     */
    newLinesOnly?: boolean;
    /**
     * How many times a trigger that led to no fetch (the editor never asked the provider
     * at that place before the trigger's promise settled) is repeated. Default 2.
     */
    maxRepeats?: number;
    /** A trigger whose promise has not settled after this long (ms) counts as over. Default 10000. */
    settleMs?: number;
    /** Told about a repeated trigger (for the output channel). */
    onRepeat?: (text: string, repeat: number) => void;
    now?: () => number;
    setTimer?: (fn: () => void, ms: number) => unknown;
    clearTimer?: (handle: unknown) => void;
}

export function insertTextOf(item: { insertText: string | { value: string } } | undefined): string {
    if (!item) return '';
    return typeof item.insertText === 'string' ? item.insertText : (item.insertText?.value ?? '');
}

function placeKey(uri: string, version: number, p: LspPosition): string {
    return `${uri}\u0000${version}\u0000${p.line}:${p.character}`;
}

/**
 * Turns `sidecar/inlineCompletionUpdate` notifications into re-triggers of the editor's
 * inline suggestion, so the ghost text grows as tokens arrive. The re-request is
 * answered by the server's running or finished stream, no new upstream request.
 *
 * - only for the active editor's document, at the version and cursor position the
 *   update belongs to (the user has not typed or moved since);
 * - throttled: at most one trigger per `intervalMs`, the latest update wins, and the
 *   last one is never dropped (a trailing trigger);
 * - one at a time (when `trigger` returns a promise): an update that arrives while the
 *   editor is still fetching for the last trigger waits until that fetch is over, then
 *   triggers; a trigger after which the editor never asked the provider at that place is
 *   repeated (`maxRepeats`);
 * - never twice for a text the editor already has (the answer to a re-request is
 *   followed by a final update with the same text: that must not trigger again): a text
 *   is the editor's once the provider handed it over (`noteAnswer`), not when a trigger
 *   was sent for it, so a trigger whose fetch showed something else does not swallow the
 *   final update; and not after the user dismissed the suggestion at that place;
 * - `streamedItem`: the last update's item at a place, for the provider to answer the
 *   explicit request of one of these re-triggers (one is running) that the server
 *   answered with nothing. VS Code keeps an empty
 *   answer to an explicit request as the state of that place: its hide then does nothing
 *   (no suggestion is visible) and every later trigger there is satisfied by that empty
 *   state without a fetch, so the streamed suggestion would stay blank until the user types.
 */
export class Retrigger {
    private readonly now: () => number;
    private readonly setTimer: (fn: () => void, ms: number) => unknown;
    private readonly clearTimer: (handle: unknown) => void;
    private key = '';
    private known = new Set<string>();
    private knownLines = 0;
    private dismissed = false;
    private lastUpdate: UpdateParams | undefined;
    private asks = 0;
    private pending: UpdateParams | undefined;
    private timer: unknown;
    private lastFire = -Infinity;
    /** The trigger whose fetch is not over yet (its id), or 0. */
    private running = 0;
    private runs = 0;
    /** Triggers fired so far (for tests and the output channel). */
    fired = 0;
    /** Of those, repeats of a trigger that led to no fetch. */
    repeated = 0;

    constructor(private readonly opts: RetriggerOptions) {
        this.now = opts.now ?? (() => Date.now());
        this.setTimer = opts.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
        this.clearTimer = opts.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>));
    }

    private at(uri: string, version: number, position: LspPosition): void {
        const key = placeKey(uri, version, position);
        if (key !== this.key) {
            this.key = key;
            this.known = new Set();
            this.knownLines = 0;
            this.dismissed = false;
            this.asks = 0;
            this.lastUpdate = undefined;
        }
    }

    private matches(p: { uri: string; version: number; position: LspPosition }): boolean {
        const c = this.opts.cursor();
        return !!c && c.uri === p.uri && c.version === p.version
            && c.position.line === p.position.line && c.position.character === p.position.character;
    }

    /** The editor asked the provider for inline suggestions at this place (before the server answers). */
    noteAsked(uri: string, version: number, position: LspPosition): void {
        this.at(uri, version, position);
        this.asks++;
    }

    /** The editor got `text` as the answer of an inline completion request at this place. */
    noteAnswer(uri: string, version: number, position: LspPosition, text: string): void {
        this.at(uri, version, position);
        if (text) this.remember(text);
    }

    private remember(text: string): void {
        this.known.add(text);
        this.knownLines = Math.max(this.knownLines, text.split('\n').length);
    }

    /**
     * The item of the last update at this place (the server's latest text there) while a
     * re-trigger runs, or undefined: none running (the user's own explicit request gets
     * the server's answer as it is), another place, or dismissed there.
     */
    streamedItem(uri: string, version: number, position: LspPosition): UpdateParams['items'][number] | undefined {
        if (!this.running || placeKey(uri, version, position) !== this.key || this.dismissed) return undefined;
        return this.lastUpdate?.items?.[0];
    }

    /** Forget everything (the server restarted: its updates and answers belong to the old one). */
    reset(): void {
        this.cancel();
        this.key = '';
        this.known = new Set();
        this.knownLines = 0;
        this.dismissed = false;
        this.asks = 0;
        this.lastUpdate = undefined;
        this.running = 0;
    }

    /** The cursor moved (a selection event): a pending update for another place is dropped. */
    cursorMoved(): void {
        if (this.pending && !this.matches(this.pending)) this.cancel();
    }

    /** The user dismissed the suggestion (Escape): no re-trigger at this place any more. */
    dismiss(uri: string, version: number, position: LspPosition): void {
        this.at(uri, version, position);
        this.dismissed = true;
        this.cancel();
    }

    onUpdate(p: UpdateParams): void {
        const text = insertTextOf(p.items?.[0]);
        if (!text || !this.matches(p)) return;
        this.at(p.uri, p.version, p.position);
        this.lastUpdate = p;
        if (this.dismissed || this.known.has(text)) return;
        if (this.opts.newLinesOnly && !p.done && text.split('\n').length <= this.knownLines) return;
        this.pending = p;
        this.schedule();
    }

    /** Fire the pending update now or when `intervalMs` has passed, unless a trigger runs (it fires it when over). */
    private schedule(): void {
        if (!this.pending || this.running || this.timer !== undefined) return;
        const wait = this.lastFire + this.opts.intervalMs - this.now();
        if (wait <= 0) {
            this.fire();
        } else {
            this.timer = this.setTimer(() => {
                this.timer = undefined;
                this.fire();
            }, wait);
        }
    }

    private fire(): void {
        if (this.running) return;
        const p = this.pending;
        this.pending = undefined;
        if (!p || !this.matches(p)) return;
        this.at(p.uri, p.version, p.position);
        const text = insertTextOf(p.items[0]);
        if (this.dismissed || this.known.has(text)) return;
        // Its lines count as asked for (newLinesOnly: growth within the last of them waits
        // for the next line or the end); the text itself is the editor's once handed over.
        this.knownLines = Math.max(this.knownLines, text.split('\n').length);
        this.start(p, text, 0);
    }

    private start(p: UpdateParams, text: string, repeat: number): void {
        this.lastFire = this.now();
        this.fired++;
        const asksBefore = this.asks;
        const key = this.key;
        let r: void | PromiseLike<unknown>;
        try {
            r = this.opts.trigger();
        } catch {
            r = undefined;
        }
        if (!r || typeof (r as PromiseLike<unknown>).then !== 'function') return;
        const id = ++this.runs;
        this.running = id;
        const guard = this.setTimer(() => over(), this.opts.settleMs ?? 10_000);
        const over = () => {
            if (this.running !== id) return;
            this.clearTimer(guard);
            this.running = 0;
            if (this.pending) {
                this.schedule(); // a newer update came meanwhile: it triggers now
            } else if (this.key === key && this.asks === asksBefore && !this.dismissed
                && repeat < (this.opts.maxRepeats ?? 2) && this.matches(p)) {
                // The editor never asked at this place: the trigger was folded into nothing.
                this.repeated++;
                this.opts.onRepeat?.(text, repeat + 1);
                this.start(p, text, repeat + 1);
            }
        };
        (r as PromiseLike<unknown>).then(over, over);
    }

    cancel(): void {
        if (this.timer !== undefined) this.clearTimer(this.timer);
        this.timer = undefined;
        this.pending = undefined;
    }
}

/** The server command an inline completion item runs when accepted: `[item id, UTF-16 units]`. */
export const ACCEPT_COMMAND = 'sidecar.acceptCompletion';
/** The notification that tells the server an item was displayed: `{id: item id}`. */
export const SHOWN_NOTIFICATION = 'sidecar/didShowCompletion';

/** What an inline completion item carries that matters here (its accept command). */
export interface AcceptableItem {
    command?: { command?: string; arguments?: unknown[] };
}

/** The item id that an item's `sidecar.acceptCompletion` command names, or undefined. */
export function acceptItemId(item: AcceptableItem | undefined): string | undefined {
    const cmd = item?.command;
    if (!cmd || cmd.command !== ACCEPT_COMMAND) return undefined;
    const id = cmd.arguments?.[0];
    return typeof id === 'string' && id ? id : undefined;
}

/**
 * The UTF-16 units taken by a partial accept, from the second argument of VS Code's
 * `handleDidPartiallyAcceptCompletionItem`: a number, or `PartialAcceptInfo`
 * `{kind, acceptedLength}`. VS Code 1.100 calls the handler twice per partial accept, once
 * with each form and the same length. The length counts from the start of the item's
 * range, i.e. it is relative to the item's text, as the accept command's units are.
 */
export function acceptedLengthOf(arg: unknown): number | undefined {
    const n = typeof arg === 'number' ? arg
        : arg && typeof arg === 'object' ? (arg as { acceptedLength?: unknown }).acceptedLength : undefined;
    return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : undefined;
}

/** Where `AcceptReports` sends what it reports (the language client). */
export interface AcceptSink {
    shown(id: string): void;
    partial(id: string, units: number): void;
}

/**
 * Turns VS Code's inline completion events into the server's protocol (docs/editors.md
 * "What every editor tells the server"): an item displayed becomes one
 * `sidecar/didShowCompletion` (once per item id, however often VS Code redraws or re-wraps
 * it); a partial accept (Accept Word, Accept Line) becomes `sidecar.acceptCompletion
 * [id, taken units]`, once per growth of what was taken from that item (VS Code reports each
 * partial accept twice, and the length is cumulative: it grows with each word or line taken
 * from the same item). A full accept is not reported here: VS Code runs the item's own
 * command for it. Items without a sidecar accept command are ignored.
 */
export class AcceptReports {
    private readonly shownIds = new Map<string, true>();
    private readonly taken = new Map<string, number>();

    constructor(private readonly sink: AcceptSink, private readonly limit = 512) {}

    /** VS Code displayed `item`. True when it was reported. */
    shown(item: AcceptableItem | undefined): boolean {
        const id = acceptItemId(item);
        if (!id || this.shownIds.has(id)) return false;
        remember(this.shownIds, id, true, this.limit);
        this.sink.shown(id);
        return true;
    }

    /** VS Code inserted part of `item` (`info`: the taken length, either form). True when reported. */
    partial(item: AcceptableItem | undefined, info: unknown): boolean {
        const id = acceptItemId(item);
        const units = acceptedLengthOf(info);
        if (!id || units === undefined || units <= (this.taken.get(id) ?? 0)) return false;
        remember(this.taken, id, units, this.limit);
        this.sink.partial(id, units);
        return true;
    }
}

/** Set `key` in an insertion-ordered map that keeps its last `limit` keys. */
function remember<V>(map: Map<string, V>, key: string, value: V, limit: number): void {
    map.delete(key);
    map.set(key, value);
    while (map.size > limit) map.delete(map.keys().next().value as string);
}

/** Leading-and-trailing throttle for cheap refreshes (status bar from `sidecar.stats`). */
export function throttle(fn: () => void, ms: number, now: () => number = () => Date.now()): () => void {
    let last = -Infinity;
    let timer: ReturnType<typeof setTimeout> | undefined;
    return () => {
        const wait = last + ms - now();
        if (wait <= 0) {
            last = now();
            fn();
        } else if (!timer) {
            timer = setTimeout(() => {
                timer = undefined;
                last = now();
                fn();
            }, wait);
        }
    };
}

export const MODES = [
    { mode: 'cloud', label: 'cloud', detail: 'SiliconFlow or the OpenAI-compatible server at the base URL' },
    { mode: 'local', label: 'local', detail: 'A local engine (managed llama.cpp, llama-server, Ollama, ...); nothing leaves the machine' },
    { mode: 'auto', label: 'auto', detail: 'The local engine while it is healthy, the cloud otherwise' },
] as const;
