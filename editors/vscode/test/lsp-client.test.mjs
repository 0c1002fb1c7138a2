// An independent LSP client for the sidecar: Microsoft's vscode-jsonrpc and
// vscode-languageserver-protocol over stdio (no VS Code API), sending the capabilities
// VS Code sends, against the simulated backend (python -m devtools.simulator).
//
// Server: $SIDECAR_PYTHON -m sidecar serve --stdio (default python3).
// Run: npm test (node --test).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import protocol from 'vscode-languageserver-protocol/node';

const {
    createProtocolConnection, StreamMessageReader, StreamMessageWriter,
    InitializeRequest, InitializedNotification, DidOpenTextDocumentNotification, DidChangeTextDocumentNotification,
    DidChangeConfigurationNotification, InlineCompletionRequest, InlineCompletionTriggerKind,
    ExecuteCommandRequest, ShutdownRequest, ExitNotification, ShowMessageNotification, LogMessageNotification,
    PositionEncodingKind, TextDocumentSyncKind, MessageType,
} = protocol;

const PYTHON = process.env.SIDECAR_PYTHON || 'python3';
// The simulator is a development tool of the clone (devtools/), run from its root.
const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const STEP_MS = 15_000; // every single await on the server gets this long at most
const URI = 'file:///src/sum.py';
// The cursor sits on the blank line inside the function (line 1, column 4).
const DOC = 'def total(xs):\n    \n\nprint(total([1, 2, 3]))\n';
const OUTPUT = 'result = 0\n    for x in xs:\n        result += x\n    return result';

