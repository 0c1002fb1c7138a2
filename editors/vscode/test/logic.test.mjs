// The extension's editor-independent logic (src/logic.ts, bundled to out/logic.cjs by
// `npm run build:test`, which `npm test` runs first).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import logic from '../out/logic.cjs';

const { serverCommand, isPython, explicitSettings, needsRestart, Retrigger, statusText, statusTooltip, shortModel, formatMs,
    AcceptReports, acceptItemId, acceptedLengthOf } = logic;

describe('serverCommand', () => {
    test('default: sidecar on PATH', () => {
        assert.deepEqual(serverCommand(''), { command: 'sidecar', args: ['serve'] });
        assert.deepEqual(serverCommand(undefined), { command: 'sidecar', args: ['serve'] });
        assert.deepEqual(serverCommand('   '), { command: 'sidecar', args: ['serve'] });
    });
    test('a Python runs -m sidecar serve', () => {
        for (const py of ['/usr/bin/python3', '/x/.venv/bin/python', 'python3.12', 'C:\\Py\\python.exe', 'pythonw.exe']) {
            assert.ok(isPython(py), py);
            assert.deepEqual(serverCommand(py).args, ['-m', 'sidecar', 'serve'], py);
        }
        assert.ok(!isPython('/usr/bin/sidecar'));
        assert.ok(!isPython('/usr/bin/python-config'));
    });
    test('an executable runs serve', () => {
        assert.deepEqual(serverCommand('/opt/sidecar/bin/sidecar'), { command: '/opt/sidecar/bin/sidecar', args: ['serve'] });
    });
    test('~ and workspace-relative paths', () => {
        assert.deepEqual(serverCommand('~/venv/bin/python', undefined, '/home/u'),
            { command: '/home/u/venv/bin/python', args: ['-m', 'sidecar', 'serve'] });
        assert.equal(serverCommand('.venv/bin/python', '/repo').command, '/repo/.venv/bin/python');
        assert.equal(serverCommand('sidecar', '/repo').command, 'sidecar'); // bare name: PATH
    });
});

describe('explicitSettings', () => {
    const inspector = (values) => (key) => values[key];
    test('only explicitly set values, most specific scope first', () => {
        const out = explicitSettings(inspector({
            mode: { globalValue: 'cloud', workspaceValue: 'local' },
            model: { globalValue: 'm1' },
            maxTokens: { globalValue: 32 },
            prefetchEnabled: { workspaceFolderValue: false, globalValue: true },
            baseUrl: { globalValue: '   ' }, // empty: not set
            localModelPath: {}, // default only
            debounceMinMs: { globalValue: null },
            apiKey: { globalValue: 'sk-should-never-be-sent' },
        }));
        assert.deepEqual(out, { mode: 'local', model: 'm1', maxTokens: 32, prefetchEnabled: false });
    });
    test('every contributed server setting is forwarded under its camelCase name', () => {
        const keys = ['mode', 'model', 'baseUrl', 'siliconflowRegion', 'maxTokens', 'debounceMinMs', 'debounceMaxMs',
            'prefetchEnabled', 'cacheEnabled', 'localEngine', 'localUrl', 'localModel', 'localModelPath', 'localNGpuLayers'];
        const out = explicitSettings((k) => ({ globalValue: `v-${k}` }));
        for (const k of keys) assert.equal(out[k], `v-${k}`, k);
        assert.ok(!('serverPath' in out));
    });
    test('a removed key that was sent at start needs a restart', () => {
        assert.equal(needsRestart({ model: 'a' }, { model: 'b' }), false);
        assert.equal(needsRestart({ model: 'a' }, { model: 'a', maxTokens: 3 }), false);
        assert.equal(needsRestart({ model: 'a', maxTokens: 3 }, { model: 'a' }), true);
    });
});

