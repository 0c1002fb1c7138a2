// Drives a real VS Code (code-server) in Chromium with playwright-core and prints one JSON
// line with what it saw. Run by tests/e2e/test_editor_vscode_real.py and scripts/bench_vscode.py:
//
//   node drive.mjs CONFIG.json
//
// CONFIG: {url, playwright (dir whose node_modules has playwright-core), chromium, file
// (name to open with Quick Open), path (its path on disk), screens (dir for screenshots),
// expect (the full suggestion), scenario ("accept" | "partial" | "bench"), pauses,
// typeThrough, steps (scenario "partial": [{name, key, ghost, buffer}]: press key, then wait
// for that ghost text and buffer), afterGhost ({url, body}: POSTed once the whole suggestion
// shows, scenario "partial"), timeoutMs}.
// Ghost text is read from the DOM: the part on the cursor's line is `.ghost-text-decoration`
// (and `-preview`), the further lines a view zone `.ghost-text` of `.view-line`s.

import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const require = createRequire(path.join(cfg.playwright, 'package.json'));
const { chromium } = require('playwright-core');

const t0 = Date.now();
// t0: the driver's start (unix ms), so that the test can put what the editor showed beside
// the server's messages (devtools/lsptap.py); ghostLog: each change of the ghost text read.
const result = { t0, steps: [], shots: [], ghostLog: [] };
const now = () => Date.now() - t0;
const step = (name, extra = {}) => result.steps.push({ name, t: now(), ...extra });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let page;
let shotNo = 0;

async function shot(name) {
    if (!cfg.screens || !page) return;
    fs.mkdirSync(cfg.screens, { recursive: true });
    const file = path.join(cfg.screens, `${String(++shotNo).padStart(2, '0')}-${name}.png`);
    try {
        await page.screenshot({ path: file });
        result.shots.push(file);
    } catch (err) {
        result.shots.push(`${file}: ${err}`);
    }
}

/** {inline, lines}: the ghost text now (lines: the further lines, in order); a change from
 * the last read is added to result.ghostLog (at most 400 entries). */
async function readGhost() {
    const g = await readGhostNow();
    const text = ghostText(g);
    const log = result.ghostLog;
    if ((log.length === 0 || log[log.length - 1].ghost !== text) && log.length < 400) log.push({ t: now(), ghost: text });
    return g;
}

function readGhostNow() {
    return page.evaluate(() => {
        const norm = (s) => (s ?? '').replace(/\u00a0/g, ' ');
        const inline = [...document.querySelectorAll('.monaco-editor .view-lines .ghost-text-decoration, .monaco-editor .view-lines .ghost-text-decoration-preview')]
            .filter((e) => !e.parentElement?.closest('.ghost-text-decoration, .ghost-text-decoration-preview'))
            .map((e) => norm(e.textContent)).join('');
        // The further lines: a view zone whose lines hold `.ghost-text` token spans.
        const lineEls = [];
        for (const el of document.querySelectorAll('.monaco-editor .view-zones .ghost-text')) {
            const line = el.closest('.view-line') ?? el;
            if (!lineEls.includes(line)) lineEls.push(line);
        }
        const lines = lineEls.map((l) => norm(l.textContent));
        return { inline, lines };
    });
}

const ghostText = (g) => [g.inline, ...g.lines].join('\n');

async function waitFor(pred, timeoutMs, every = 20) {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
        last = await readGhost();
        if (pred(last)) return last;
        await sleep(every);
    }
    return undefined;
}

async function statusBarText() {
    return page.evaluate(() => [...document.querySelectorAll('.statusbar-item')]
        .map((e) => (e.textContent || e.getAttribute('aria-label') || '').trim())
        .filter(Boolean));
}

async function editorText() {
    return page.evaluate(() => [...document.querySelectorAll('.monaco-editor .view-lines .view-line')]
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((e) => e.textContent.replace(/\u00a0/g, ' ')).join('\n'));
}

/** The buffer as the editor shows it: its lines in order, without ghost text. */
async function bufferText() {
    return page.evaluate(() => [...document.querySelectorAll('.monaco-editor .view-lines .view-line')]
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((e) => {
            const line = e.cloneNode(true);
            for (const g of line.querySelectorAll('.ghost-text-decoration, .ghost-text-decoration-preview, .ghost-text')) g.remove();
            return line.textContent.replace(/\u00a0/g, ' ');
        }).join('\n'));
}

