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
        h.advance(100);
        h.r.onUpdate(upd('x = 1\ny = 2\nz', { done: true }));
        h.advance(100);
        assert.equal(h.triggers.length, 1);
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
