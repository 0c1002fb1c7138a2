// The sidecar extension for VS Code and Cursor: starts `sidecar serve` over stdio with
// vscode-languageclient (which maps LSP inline completion to the editor's inline
// suggestions), forwards `sidecar.*` settings, keeps the API key in SecretStorage, shows
// the server's status and re-triggers the inline suggestion as tokens stream in. It
// registers the inline completion provider itself (asking the server through the client)
// so that VS Code's events on it, an item shown and a part of it accepted, reach the server.

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
    DidChangeConfigurationNotification,
    ExecuteCommandRequest,
    InlineCompletionItem,
    InlineCompletionRegistrationOptions,
    InlineCompletionRequest,
    LanguageClient,
    LanguageClientOptions,
    ServerOptions,
    State,
    TransportKind,
} from 'vscode-languageclient/node';
import {
    ACCEPT_COMMAND,
    AcceptReports,
    CursorPlace,
    MODES,
    Retrigger,
    SHOWN_NOTIFICATION,
    SidecarStatus,
    UpdateParams,
    explicitSettings,
    insertTextOf,
    needsRestart,
    serverCommand,
    statusText,
    statusTooltip,
    throttle,
} from './logic';

const SECRET_KEY = 'sidecar.apiKey';
const SECTION = 'sidecar';

// Client-side command ids. The server's own commands (sidecar.toggleLocalGpu,
// sidecar.setMode, sidecar.stats, sidecar.clearCache, sidecar.acceptCompletion) are
// registered by vscode-languageclient under their ids, so these wrappers use others.
const CMD = {
    setMode: 'sidecar.setModeCommand',
    toggleLocalGpu: 'sidecar.toggleLocalGpuCommand',
    showStats: 'sidecar.showStats',
    clearCache: 'sidecar.clearCacheCommand',
    setApiKey: 'sidecar.setApiKey',
    clearApiKey: 'sidecar.clearApiKey',
    restart: 'sidecar.restartServer',
    showOutput: 'sidecar.showOutput',
    dismiss: 'sidecar.dismissInlineSuggestion',
};

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let statsChannel: vscode.OutputChannel | undefined;
let statusItem: vscode.StatusBarItem;
let lastStatus: SidecarStatus | undefined;
let initOptions: Record<string, unknown> = {};
let retrigger: Retrigger;
let extensionContext: vscode.ExtensionContext;
let starting: Promise<void> | undefined;

function config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration(SECTION);
}

function currentSettings(): Record<string, unknown> {
    const cfg = config();
    return explicitSettings((key) => cfg.inspect(key));
}

function workspaceDir(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** The executable on PATH (or as given), or undefined when it cannot be found. */
function resolveExecutable(command: string): string | undefined {
    const exts = process.platform === 'win32' ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';').concat(['']) : [''];
    const canRun = (p: string) => {
        try {
            fs.accessSync(p, process.platform === 'win32' ? fs.constants.F_OK : fs.constants.X_OK);
            return fs.statSync(p).isFile();
        } catch {
            return false;
        }
    };
    if (path.isAbsolute(command) || /[\\/]/.test(command)) {
        return exts.map((e) => command + e).find(canRun);
    }
    for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
        if (!dir) continue;
        const found = exts.map((e) => path.join(dir, command + e)).find(canRun);
        if (found) return found;
    }
    return undefined;
}

function setStatus(s: SidecarStatus | undefined, text?: string, tooltip?: string): void {
    if (s) lastStatus = s;
    statusItem.text = text ?? (lastStatus ? statusText(lastStatus) : '$(loading~spin) sidecar');
    const md = new vscode.MarkdownString(tooltip ?? (lastStatus ? statusTooltip(lastStatus) : 'sidecar is starting'));
    md.supportThemeIcons = true;
    statusItem.tooltip = md;
    statusItem.backgroundColor = lastStatus?.health === 'error' && !text
        ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    statusItem.show();
}

function cursorPlace(): CursorPlace | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !editor.selection.isEmpty) return undefined;
    const pos = editor.selection.active;
    return {
        uri: editor.document.uri.toString(),
        version: editor.document.version,
        position: { line: pos.line, character: pos.character },
    };
}