async function openFile() {
    // Quick Open can take the Enter before its results are in; wait for the row, and try
    // again if no editor opened.
    for (let attempt = 0; ; attempt++) {
        await page.keyboard.press('Control+P');
        await page.waitForSelector('.quick-input-widget input', { state: 'visible', timeout: 15000 });
        await page.keyboard.type(cfg.file);
        await page.waitForSelector('.quick-input-list .monaco-list-row', { state: 'visible', timeout: 15000 });
        await sleep(300);
        await page.keyboard.press('Enter');
        try {
            await page.waitForSelector('.monaco-editor textarea', { timeout: attempt < 2 ? 5000 : 15000 });
            break;
        } catch (err) {
            if (attempt >= 2) throw err;
            await page.keyboard.press('Escape');
        }
    }
    await sleep(300);
}

async function runCommand(title) {
    await page.keyboard.press('F1');
    await page.waitForSelector('.quick-input-widget input', { state: 'visible', timeout: 10000 });
    await page.keyboard.type(title);
    await sleep(400);
    await page.keyboard.press('Enter');
}

/** Move to the empty line 2 (line 1 is the `def`). */
async function toLine2() {
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('End');
}

async function waitForSidecar() {
    // The status bar shows the mode and model once the server has answered.
    const end = Date.now() + 30000;
    while (Date.now() < end) {
        const items = await statusBarText();
        const item = items.find((s) => /cloud|local|auto/.test(s) && /·/.test(s));
        if (item) return item;
        await sleep(200);
    }
    return undefined;
}

async function scenarioAccept() {
    const expect = cfg.expect.split('\n');
    await toLine2();
    await page.keyboard.type('    ');
    step('typed');
    const first = await waitFor((g) => ghostText(g).trim() !== '', 10000);
    if (!first) throw new Error('no ghost text appeared within 10 s of typing');
    step('first-ghost', { ghost: ghostText(first) });
    await shot('ghost-appears');

    // Grows to every line while the stream runs.
    const seen = [];
    const full = await waitFor((g) => {
        // Each change of the shown text: lines (0 when nothing is shown) and characters.
        const text = ghostText(g);
        const n = text.trim() === '' ? 0 : 1 + g.lines.length;
        if (!seen.length || seen[seen.length - 1].chars !== text.length || seen[seen.length - 1].n !== n) {
            seen.push({ n, chars: text.length, t: now() });
        }
        return ghostText(g) === cfg.expect;
    }, 10000);
    result.growth = seen;
    if (!full) {
        result.lastGhost = await readGhost();
        await shot('ghost-incomplete');
        throw new Error(`the ghost text did not grow to all ${expect.length} lines: ${JSON.stringify(result.lastGhost)}`);
    }
    step('full-ghost', { ghost: ghostText(full) });
    await shot('ghost-complete');

    // Type through the start of the suggestion: the rest stays.
    const typed = cfg.typeThrough ?? 'tot';
    await page.keyboard.type(typed, { delay: 60 });
    const rest = cfg.expect.slice(typed.length);
    const kept = await waitFor((g) => ghostText(g) === rest, 3000);
    result.afterTypeThrough = kept ? ghostText(kept) : ghostText(await readGhost());
    step('typed-through', { kept: !!kept });
    await shot('typed-through');

    await page.keyboard.press('Tab');
    await sleep(500);
    result.afterTab = { ghost: ghostText(await readGhost()), editor: await editorText() };
    step('accepted');
    await shot('accepted');
    await page.keyboard.press('Control+S');
    await sleep(800);
    result.fileText = fs.readFileSync(cfg.path, 'utf8');
    step('saved');

    result.statusBar = await waitForSidecar();
    await runCommand('sidecar: Show Stats');
    await sleep(1500);
    await shot('stats');
    step('stats');
}