describe('status bar', () => {
    test('mode, model and latency', () => {
        const text = statusText({ mode: 'cloud', side: 'cloud', model: 'Qwen/Qwen2.5-Coder-7B-Instruct', health: 'ready', recentTtftMs: 412.6 });
        assert.equal(text, '$(cloud) cloud · Qwen2.5-Coder-7B-Instruct · 413 ms');
        assert.equal(statusText({ mode: 'auto', side: 'local', model: '/m/qwen.gguf', health: 'ready', recentTtftMs: null }),
            '$(circuit-board) auto→local · qwen');
        assert.match(statusText({ mode: 'local', side: 'local', model: 'x', health: 'starting' }), /^\$\(loading~spin\)/);
        assert.match(statusText({ mode: 'auto', side: 'cloud', model: 'x', health: 'fallback' }), /^\$\(warning\) auto→cloud/);
        assert.match(statusTooltip({ mode: 'local', enginePid: 42 }), /engine pid \| 42/);
        assert.equal(shortModel('C:\\models\\a.GGUF'), 'a');
        assert.equal(formatMs(1530), '1.5 s');
    });
});

describe('Retrigger', () => {
    function harness(extra = {}) {
        let t = 0;
        const timers = [];
        const h = {
            cursor: { uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 } },
            triggers: [],
            advance(ms) {
                t += ms;
                for (const tm of timers.filter((x) => !x.done && x.at <= t)) { tm.done = true; tm.fn(); }
            },
        };
        h.r = new Retrigger({
            intervalMs: 50,
            cursor: () => h.cursor,
            trigger: () => h.triggers.push(t),
            now: () => t,
            setTimer: (fn, ms) => { const tm = { fn, at: t + ms, done: false }; timers.push(tm); return tm; },
            clearTimer: (tm) => { tm.done = true; },
            ...extra,
        });
        return h;
    }
    const upd = (text, extra = {}) => ({
        uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 }, requestId: 7, seq: 1,
        items: text === undefined ? [] : [{ insertText: text }], done: false, ...extra,
    });

    test('triggers at once, then at most every 50 ms, keeping the last update', () => {
        const h = harness();
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'x = 1');
        h.r.onUpdate(upd('x = 1\ny'));
        assert.deepEqual(h.triggers, [0]);
        h.advance(10); h.r.onUpdate(upd('x = 1\ny ='));
        h.advance(10); h.r.onUpdate(upd('x = 1\ny = 2'));
        assert.deepEqual(h.triggers, [0]);
        h.advance(30);
        assert.deepEqual(h.triggers, [0, 50]);
        assert.equal(h.r.fired, 2);
    });

    test('with newLinesOnly: a trigger per new line and for the last update, not per token', () => {
        const h = harness({ newLinesOnly: true });
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'x = 1');
        h.r.onUpdate(upd('x = 1 +'));            // same line: no trigger (it would blank the ghost text)
        h.advance(100);
        assert.deepEqual(h.triggers, []);
        h.r.onUpdate(upd('x = 1 + 2\ny'));       // a second line
        h.advance(100);
        h.r.onUpdate(upd('x = 1 + 2\ny = 3'));   // grows within it: no trigger
        h.advance(100);
        assert.deepEqual(h.triggers, [100]);
        h.r.onUpdate(upd('x = 1 + 2\ny = 3', { done: true }));  // the end: the whole text
        h.advance(100);
        assert.equal(h.triggers.length, 2);
    });

    test('after a cold model load: the update for the live request shows, one for an older request does not', () => {
        // Three keys while the model loads: requests 1-3 at versions 2-4, each answered
        // null at its deadline; the cursor is at the third key (version 4, column 14).
        const h = harness({ newLinesOnly: true });
        h.cursor = { uri: 'file:///a.py', version: 4, position: { line: 1, character: 14 } };
        for (const [version, character] of [[2, 12], [3, 13], [4, 14]]) {
            h.r.noteAnswer('file:///a.py', version, { line: 1, character }, '');
        }
        const at = (version, character, text, done, requestId) => upd(text, {
            version, position: { line: 1, character }, requestId, done,
        });
        h.r.onUpdate(at(3, 13, 'm(xs)', true, 2));   // the loader's text sent to the second request
        h.advance(100);
        assert.deepEqual(h.triggers, []);            // not where the cursor is: dropped
        h.r.onUpdate(at(4, 14, '(', false, 3));      // the server now sends it to the live request
        h.r.onUpdate(at(4, 14, '(xs)', true, 3));
        h.advance(100);
        assert.equal(h.triggers.length, 2);          // the first text, then the last update
    });

    test('no trigger for a text the editor already has (no loop on the final update)', () => {
        const h = harness();
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'x = 1\ny = 2');
        h.r.onUpdate(upd('x = 1\ny = 2', { done: true }));
        h.r.onUpdate(upd(undefined, { done: true }));
        assert.deepEqual(h.triggers, []);
        h.r.onUpdate(upd('x = 1\ny = 2\nz'));
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'x = 1\ny = 2\nz');  // the re-request's answer
        h.advance(100);
        h.r.onUpdate(upd('x = 1\ny = 2\nz', { done: true }));
        h.advance(100);
        assert.equal(h.triggers.length, 1);
    });

    test('a text a trigger was sent for but the editor never got triggers again at the end', () => {
        const h = harness({ newLinesOnly: true });
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'x = 1');
        h.r.onUpdate(upd('x = 1\ny = 2'));
        h.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, '');  // the fetch came back with nothing
        h.advance(100);
        h.r.onUpdate(upd('x = 1\ny = 2', { done: true }));
        h.advance(100);
        assert.equal(h.triggers.length, 2);
    });

    test('streamedItem: the last update at the place while a re-trigger runs; none elsewhere, after it, after a dismiss or a reset', async () => {
        let settle;
        const h = harness({ trigger: () => new Promise((resolve) => { settle = resolve; }) });
        const here = ['file:///a.py', 3, { line: 1, character: 4 }];
        assert.equal(h.r.streamedItem(...here), undefined);
        h.r.onUpdate(upd('x = 1'));          // a re-trigger runs
        h.r.onUpdate(upd('x = 1\ny'));
        assert.deepEqual(h.r.streamedItem(...here), { insertText: 'x = 1\ny' });
        assert.equal(h.r.streamedItem('file:///a.py', 4, { line: 1, character: 4 }), undefined);
        settle();
        await new Promise((r) => setImmediate(r));
        h.advance(100);                      // 'x = 1\ny' triggers next
        assert.deepEqual(h.r.streamedItem(...here), { insertText: 'x = 1\ny' });
        h.r.reset();
        assert.equal(h.r.streamedItem(...here), undefined);
        h.r.onUpdate(upd('x = 2'));
        h.r.dismiss(...here);
        assert.equal(h.r.streamedItem(...here), undefined);
        settle();
        await new Promise((r) => setImmediate(r));
        assert.equal(h.r.streamedItem(...here), undefined);  // nothing runs
    });

    test('a selection event drops a pending update only when the cursor left its place', () => {
        const h = harness();
        h.r.onUpdate(upd('a'));
        h.r.onUpdate(upd('ab'));   // pending: the last trigger was 0 ms ago
        h.r.cursorMoved();         // the cursor is still there (e.g. the hide refocused the editor)
        h.advance(100);
        assert.equal(h.triggers.length, 2);
        h.r.onUpdate(upd('abc'));  // pending: 50 ms after the last trigger
        h.cursor = { ...h.cursor, position: { line: 2, character: 0 } };
        h.r.cursorMoved();
        h.cursor = { ...h.cursor, position: { line: 1, character: 4 } };  // back, but the update was dropped
        h.advance(100);
        assert.equal(h.triggers.length, 2);
    });

    test('only for the active document at its version and cursor', () => {
        const h = harness();
        h.r.onUpdate(upd('a', { uri: 'file:///b.py' }));
        h.r.onUpdate(upd('a', { version: 2 }));
        h.r.onUpdate(upd('a', { position: { line: 1, character: 5 } }));
        h.cursor = undefined;
        h.r.onUpdate(upd('a'));
        assert.deepEqual(h.triggers, []);
    });

    test('a pending trigger is dropped when the user typed meanwhile', () => {
        const h = harness();
        h.r.onUpdate(upd('a'));
        h.r.onUpdate(upd('ab'));
        h.cursor = { ...h.cursor, version: 4 };
        h.advance(100);
        assert.equal(h.triggers.length, 1);
    });

    test('nothing after a dismiss at that place', () => {
        const h = harness();
        h.r.onUpdate(upd('a'));
        h.r.onUpdate(upd('ab'));
        h.r.dismiss('file:///a.py', 3, { line: 1, character: 4 });
        h.advance(100);
        h.r.onUpdate(upd('abc'));
        h.advance(100);
        assert.equal(h.triggers.length, 1);
    });
});