async function serverEnv(): Promise<NodeJS.ProcessEnv> {
    // SILICONFLOW_API_KEY and every other variable pass through; a key in SecretStorage
    // wins over the environment's. The key is never written to settings or logs.
    // Server log records come as window/logMessage at their real level; stderr keeps
    // errors only (VS Code marks every stderr line [error] in the output channel).
    const env: NodeJS.ProcessEnv = { ...process.env, SIDECAR_LOG_TO_CLIENT: '1' };
    const secret = await extensionContext.secrets.get(SECRET_KEY);
    if (secret) {
        env.SILICONFLOW_API_KEY = secret;
        delete env.SIDECAR_API_KEY; // the server reads it after SILICONFLOW_API_KEY
    }
    return env;
}

async function createClient(): Promise<LanguageClient | undefined> {
    const cmd = serverCommand(config().get<string>('serverPath'), workspaceDir());
    if (!resolveExecutable(cmd.command)) {
        const configured = (config().get<string>('serverPath') ?? '').trim();
        const what = configured ? `"${cmd.command}" (sidecar.serverPath)` : '"sidecar" on PATH';
        output.error(`cannot find ${what}`);
        setStatus(undefined, '$(error) sidecar: not found', `Cannot find ${what}. Set **sidecar.serverPath** to the \`sidecar\` executable or to a Python that has sidecar installed.`);
        void vscode.window.showErrorMessage(
            `sidecar: cannot find ${what}. Install sidecar (pip install -e .) or set sidecar.serverPath to its executable or to a Python with sidecar installed.`,
            'Open Settings',
        ).then((pick) => {
            if (pick) void vscode.commands.executeCommand('workbench.action.openSettings', 'sidecar.serverPath');
        });
        return undefined;
    }
    output.info(`starting: ${cmd.command} ${cmd.args.join(' ')} --stdio`);

    const serverOptions: ServerOptions = {
        command: cmd.command,
        args: cmd.args,
        transport: TransportKind.stdio,
        options: { env: await serverEnv(), cwd: workspaceDir() },
    };

    let thisClient: LanguageClient | undefined; // this client (the middleware must not use a newer one)
    const clientOptions: LanguageClientOptions = {
        // Every file and unsaved buffer; the server decides what it can complete.
        documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
        outputChannel: output,
        initializationOptions: () => {
            initOptions = currentSettings();
            return initOptions;
        },
        synchronize: { configurationSection: SECTION },
        middleware: {
            workspace: {
                // Send only the settings the user set (defaults would override the
                // server's config file and environment) in the `{sidecar: {...}}` shape.
                didChangeConfiguration: async () => {
                    const next = currentSettings();
                    if (needsRestart(initOptions, next)) {
                        output.info('a setting passed at start was removed; restarting the server');
                        void restart();
                        return;
                    }
                    await thisClient?.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: next } });
                },
            },
        },
    };

    const c = new LanguageClient('sidecar', 'sidecar', serverOptions, clientOptions);
    thisClient = c;
    ownInlineProvider(c);
    // Tell the server that this client renders sidecar/inlineCompletionUpdate (by
    // re-triggering): it then answers early and streams the rest. A client that does
    // not say so gets complete lines only (docs/operations.md "Protocol").
    c.registerFeature({
        fillClientCapabilities: (caps) => {
            caps.experimental = { ...(caps.experimental as object | undefined), sidecar: { inlineCompletionUpdate: true } };
        },
        initialize: () => undefined,
        getState: () => ({ kind: 'static' }),
        clear: () => undefined,
    });
    c.onNotification('sidecar/status', (s: SidecarStatus) => setStatus(s));
    c.onNotification('sidecar/inlineCompletionUpdate', (p: UpdateParams) => {
        retrigger.onUpdate(p);
        if (p.done) refreshStatusSoon();
    });
    c.onDidChangeState((e) => {
        if (e.newState === State.Stopped) setStatus(undefined, '$(debug-disconnect) sidecar: stopped', 'The sidecar server is not running. Run **sidecar: Restart Server**.');
        else if (e.newState === State.Starting) setStatus(undefined, '$(loading~spin) sidecar');
        else if (e.newState === State.Running) setStatus(undefined);
    });
    return c;
}