async function scenarioPartial() {
    // Take a streamed suggestion piece by piece with VS Code's own commands (Accept Word,
    // Accept Line, then Tab for the rest); after each key, wait for the ghost text and the
    // buffer the test expects, and record what was seen.
    await toLine2();
    await page.keyboard.type('    ');
    step('typed');
    const full = await waitFor((g) => ghostText(g) === cfg.expect, 15000);
    if (!full) {
        result.lastGhost = await readGhost();
        await shot('ghost-incomplete');
        throw new Error(`the ghost text did not grow to the whole suggestion: ${JSON.stringify(result.lastGhost)}`);
    }
    step('full-ghost', { ghost: ghostText(full) });
    await shot('ghost-complete');
    if (cfg.afterGhost) {
        // e.g. script the simulator so that nothing more is suggested after this one
        const r = await fetch(cfg.afterGhost.url, { method: 'POST', body: JSON.stringify(cfg.afterGhost.body) });
        if (!r.ok) throw new Error(`POST ${cfg.afterGhost.url}: HTTP ${r.status}`);
    }
    result.partial = [];
    for (const s of cfg.steps) {
        step(`press ${s.key}`);
        await page.keyboard.press(s.key);
        const end = Date.now() + 5000;
        let seen;
        for (;;) {
            seen = { name: s.name, ghost: ghostText(await readGhost()), buffer: await bufferText() };
            if ((seen.ghost === s.ghost && seen.buffer === s.buffer) || Date.now() > end) break;
            await sleep(30);
        }
        seen.t = now();
        result.partial.push(seen);
        step(s.name, { ok: seen.ghost === s.ghost && seen.buffer === s.buffer });
        await shot(s.name);
        if (seen.ghost !== s.ghost || seen.buffer !== s.buffer) throw new Error(`after ${s.name} (${s.key}): ${JSON.stringify(seen)}`);
        // A user's pause: VS Code asks again after the edit and shows the server's answer
        // (the rest, as a new item) before the next key.
        await sleep(1000);
    }
    await page.keyboard.press('Control+S');
    await sleep(800);
    result.fileText = fs.readFileSync(cfg.path, 'utf8');
    step('saved');
    result.statusBar = await waitForSidecar();
    await runCommand('sidecar: Show Stats');
    await sleep(1500);
    await shot('stats');
    step('stats');
}

async function scenarioBench() {
    // For each pause: on a fresh line at the end, type a comment line and an indent, then
    // time (from the last keystroke) until ghost text first shows and until it shows the
    // whole multi-line suggestion. The DOM is polled every few ms.
    result.samples = [];
    const pauses = cfg.pauses ?? 20;
    for (let i = 0; i < pauses; i++) {
        await page.keyboard.press('Escape');
        await page.keyboard.press('Control+End');
        await sleep(200);
        await page.keyboard.type(`\n# pause ${i}\n    `);
        const tk = Date.now();
        const first = await waitFor((g) => ghostText(g).trim() !== '', 10000, 2);
        const tf = Date.now();
        // blanks: polls between the first and the complete ghost text that showed none (the
        // suggestion hidden and shown again while it grows).
        let blanks = 0, shown = true;
        const full = first && await waitFor((g) => {
            const now = ghostText(g).trim() !== '';
            if (shown && !now) blanks++;
            shown = now;
            return ghostText(g) === cfg.expect;
        }, 10000, 2);
        const tc = Date.now();
        result.samples.push({ first_ms: first ? tf - tk : null, complete_ms: full ? tc - tk : null,
            first_lines: first ? 1 + first.lines.length : 0, blanks });
        if (i === 0 || i === pauses - 1) await shot(`bench-${i}`);
        await page.keyboard.press('Escape');
        await sleep(cfg.gapMs ?? 600);
    }
}

let browser;
try {
    browser = await chromium.launch({
        executablePath: cfg.chromium,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    const context = await browser.newContext({ viewport: { width: 1400, height: 850 } });
    page = await context.newPage();
    page.on('pageerror', (e) => result.pageErrors = [...(result.pageErrors ?? []), String(e)].slice(-10));
    await page.goto(cfg.url, { timeout: 60000 });
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    await page.waitForSelector('.statusbar', { timeout: 60000 });
    step('workbench');
    await sleep(1500);
    await openFile();
    step('opened');
    result.statusBarAtStart = await waitForSidecar();
    step('sidecar-status', { text: result.statusBarAtStart });
    await shot('opened');
    if (cfg.scenario === 'bench') await scenarioBench();
    else if (cfg.scenario === 'partial') await scenarioPartial();
    else await scenarioAccept();
} catch (err) {
    result.error = String(err && err.stack || err);
    try {
        result.lastGhost ??= await readGhost();
        result.statusBarItems = await statusBarText();
        await shot('error');
    } catch { /* the page may be gone */ }
} finally {
    result.ms = now();
    await browser?.close().catch(() => undefined);
    process.stdout.write(JSON.stringify(result) + '\n');
}