describe('Retrigger against the way VS Code 1.100 fetches (docs/editors.md, "VS Code")', () => {
    // A model of VS Code's inline completion model, from its source (inlineCompletionsModel.ts,
    // inlineCompletionsSource.ts): `hide` clears the suggestion and cancels a fetch only
    // while a suggestion is visible (the command's precondition); an explicit trigger while
    // an explicit fetch runs at the same place is folded into it; one while the suggestion
    // shown came from an explicit fetch there fetches nothing. A fetch asks the provider
    // after `askMs` and shows the server's text of that moment `answerMs` later.
    function editor({ askMs = 30, answerMs = 60 } = {}) {
        let t = 0;
        const timers = [];
        const e = {
            shown: 'a', explicitShown: false, fetch: undefined, server: 'a', asks: 0,
            get t() { return t; },
            advance(ms) {
                const end = t + ms;
                for (;;) {
                    const next = timers.filter((x) => !x.done && x.at <= end).sort((a, b) => a.at - b.at)[0];
                    if (!next) break;
                    t = next.at; next.done = true; next.fn();
                }
                t = end;
            },
            setTimer(fn, ms) { const tm = { fn, at: t + ms, done: false }; timers.push(tm); return tm; },
            hide() {
                if (!e.shown) return;  // precondition: inlineSuggestionVisible
                e.shown = ''; e.explicitShown = false;
                if (e.fetch) { e.fetch.cancelled = true; e.fetch.resolve(); e.fetch = undefined; }
            },
            trigger() {
                if (e.fetch) return e.fetch.promise;      // folded into the running explicit fetch
                if (e.explicitShown) return Promise.resolve();  // satisfied by what is shown
                const f = {};
                f.promise = new Promise((resolve) => { f.resolve = resolve; });
                e.fetch = f;
                e.setTimer(() => {
                    if (f.cancelled) return;
                    e.asks++;
                    e.r.noteAsked('file:///a.py', 3, { line: 1, character: 4 });
                    // The provider as extension.ts has it: the server's answer; for an explicit
                    // request it answered with nothing, what the server streamed here.
                    const server = e.serverAnswer ?? e.server;
                    const answer = server || (e.r.streamedItem('file:///a.py', 3, { line: 1, character: 4 })?.insertText ?? '');
                    e.setTimer(() => {
                        if (f.cancelled) return;
                        e.fetch = undefined;
                        e.shown = answer; e.explicitShown = true;
                        e.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, answer);
                        f.resolve();
                    }, answerMs);
                }, askMs);
                return f.promise;
            },
        };
        e.r = new Retrigger({
            intervalMs: 50,
            newLinesOnly: true,
            cursor: () => ({ uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 } }),
            trigger: () => { e.hide(); return e.trigger(); },
            now: () => t,
            setTimer: (fn, ms) => e.setTimer(fn, ms),
            clearTimer: (tm) => { tm.done = true; },
        });
        e.r.noteAnswer('file:///a.py', 3, { line: 1, character: 4 }, 'a');
        return e;
    }
    const tick = () => new Promise((r) => setImmediate(r));
    const update = (e, text, done = false) => {
        e.server = text;
        e.r.onUpdate({ uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 }, requestId: 1, seq: 1,
            items: [{ insertText: text }], done });
    };
    async function run(e, ms) {
        for (let i = 0; i < ms; i += 5) { e.advance(5); await tick(); }
    }

    test('the last update reaches the screen when it comes while the editor fetches for the one before', async () => {
        const e = editor();
        update(e, 'a\nb');               // a new line: hide, trigger; the fetch asks at 30 ms
        await run(e, 60);
        update(e, 'a\nb\nc', true);      // the end, while that fetch (answered at 90 ms) runs
        await run(e, 400);
        assert.equal(e.shown, 'a\nb\nc');
        assert.equal(e.asks, 2);
    });

    test('an explicit request the server answers with nothing shows what was streamed, not a blank', async () => {
        const e = editor();
        e.serverAnswer = '';             // e.g. the request superseded, or held back
        update(e, 'a\nb');
        await run(e, 200);
        update(e, 'a\nb\nc', true);
        await run(e, 400);
        assert.equal(e.shown, 'a\nb\nc');
    });

    test('a trigger the editor folded into nothing is repeated, at most twice', async () => {
        const e = editor();
        e.explicitShown = true; e.shown = '';  // an explicit fetch showed nothing: hide cannot clear it
        update(e, 'a\nb', true);
        await run(e, 400);
        assert.equal(e.asks, 0);
        assert.equal(e.r.fired, 3);
        assert.equal(e.r.repeated, 2);
    });

    test('a trigger that never settles counts as over after settleMs', async () => {
        let t = 0;
        const timers = [];
        const fired = [];
        const r = new Retrigger({
            intervalMs: 50, settleMs: 1000, newLinesOnly: true,
            cursor: () => ({ uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 } }),
            trigger: () => { fired.push(t); return new Promise(() => undefined); },
            now: () => t,
            setTimer: (fn, ms) => { const tm = { fn, at: t + ms, done: false }; timers.push(tm); return tm; },
            clearTimer: (tm) => { tm.done = true; },
        });
        const at = { uri: 'file:///a.py', version: 3, position: { line: 1, character: 4 }, requestId: 1, seq: 1 };
        r.onUpdate({ ...at, items: [{ insertText: 'a\nb' }], done: false });
        r.onUpdate({ ...at, items: [{ insertText: 'a\nb\nc' }], done: true });
        for (; t <= 1200; t += 10) {
            for (const tm of timers.filter((x) => !x.done && x.at <= t)) { tm.done = true; tm.fn(); }
        }
        assert.deepEqual(fired, [0, 1000]);
    });
});