/**
 * VS Code's inline completion provider API in the VS Code and Cursor this targets (1.100):
 * `handleDidShowCompletionItem(item, updatedInsertText)` and
 * `handleDidPartiallyAcceptCompletionItem(item, acceptedLength | PartialAcceptInfo)`. They
 * are the API proposal `inlineCompletionsAdditions` (package.json `enabledApiProposals`):
 * VS Code calls them only where the extension may use the proposal (code-server allows
 * every proposal; desktop VS Code with `--enable-proposed-api sidecar.sidecar`), and
 * elsewhere refuses to register a provider that has them.
 */
interface ProviderWithEvents extends vscode.InlineCompletionItemProvider {
    handleDidShowCompletionItem?(item: vscode.InlineCompletionItem, updatedInsertText: string): void;
    handleDidPartiallyAcceptCompletionItem?(item: vscode.InlineCompletionItem, info: unknown): void;
}

type RegisterInlineProvider = (options: InlineCompletionRegistrationOptions) => [vscode.Disposable, vscode.InlineCompletionItemProvider];

let warnedNoEvents = false;

/**
 * Registers the inline completion provider for client `c` in place of the one
 * vscode-languageclient would register (its middleware has no hook for the provider's
 * events), when the server registers inline completion. It asks the server as the
 * client's own provider does, and reports what VS Code shows and partly accepts.
 */
function ownInlineProvider(c: LanguageClient): void {
    const feature = c.getFeature(InlineCompletionRequest.method) as unknown as { registerLanguageProvider: RegisterInlineProvider } | undefined;
    if (!feature) {
        output.warn('vscode-languageclient has no inline completion feature; shown and partly accepted suggestions are not reported');
        return;
    }
    const reports = new AcceptReports({
        shown: (id) => {
            output.debug(`shown: ${id}`);
            if (c.isRunning()) c.sendNotification(SHOWN_NOTIFICATION, { id }).catch((err) => output.warn(`${SHOWN_NOTIFICATION}: ${String(err)}`));
        },
        partial: (id, units) => {
            output.debug(`partly accepted: ${id}, ${units} UTF-16 units`);
            if (!c.isRunning()) return;
            c.sendRequest(ExecuteCommandRequest.type, { command: ACCEPT_COMMAND, arguments: [id, units] })
                .then(undefined, (err) => output.warn(`${ACCEPT_COMMAND} (partial): ${String(err)}`));
        },
    });
    feature.registerLanguageProvider = (options) => {
        const selector = c.protocol2CodeConverter.asDocumentSelector(options.documentSelector ?? []);
        const provideInlineCompletionItems = async (document: vscode.TextDocument, position: vscode.Position,
            context: vscode.InlineCompletionContext, token: vscode.CancellationToken) => {
            retrigger.noteAsked(document.uri.toString(), document.version, { line: position.line, character: position.character });
            let result = await c.sendRequest(InlineCompletionRequest.type,
                c.code2ProtocolConverter.asInlineCompletionParams(document, position, context), token).then(
                (r) => (token.isCancellationRequested ? null : c.protocol2CodeConverter.asInlineCompletionResult(r, token)),
                (err) => c.handleFailedRequest(InlineCompletionRequest.type, token, err, null));
            let items = Array.isArray(result) ? result : result?.items;
            if ((!items || items.length === 0) && context.triggerKind === vscode.InlineCompletionTriggerKind.Invoke
                && !token.isCancellationRequested) {
                // VS Code keeps an empty answer to an explicit request as the state of this
                // place, and no later trigger there fetches again: show what the server
                // streamed here instead of blanking it (logic.ts, Retrigger).
                const streamed = retrigger.streamedItem(document.uri.toString(), document.version,
                    { line: position.line, character: position.character });
                if (streamed) {
                    output.info(`the server answered nothing to a re-request where it had streamed ${insertTextOf(streamed).length} characters: showing those`);
                    result = await c.protocol2CodeConverter.asInlineCompletionResult({ items: [streamed as InlineCompletionItem] }, token);
                    items = Array.isArray(result) ? result : result?.items;
                }
            }
            if (items && items.length > 0) {
                retrigger.noteAnswer(document.uri.toString(), document.version,
                    { line: position.line, character: position.character }, insertTextOf(items[0]));
            }
            return result;
        };
        const withEvents: ProviderWithEvents = {
            provideInlineCompletionItems,
            handleDidShowCompletionItem: (item) => void reports.shown(item),
            handleDidPartiallyAcceptCompletionItem: (item, info) => void reports.partial(item, info),
        };
        try {
            return [vscode.languages.registerInlineCompletionItemProvider(selector, withEvents), withEvents];
        } catch (err) {
            // The API proposal is not allowed here: complete without the events (full
            // accepts are still reported, by the item's command).
            if (!warnedNoEvents) {
                warnedNoEvents = true;
                output.warn(`this editor does not let the extension see inline suggestions shown and partly accepted (${String(err).split('\n')[0]}); `
                    + 'full accepts are reported, partial accepts (Accept Word, Accept Line) and shown suggestions are not. '
                    + 'Start VS Code with --enable-proposed-api sidecar.sidecar (or add "enable-proposed-api": ["sidecar.sidecar"] to argv.json) to report them.');
            }
            const plain: vscode.InlineCompletionItemProvider = { provideInlineCompletionItems };
            return [vscode.languages.registerInlineCompletionItemProvider(selector, plain), plain];
        }
    };
}