/** Reject after `ms` with a message naming what was awaited. */
function within(promise, ms, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Poll `fn` until it returns a truthy value. */
async function waitFor(fn, ms, what) {
    const deadline = Date.now() + ms;
    for (;;) {
        const value = fn();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
        await sleep(10);
    }
}

function kill(child) {
    if (child && child.exitCode === null && child.signalCode === null) {
        try { child.kill('SIGKILL'); } catch { /* already gone */ }
    }
}

/** What VS Code 1.9x sends, trimmed to what matters to an inline-completion server. */
function vscodeCapabilities() {
    return {
        // What the extension's static feature adds: it renders sidecar/inlineCompletionUpdate.
        experimental: { sidecar: { inlineCompletionUpdate: true } },
        general: {
            positionEncodings: [PositionEncodingKind.UTF16],
            regularExpressions: { engine: 'ECMAScript', version: 'ES2020' },
            markdown: { parser: 'marked', version: '1.1.0' },
            staleRequestSupport: { cancel: true, retryOnContentModified: [] },
        },
        window: {
            showMessage: { messageActionItem: { additionalPropertiesSupport: true } },
            showDocument: { support: true },
            workDoneProgress: true,
        },
        workspace: {
            applyEdit: true,
            configuration: true,
            workspaceFolders: true,
            didChangeConfiguration: { dynamicRegistration: true },
            executeCommand: { dynamicRegistration: true },
        },
        textDocument: {
            synchronization: { dynamicRegistration: true, willSave: true, willSaveWaitUntil: true, didSave: true },
            inlineCompletion: { dynamicRegistration: true },
        },
    };
}

describe('sidecar over stdio with a vscode-languageserver-protocol client', () => {
    let tmp;
    let simulator;
    let server;
    let connection;
    let baseUrl;
    let initResult;
    let serverExit;
    const updates = [];
    const statuses = [];
    const messages = [];
    let stderr = '';

    before(async () => {
        tmp = mkdtempSync(join(tmpdir(), 'sidecar-lsp-'));
        const urlFile = join(tmp, 'sim-url');
        simulator = spawn(PYTHON, [
            '-m', 'devtools.simulator', '--port', '0', '--url-file', urlFile,
            '--ttft-ms', '30', '--tokens-per-s', '120', '--output', OUTPUT, '--log-level', 'WARNING',
        ], { stdio: ['ignore', 'ignore', 'pipe'], cwd: REPO_ROOT });
        let simErr = '';
        simulator.stderr.on('data', (d) => { simErr += d; });
        baseUrl = await waitFor(() => {
            if (simulator.exitCode !== null) throw new Error(`simulator exited ${simulator.exitCode}: ${simErr}`);
            try {
                const text = readFileSync(urlFile, 'utf8');
                return text.endsWith('\n') ? text.trim() : undefined;
            } catch { return undefined; }
        }, STEP_MS, 'the simulator to write its URL');

        writeFileSync(join(tmp, 'none.toml'), '');
        const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SIDECAR_') && !k.startsWith('SILICONFLOW_')));
        Object.assign(env, {
            SILICONFLOW_API_KEY: 'test',
            SIDECAR_BASE_URL: baseUrl,
            // The simulator plays SiliconFlow on loopback, not a SiliconFlow host: name it.
            SIDECAR_PROVIDER: 'siliconflow',
            SIDECAR_CONFIG: join(tmp, 'none.toml'),
            XDG_CACHE_HOME: join(tmp, 'cache'),
            XDG_STATE_HOME: join(tmp, 'state'),
            SIDECAR_LOG_LEVEL: 'info',
        });
        // Exactly how the extension starts it: `<python> -m sidecar serve --stdio`.
        server = spawn(PYTHON, ['-m', 'sidecar', 'serve', '--stdio'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
        server.stderr.on('data', (d) => { stderr += d; });
        serverExit = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));

        connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
        connection.onNotification('sidecar/inlineCompletionUpdate', (p) => updates.push({ at: Date.now(), ...p }));
        connection.onNotification('sidecar/status', (p) => statuses.push(p));
        connection.onNotification(ShowMessageNotification.type, (p) => messages.push(p));
        connection.onNotification(LogMessageNotification.type, () => {});
        // Server-to-client requests VS Code would answer (registerCapability, configuration, ...).
        connection.onRequest((method, params) => {
            if (method === 'workspace/configuration') return (params?.items ?? []).map(() => null);
            return null;
        });
        connection.listen();

        initResult = await within(connection.sendRequest(InitializeRequest.type, {
            processId: process.pid,
            clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
            locale: 'en',
            rootUri: 'file:///work',
            workspaceFolders: [{ uri: 'file:///work', name: 'work' }],
            capabilities: vscodeCapabilities(),
            // The extension's shape: camelCase keys, only the settings the user set.
            initializationOptions: { maxTokens: 64, debounceMinMs: 0, prefetchEnabled: false },
            trace: 'off',
        }), STEP_MS, 'initialize');
        await connection.sendNotification(InitializedNotification.type, {});
    });

    after(async () => {
        try { connection?.dispose(); } catch { /* closed */ }
        kill(server);
        kill(simulator);
        if (tmp) rmSync(tmp, { recursive: true, force: true });
    });

    test('initialize advertises inline completion, incremental sync and the sidecar commands', () => {
        const caps = initResult.capabilities;
        assert.ok(caps.inlineCompletionProvider, 'inlineCompletionProvider');
        const sync = typeof caps.textDocumentSync === 'number' ? caps.textDocumentSync : caps.textDocumentSync?.change;
        assert.equal(sync, TextDocumentSyncKind.Incremental);
        assert.ok([undefined, PositionEncodingKind.UTF16].includes(caps.positionEncoding));
        for (const cmd of ['sidecar.toggleLocalGpu', 'sidecar.setMode', 'sidecar.stats', 'sidecar.clearCache', 'sidecar.acceptCompletion']) {
            assert.ok(caps.executeCommandProvider?.commands?.includes(cmd), `command ${cmd}`);
        }
    });

    test('inline completion answers, then streams sidecar/inlineCompletionUpdate', async () => {
        await connection.sendNotification(DidOpenTextDocumentNotification.type, {
            textDocument: { uri: URI, languageId: 'python', version: 1, text: DOC },
        });
        const position = { line: 1, character: 4 };
        const result = await within(connection.sendRequest(InlineCompletionRequest.type, {
            textDocument: { uri: URI }, position, context: { triggerKind: InlineCompletionTriggerKind.Automatic },
        }), STEP_MS, 'textDocument/inlineCompletion');
        const items = Array.isArray(result) ? result : result?.items;
        assert.ok(items && items.length > 0, `no items: ${JSON.stringify(result)}\n${stderr}`);
        const first = items[0];
        const text = typeof first.insertText === 'string' ? first.insertText : first.insertText.value;
        assert.ok(text.length > 0, 'empty insertText');
        assert.ok(OUTPUT.startsWith(text), `unexpected insertText ${JSON.stringify(text)}`);
        assert.deepEqual(first.range, { start: position, end: position });
        assert.equal(first.command?.command, 'sidecar.acceptCompletion');

        // The answer came with the first line; the rest arrives as update notifications.
        const final = await waitFor(() => updates.find((u) => u.uri === URI && u.done), STEP_MS, 'a final update');
        assert.ok(updates.length >= 1);
        for (const u of updates) {
            assert.equal(u.uri, URI);
            assert.equal(u.version, 1);
            assert.deepEqual(u.position, position);
            assert.equal(typeof u.requestId, 'number');
            assert.equal(typeof u.seq, 'number');
        }
        assert.deepEqual(updates.filter((u) => u.requestId === final.requestId).map((u) => u.seq),
            updates.filter((u) => u.requestId === final.requestId).map((_, i) => i + 1));
        const finalText = final.items[0].insertText;
        assert.ok(finalText.length > text.length, `the update did not grow: ${JSON.stringify(finalText)}`);
        assert.ok(finalText.startsWith(text));
        assert.ok(finalText.includes('\n'), 'multi-line suggestion expected');
        assert.equal(final.items[0].command?.command, 'sidecar.acceptCompletion');

        // What the extension does on an update: ask again (an Invoked trigger). The finished
        // stream answers with the whole text, without a new upstream request.
        const again = await within(connection.sendRequest(InlineCompletionRequest.type, {
            textDocument: { uri: URI }, position, context: { triggerKind: InlineCompletionTriggerKind.Invoked },
        }), STEP_MS, 'the re-request');
        const againItems = Array.isArray(again) ? again : again?.items;
        assert.equal(againItems?.[0]?.insertText, finalText);
        const res = await within(fetch(new URL('/_sim/requests', baseUrl)), STEP_MS, 'GET /_sim/requests');
        const recorded = await res.json();
        assert.ok(Array.isArray(recorded), JSON.stringify(recorded));
        const upstream = recorded.filter((r) => String(r.path).endsWith('/completions'));
        assert.equal(upstream.length, 1, JSON.stringify(recorded.map((r) => r.path)));
    });

    test('typing a character and asking again still completes (incremental sync)', async () => {
        await connection.sendNotification(DidChangeTextDocumentNotification.type, {
            textDocument: { uri: URI, version: 2 },
            contentChanges: [{ range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } }, text: 'r' }],
        });
        const result = await within(connection.sendRequest(InlineCompletionRequest.type, {
            textDocument: { uri: URI }, position: { line: 1, character: 5 },
            context: { triggerKind: InlineCompletionTriggerKind.Automatic },
        }), STEP_MS, 'inlineCompletion after typing');
        const items = Array.isArray(result) ? result : result?.items;
        assert.ok(items?.length, `no items after typing: ${JSON.stringify(result)}`);
        assert.ok(items[0].insertText.startsWith('esult = 0'), JSON.stringify(items[0].insertText));
    });

    test('sidecar/status reports mode, model and health', async () => {
        const status = await waitFor(() => statuses.find((s) => s.health === 'ready'), STEP_MS, 'a ready status');
        assert.equal(status.mode, 'cloud');
        assert.equal(typeof status.model, 'string');
        assert.ok(status.model.length > 0);
        for (const key of ['side', 'backend', 'provider', 'recentTtftMs']) assert.ok(key in status, key);
    });

    test('server commands the extension calls', async () => {
        const stats = await within(connection.sendRequest(ExecuteCommandRequest.type, { command: 'sidecar.stats', arguments: [] }), STEP_MS, 'sidecar.stats');
        assert.equal(typeof stats, 'object');
        assert.ok(stats.counters['sched.requests'] >= 2, JSON.stringify(stats.counters));
        const mode = await within(connection.sendRequest(ExecuteCommandRequest.type, { command: 'sidecar.setMode', arguments: ['cloud'] }), STEP_MS, 'sidecar.setMode');
        assert.equal(mode.mode, 'cloud');
        const cleared = await within(connection.sendRequest(ExecuteCommandRequest.type, { command: 'sidecar.clearCache', arguments: [] }), STEP_MS, 'sidecar.clearCache');
        assert.equal(typeof cleared.cleared, 'number');
    });

    test('didChangeConfiguration in the extension\'s shape is accepted', async () => {
        await connection.sendNotification(DidChangeConfigurationNotification.type, {
            settings: { sidecar: { maxTokens: 48, debounceMaxMs: 300, prefetchEnabled: false } },
        });
        // A round trip after the notification, so any error message would have arrived.
        await within(connection.sendRequest(ExecuteCommandRequest.type, { command: 'sidecar.stats', arguments: [] }), STEP_MS, 'stats');
        const errors = messages.filter((m) => m.type === MessageType.Error);
        assert.deepEqual(errors, [], JSON.stringify(errors));
    });

    test('shutdown and exit end the server', async () => {
        await within(connection.sendRequest(ShutdownRequest.type), STEP_MS, 'shutdown');
        await connection.sendNotification(ExitNotification.type);
        const { code } = await within(serverExit, STEP_MS, 'the server to exit');
        assert.equal(code, 0, stderr);
    });
});