describe('AcceptReports (shown and partial accepts, docs/editors.md)', () => {
    const item = (id, units = 40) => ({ insertText: 'x'.repeat(units), command: { title: '', command: 'sidecar.acceptCompletion', arguments: [id, units] } });
    const harness = (limit) => {
        const sent = [];
        const r = new AcceptReports({ shown: (id) => sent.push(['shown', id]), partial: (id, n) => sent.push(['partial', id, n]) }, limit);
        return { r, sent };
    };

    test('the id is the accept command\'s first argument; others are not ours', () => {
        assert.equal(acceptItemId(item('c7')), 'c7');
        assert.equal(acceptItemId({ command: { command: 'other.cmd', arguments: ['c7'] } }), undefined);
        assert.equal(acceptItemId({ command: { command: 'sidecar.acceptCompletion', arguments: [] } }), undefined);
        assert.equal(acceptItemId({ command: { command: 'sidecar.acceptCompletion', arguments: [3] } }), undefined);
        assert.equal(acceptItemId({}), undefined);
        assert.equal(acceptItemId(undefined), undefined);
    });

    test('the taken length from either form VS Code passes', () => {
        assert.equal(acceptedLengthOf(5), 5);
        assert.equal(acceptedLengthOf({ kind: 0, acceptedLength: 5 }), 5);
        for (const bad of [0, -1, 1.5, '5', null, undefined, {}, { acceptedLength: '5' }]) assert.equal(acceptedLengthOf(bad), undefined, JSON.stringify(bad));
    });

    test('shown once per item id', () => {
        const h = harness();
        const a = item('c1');
        assert.ok(h.r.shown(a));
        assert.ok(!h.r.shown(a));
        assert.ok(!h.r.shown(item('c1'))); // the same item re-wrapped by VS Code
        assert.ok(h.r.shown(item('u3.2')));
        assert.ok(!h.r.shown({ insertText: 'x' }));
        assert.deepEqual(h.sent, [['shown', 'c1'], ['shown', 'u3.2']]);
    });

    test('a partial accept reported twice (number, then PartialAcceptInfo) is sent once; the next word of the same item is sent', () => {
        const h = harness();
        const a = item('c1');
        h.r.partial(a, 5);
        h.r.partial(a, { kind: 0, acceptedLength: 5 });
        h.r.partial(a, 10);
        h.r.partial(a, { kind: 1, acceptedLength: 10 });
        h.r.partial(a, 7); // never less than already taken
        h.r.partial(item('c2'), { kind: 0, acceptedLength: 3 });
        h.r.partial(item('c3'), 0);
        assert.deepEqual(h.sent, [['partial', 'c1', 5], ['partial', 'c1', 10], ['partial', 'c2', 3]]);
    });

    test('remembers a bounded number of items', () => {
        const h = harness(2);
        h.r.shown(item('a'));
        h.r.shown(item('b'));
        h.r.shown(item('c'));
        h.r.shown(item('a')); // forgotten, so sent again (the server counts a suggestion once anyway)
        assert.deepEqual(h.sent.map((s) => s[1]), ['a', 'b', 'c', 'a']);
    });
});