async function start(): Promise<void> {
    if (starting) return starting;
    starting = (async () => {
        setStatus(undefined, '$(loading~spin) sidecar');
        client = await createClient();
        if (!client) return;
        try {
            await client.start();
        } catch (err) {
            output.error(`the server did not start: ${String(err)}`);
            setStatus(undefined, '$(error) sidecar: failed', 'The sidecar server failed to start; see the **sidecar** output.');
        }
    })().finally(() => {
        starting = undefined;
    });
    return starting;
}

async function stop(): Promise<void> {
    const c = client;
    client = undefined;
    retrigger?.reset();
    if (c && c.needsStop()) {
        try {
            await c.stop(2000);
        } catch (err) {
            output.warn(`stopping the server: ${String(err)}`);
        }
    }
    await c?.dispose().catch(() => undefined);
}

let restarts: Promise<void> = Promise.resolve();

/** Stop and start again; restarts asked for while one runs follow it in turn. */
function restart(): Promise<void> {
    restarts = restarts.then(async () => {
        await starting;
        await stop();
        await start();
    }).catch((err) => output.error(`restart: ${String(err)}`));
    return restarts;
}

/** Runs a server command; undefined (with a message) when the server is not running. */
async function serverCommandRequest<T>(command: string, args: unknown[] = []): Promise<T | undefined> {
    if (!client || !client.isRunning()) {
        const pick = await vscode.window.showWarningMessage('sidecar: the server is not running.', 'Restart', 'Show Output');
        if (pick === 'Restart') void restart();
        if (pick === 'Show Output') output.show();
        return undefined;
    }
    try {
        return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
    } catch (err) {
        void vscode.window.showErrorMessage(`sidecar: ${command} failed: ${(err as Error).message ?? String(err)}`);
        return undefined;
    }
}

type ModeResult = SidecarStatus & { changed?: boolean; message?: string };

function afterModeSwitch(r: ModeResult | undefined): void {
    if (!r) return;
    if (r.model || r.side) setStatus({ ...lastStatus, ...r });
    if (!r.message) vscode.window.setStatusBarMessage(`sidecar: ${r.mode} mode`, 3000);
}

const refreshStatusSoon = throttle(() => {
    if (!client?.isRunning()) return;
    client.sendRequest(ExecuteCommandRequest.type, { command: 'sidecar.stats', arguments: [] }).then(
        (stats: any) => {
            if (stats && typeof stats.status === 'object') setStatus({ ...lastStatus, ...stats.status });
        },
        () => undefined,
    );
}, 3000);

function registerCommands(context: vscode.ExtensionContext): void {
    const reg = (id: string, fn: (...args: any[]) => unknown) => context.subscriptions.push(vscode.commands.registerCommand(id, fn));

    reg(CMD.setMode, async () => {
        const items = MODES.map((m) => ({
            label: m.label,
            detail: m.detail,
            description: lastStatus?.mode === m.mode ? '(current)' : undefined,
            mode: m.mode,
        }));
        const pick = await vscode.window.showQuickPick(items, { title: 'sidecar: completion mode', placeHolder: 'Where completions come from' });
        if (pick) afterModeSwitch(await serverCommandRequest<ModeResult>('sidecar.setMode', [pick.mode]));
    });

    reg(CMD.toggleLocalGpu, async () => afterModeSwitch(await serverCommandRequest<ModeResult>('sidecar.toggleLocalGpu')));

    reg(CMD.showStats, async () => {
        const stats = await serverCommandRequest<unknown>('sidecar.stats');
        if (stats === undefined) return;
        statsChannel ??= vscode.window.createOutputChannel('sidecar stats', 'json');
        statsChannel.clear();
        statsChannel.append(JSON.stringify(stats, null, 2) + '\n');
        statsChannel.show(true);
    });

    reg(CMD.clearCache, async () => {
        const r = await serverCommandRequest<{ cleared?: number; enabled?: boolean }>('sidecar.clearCache');
        if (!r) return;
        void vscode.window.showInformationMessage(r.enabled === false
            ? 'sidecar: the completion cache is off.'
            : `sidecar: cleared ${r.cleared ?? 0} cached completion${r.cleared === 1 ? '' : 's'}.`);
    });

    reg(CMD.setApiKey, async () => {
        const key = await vscode.window.showInputBox({
            title: 'sidecar: SiliconFlow API key',
            prompt: 'Stored in the editor\'s secret storage (OS keychain), never in settings.json. Leave empty to remove it.',
            password: true,
            ignoreFocusOut: true,
            placeHolder: 'sk-...',
        });
        if (key === undefined) return;
        if (key.trim()) {
            await extensionContext.secrets.store(SECRET_KEY, key.trim());
            void vscode.window.showInformationMessage('sidecar: API key saved; restarting the server.');
        } else {
            await extensionContext.secrets.delete(SECRET_KEY);
            void vscode.window.showInformationMessage('sidecar: API key removed; restarting the server.');
        }
        // secrets.onDidChange restarts the server (in every window).
    });

    reg(CMD.clearApiKey, async () => {
        await extensionContext.secrets.delete(SECRET_KEY);
        void vscode.window.showInformationMessage('sidecar: API key removed from secret storage.');
    });

    reg(CMD.restart, () => restart());
    reg(CMD.showOutput, () => output.show());

    // Escape on a visible suggestion: hide it, and stop re-showing it as tokens arrive.
    reg(CMD.dismiss, async () => {
        const place = cursorPlace();
        if (place) retrigger.dismiss(place.uri, place.version, place.position);
        await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    extensionContext = context;
    output = vscode.window.createOutputChannel('sidecar', { log: true });
    statusItem = vscode.window.createStatusBarItem('sidecar.status', vscode.StatusBarAlignment.Right, 100);
    statusItem.name = 'sidecar';
    statusItem.command = CMD.setMode;
    context.subscriptions.push(output, statusItem);

    retrigger = new Retrigger({
        intervalMs: 50,
        newLinesOnly: true,
        cursor: cursorPlace,
        // VS Code 1.100 skips a fetch when its current suggestion came from an explicit
        // request at the same position and document version, so a bare trigger shows the
        // first update only; hiding the suggestion first makes it fetch again (checked in
        // code-server 4.100.3: all lines of a streamed suggestion appear). The trigger
        // command settles once VS Code's fetch is over: the Retrigger waits for it before
        // the next one (a trigger during that fetch would be folded into it and lost).
        trigger: async () => {
            await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
            await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
        },
        onRepeat: (text, n) => output.info(`re-trigger ${n}: the editor did not ask for the update (${text.length} characters)`),
    });
    registerCommands(context);

    context.subscriptions.push(
        vscode.workspace.onDidChangeConfiguration((e) => {
            if (e.affectsConfiguration('sidecar.serverPath')) void restart();
        }),
        context.secrets.onDidChange((e) => {
            if (e.key === SECRET_KEY) void restart();
        }),
        vscode.window.onDidChangeTextEditorSelection(() => retrigger.cursorMoved()),
        { dispose: () => void stop() },
    );

    await start();
}

export async function deactivate(): Promise<void> {
    await stop();
}
