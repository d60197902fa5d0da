// The web page of a real `kvserve serve` (stories260K, API key set) in Debian's Chromium, headless,
// driven by playwright-core: chat with streamed replies, stop, cached prompt tokens on the second
// turn, the live KV map (blocks in use while a reply runs, cached-free after, shared blocks
// between two conversations), the key check, model text shown as text, and the map's numbers
// against /metrics. Screenshots go to WEBUI_ARTIFACTS (default build/webui-artifacts).
//
//   node --test tests/webui/webui.test.mjs   (scripts/webui-test.sh installs what it needs)
//
// Environment: KVSERVE_BINARY (build/kvserve), KVSERVE_MODEL (../shared/models/stories260K.gguf),
// CHROMIUM (/usr/bin/chromium). Playwright gives each launch a fresh temporary --user-data-dir and
// each test its own browser context (own localStorage). Only 127.0.0.1 is contacted.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const binary = process.env.KVSERVE_BINARY ?? path.join(root, 'build/kvserve');
const modelPath = process.env.KVSERVE_MODEL ?? path.join(root, '../shared/models/stories260K.gguf');
const artifacts = process.env.WEBUI_ARTIFACTS ?? path.join(root, 'build/webui-artifacts');
const key = 'sk-webui-test-key';
const wait = { timeout: 30_000 };

// 80 tokens or so: several full 16-token blocks to reuse or share. Each test starts it with its
// own word, so that no two tests share blocks.
const system = (tag) => `${tag}. ${SYSTEM}`;
const SYSTEM = 'You are a storyteller. You tell short, happy stories for children about a ' +
  'little girl named Lily, her brother Tom, their dog Max and the big green park near their ' +
  'house, where they play with a red ball, look at the birds in the tall trees and eat ' +
  'sandwiches on a blanket in the sun.';

let server;
let baseUrl;
let browser;

function startServer() {
  // Context 8192 so that a reply can run long enough to be stopped; 20 MiB of KV = 1024 blocks.
  const args = ['serve', '-m', modelPath, '--host', '127.0.0.1', '--port', '0', '-t', '1',
                '-c', '8192', '--kv-memory', '20MiB', '--block-size', '16', '--api-key', key];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kvserve serve did not start:\n${log}`)), 60_000);
    child.stderr.on('data', (data) => {
      log += data;
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (url && log.includes('ready:')) {
        clearTimeout(timer);
        resolve({ child, url: url[1], log: () => log });
      }
    });
    child.on('exit', (code) => reject(new Error(`kvserve serve exited ${code}:\n${log}`)));
  });
}

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  server = await startServer();
  process.on('exit', () => server.child.kill('SIGKILL'));
  baseUrl = server.url;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  server?.child.kill('SIGTERM');
});

async function apiJson(pathname, options = {}) {
  const response = await fetch(baseUrl + pathname, {
    ...options,
    headers: { Authorization: `Bearer ${key}`, ...(options.headers ?? {}) },
  });
  return { status: response.status, body: await response.json() };
}

async function metrics() {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const value = (name, fallback) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (!line && fallback !== undefined) return fallback;
    assert.ok(line, `no ${name} in /metrics`);
    return Number(line.slice(name.length + 1));
  };
  return {
    used: value('kvserve:kv_cache_blocks{state="used"}'),
    cached: value('kvserve:kv_cache_blocks{state="cached"}'),
    free: value('kvserve:kv_cache_blocks{state="free"}'),
    running: value('kvserve:num_requests_running'),
    waiting: value('kvserve:num_requests_waiting'),
    sessions: value('kvserve:num_sessions'),
    preemptions: value('kvserve:num_preemptions_total'),
    queries: value('kvserve:prefix_cache_queries_total'),
    hits: value('kvserve:prefix_cache_hits_total'),
    generated: value('kvserve:generation_tokens_total'),
    aborted: value('kvserve:request_success_total{finished_reason="abort"}', 0),
  };
}

// Waits until `check` (async, returns true when done) holds; fails with `what` after 30 s.
async function eventually(what, check) {
  const deadline = Date.now() + 30_000;
  let last;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

// Waits for the page's first map snapshot and its model name.
async function mapShown(page) {
  await page.waitForSelector('#connection[data-state="live"]', wait);
  await page.waitForFunction(() => document.querySelector('#stat-free').dataset.value !== '' &&
    document.querySelector('#model-name').textContent !== '', null, wait);
}

// A fresh context and page, signed in with the key; fails on any script error of the page.
async function openPage(t, viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport });
  t.after(() => context.close());
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  t.after(() => assert.deepEqual(errors, [], 'the page threw'));
  await page.goto(`${baseUrl}/`);
  await page.waitForSelector('#key-dialog[open]', wait);
  await page.fill('#key-input', key);
  await page.click('#key-ok');
  await mapShown(page);
  return page;
}

async function setSettings(page, { system, temperature, maxTokens, seed, pin }) {
  if (!(await page.isVisible('#system-prompt'))) await page.click('#settings summary');
  if (system !== undefined) await page.fill('#system-prompt', system);
  if (temperature !== undefined) await page.fill('#temperature', String(temperature));
  if (maxTokens !== undefined) await page.fill('#max-tokens', String(maxTokens));
  if (seed !== undefined) await page.fill('#seed', String(seed));
  if (pin !== undefined) await page.setChecked('#pin-session', pin);
}

// Sends `text` and waits for the reply to finish; returns the reply's element's data.
async function sendAndWait(page, text) {
  const before = await page.$$eval('.message.assistant', (nodes) => nodes.length);
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  await page.waitForFunction(
    (n) => document.querySelectorAll('.message.assistant[data-pending="false"]').length > n,
    before, wait);
  return page.$eval('.message.assistant:last-of-type', (node) => ({
    text: node.querySelector('.bubble').textContent,
    ...node.querySelector('.meta').dataset,
    meta: node.querySelector('.meta').textContent,
  }));
}

const stat = (page, name) => page.$eval(`#stat-${name}`, (dd) => Number(dd.dataset.value));

test('the page is open, the API behind it refuses without the key and works with it', async (t) => {
  const page = await (await browser.newContext()).newPage();
  t.after(() => page.context().close());
  const response = await page.goto(`${baseUrl}/`);
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-security-policy'], /script-src 'self'/);
  await page.waitForSelector('#key-dialog[open]', wait);
  // Without a key: the API and the map answer 401 and the page shows no map.
  const statuses = await page.evaluate(async () => Promise.all(
    ['/v1/models', '/v1/kv-map', '/v1/kv-map/stream'].map(async (p) => (await fetch(p)).status)));
  assert.deepEqual(statuses, [401, 401, 401]);
  assert.equal(await page.$eval('#stat-used', (dd) => dd.dataset.value), '');
  // A wrong key is refused and asked for again.
  await page.fill('#key-input', 'sk-wrong');
  await page.click('#key-ok');
  await page.waitForFunction(() => document.querySelector('#key-dialog').open &&
    /invalid API key/.test(document.querySelector('#key-message').textContent), null, wait);
  await page.fill('#key-input', key);
  await page.click('#key-ok');
  await mapShown(page);
  assert.match(await page.textContent('#model-name'), /stories260K/);
  assert.equal(await stat(page, 'free') + await stat(page, 'used') + await stat(page, 'cached'), 1024);
});

test('a message gets a streamed reply, the same text as the API gives without streaming', async (t) => {
  const page = await openPage(t);
  await setSettings(page, { temperature: 0, maxTokens: 48, pin: false });
  const reply = await sendAndWait(page, 'Once upon a time');
  assert.ok(reply.text.length > 0);
  assert.equal(Number(reply.completionTokens), 48);
  assert.ok(Number(reply.deltas) > 1, `the reply came in ${reply.deltas} pieces`);
  assert.match(reply.meta, /tokens\/s/);
  const whole = await apiJson('/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }],
                           temperature: 0, top_p: 0.95, max_tokens: 48 }),
  });
  assert.equal(whole.status, 200);
  // The bubble renders Markdown; compare the text without the line structure.
  const squash = (s) => s.replace(/\s+/g, '');
  assert.equal(squash(reply.text), squash(whole.body.choices[0].message.content));
});

test('a second turn shows cached prompt tokens', async (t) => {
  const page = await openPage(t);
  await setSettings(page, { system: system('Turns'), temperature: 0, maxTokens: 24, pin: true });
  const first = await sendAndWait(page, 'Tell me a story about the park.');
  const second = await sendAndWait(page, 'What did Max do next?');
  assert.ok(Number(second.promptTokens) > Number(first.promptTokens));
  assert.ok(Number(second.cachedTokens) >= 64,
            `second turn: ${second.cachedTokens} of ${second.promptTokens} prompt tokens cached`);
  assert.match(second.meta, new RegExp(`\\(${second.cachedTokens} cached\\)`));
  await page.waitForTimeout(400);  // one more map update, for the picture
  await page.screenshot({ path: path.join(artifacts, 'chat.png') });
});

test('stop ends a long reply; the map shows its blocks in use while it runs, cached-free after',
     async (t) => {
  const page = await openPage(t);
  await setSettings(page, { system: system('Stop'), temperature: 0.8, maxTokens: 6000, pin: false });
  // The model would end its story early: ask the server to keep going (the request is the
  // page's own, with ignore_eos added).
  await page.route('**/v1/chat/completions', (route) => {
    const body = JSON.parse(route.request().postData());
    route.continue({ postData: JSON.stringify({ ...body, ignore_eos: true }) });
  });
  const { generated: generatedBefore, aborted: abortedBefore } = await metrics();
  await page.fill('#input', 'Tell me the longest story you know.');
  await page.press('#input', 'Enter');
  await page.waitForSelector('#stop:not([hidden])', wait);
  // While it runs: blocks in use, owned by this conversation's request.
  // (Run in the page: the ids of the blocks its running request holds, once there are 8.)
  const ownBlocks = () => {
    const m = window.kvserveUi.map.map;
    if (!m) return false;
    const owner = m.owners.findIndex((o) => o.kind === 'request' && o.mine);
    const ids = m.blocks.flatMap((b, id) => (b && b.uses.some((u) => u.owner === owner) ? [id] : []));
    return owner >= 0 && ids.length >= 8 && ids;
  };
  const held = await (await page.waitForFunction(ownBlocks, null, wait)).jsonValue();
  assert.ok(await stat(page, 'used') >= held.length);
  await page.screenshot({ path: path.join(artifacts, 'map-generating.png') });
  await page.click('#stop');
  await page.waitForSelector('#send:not([hidden])', wait);
  const reply = await page.$eval('.message.assistant:last-of-type', (node) => ({
    finish: node.querySelector('.meta').dataset.finish, text: node.querySelector('.bubble').textContent,
  }));
  assert.equal(reply.finish, 'stopped');
  assert.ok(reply.text.length > 0);
  // The server let go of it: nothing running, its blocks cached-free (all but a partial last
  // one, which has no key and is simply free), far fewer than 6000 tokens made.
  await eventually('the map to show the request gone', async () =>
    (await stat(page, 'running')) === 0 &&
    (await page.evaluate(() => window.kvserveUi.map.map.owners.every((o) => o.kind !== 'request'))));
  const states = await page.evaluate((ids) => {
    const m = window.kvserveUi.map.map;
    return ids.map((id) => (m.blocks[id] === null ? 'free' : m.blocks[id].refs > 0 ? 'used' : 'cached'));
  }, held);
  assert.ok(!states.includes('used'), states.join(' '));
  assert.ok(states.filter((s) => s === 'cached').length >= held.length - 1, states.join(' '));
  const m = await metrics();
  assert.equal(m.running, 0);
  assert.ok(m.generated - generatedBefore < 6000, `${m.generated - generatedBefore} tokens generated`);
  assert.equal(m.aborted, abortedBefore + 1, 'the server counts the request as aborted');
});

test('two conversations with the same long system prompt share blocks', async (t) => {
  const page = await openPage(t);
  await setSettings(page, { system: system('Shared'), temperature: 0, maxTokens: 16, pin: true });
  await sendAndWait(page, 'Hello!');
  await page.click('#new-chat');
  await setSettings(page, { system: system('Shared'), temperature: 0, maxTokens: 16, pin: true });
  const second = await sendAndWait(page, 'Good morning!');
  assert.ok(Number(second.cachedTokens) >= 64, `${second.cachedTokens} cached`);
  // Both sessions pin the system prompt's blocks: the map marks them shared by 2.
  const sessions = await page.evaluate(() =>
    JSON.parse(localStorage.getItem('kvserve.conversations')).map((c) => c.session));
  // (Run in the page: the blocks both sessions hold, once there are 4.)
  const sharedByBoth = (mine) => {
    const m = window.kvserveUi.map.map;
    if (!m) return false;
    const found = m.blocks.flatMap((b, id) => {
      if (!b) return [];
      const owners = new Set(b.uses.map((u) => m.owners[u.owner].session));
      return mine.every((s) => owners.has(s))
        ? [{ id, refs: b.refs, uses: b.uses.length, logical: b.uses[0].logical }] : [];
    });
    return found.length >= 4 && found;
  };
  const shared = await (await page.waitForFunction(sharedByBoth, sessions, wait)).jsonValue();
  for (const b of shared) assert.deepEqual([b.refs, b.uses], [2, 2], JSON.stringify(b));
  assert.ok(await stat(page, 'shared') >= shared.length);
  // Hovering the cell names both conversations and the positions.
  const { x, y } = await page.evaluate((id) => {
    const { size, gap, cols } = window.kvserveUi.map.geometry;
    const r = document.querySelector('#kvmap').getBoundingClientRect();
    return { x: r.left + (id % cols) * (size + gap) + size / 2, y: r.top + Math.floor(id / cols) * (size + gap) + size / 2 };
  }, shared.find((b) => b.logical === 0).id);
  await page.mouse.move(x, y);
  await page.waitForSelector('#map-tooltip:not([hidden])', wait);
  const tip = await page.textContent('#map-tooltip');
  assert.match(tip, /in use, 2 references/);
  assert.match(tip, /“Hello!”, pinned: positions 0–15/);
  assert.match(tip, /“Good morning!”, pinned: positions 0–15/);
  await page.locator('#map-view').screenshot({ path: path.join(artifacts, 'map.png') });
});

test('model output with <script> and other HTML is shown as text', async (t) => {
  const page = await openPage(t);
  const hostile = 'Here: <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">' +
    '\n\n**bold** and `<b>code</b>` and [link](javascript:window.__pwned=3)\n\n```html\n<script>alert(1)</script>\n```';
  // Through the renderer the streamed replies use.
  await page.evaluate((text) => window.kvserveUi.showAssistantText(text), hostile);
  // And typed by the user, then sent (the model's reply goes through the renderer as well).
  await setSettings(page, { maxTokens: 8, pin: false });
  await sendAndWait(page, '<img src=x onerror="window.__pwned = 4"><script>window.__pwned = 5</script>');
  const seen = await page.evaluate(() => {
    const box = document.querySelector('#messages');
    return {
      pwned: window.__pwned,
      elements: box.querySelectorAll('script, img, iframe, [onerror]').length,
      javascriptLinks: [...box.querySelectorAll('a')].filter((a) => !/^https?:|^mailto:/.test(a.href)).length,
      text: box.textContent,
      strong: box.querySelector('.message.assistant strong')?.textContent,
      code: [...box.querySelectorAll('.message.assistant code')].map((c) => c.textContent),
    };
  });
  assert.equal(seen.pwned, undefined);
  assert.equal(seen.elements, 0);
  assert.equal(seen.javascriptLinks, 0);
  assert.ok(seen.text.includes('<script>window.__pwned = 1</script>'));
  assert.ok(seen.text.includes('<img src=x onerror="window.__pwned = 4">'));
  assert.equal(seen.strong, 'bold');
  assert.deepEqual(seen.code, ['<b>code</b>', '<script>alert(1)</script>']);
});

test('Markdown: lists, headings, code, quotes and only safe links', async (t) => {
  const page = await openPage(t);
  const html = await page.evaluate(() => {
    const box = document.createElement('div');
    box.append(window.kvserveUi.renderMarkdown([
      '# Title', '', 'Some *em* and **strong** and ~~old~~ and `x < y`.', 'Second line.', '',
      '- one', '- two [site](https://example.org/a?b=1)', '', '3. three', '4. four', '',
      '> quoted', '', '```js', 'if (a < b) { run("<b>"); }', '```', '', '---',
      '[bad](javascript:alert(1)) [data](data:text/html,x) snake_case_name',
    ].join('\n')));
    return box.innerHTML;
  });
  assert.equal(html, [
    '<h3>Title</h3>',
    '<p>Some <em>em</em> and <strong>strong</strong> and <del>old</del> and <code>x &lt; y</code>.<br>Second line.</p>',
    '<ul><li>one</li><li>two <a href="https://example.org/a?b=1" target="_blank" rel="noopener noreferrer nofollow">site</a></li></ul>',
    '<ol start="3"><li>three</li><li>four</li></ol>',
    '<blockquote><p>quoted</p></blockquote>',
    '<pre><code class="language-js">if (a &lt; b) { run("&lt;b&gt;"); }</code></pre>',
    '<hr>',
    '<p>[bad](javascript:alert(1)) [data](data:text/html,x) snake_case_name</p>',
  ].join(''));
});

test("the map's numbers agree with /metrics", async (t) => {
  const page = await openPage(t);
  await setSettings(page, { system: system('Metrics'), temperature: 0, maxTokens: 16, pin: true });
  await sendAndWait(page, 'Once upon a time');
  // The engine is idle now: the map's next snapshot and /metrics see the same pool.
  await eventually('the map to match /metrics', async () => {
    const m = await metrics();
    const page_ = {
      used: await stat(page, 'used'), cached: await stat(page, 'cached'), free: await stat(page, 'free'),
      running: await stat(page, 'running'), waiting: await stat(page, 'waiting'),
      sessions: await stat(page, 'sessions'), preemptions: await stat(page, 'preemptions'),
      hitRate: await stat(page, 'hit-rate'),
    };
    assert.deepEqual(page_, {
      used: m.used, cached: m.cached, free: m.free, running: m.running, waiting: m.waiting,
      sessions: m.sessions, preemptions: m.preemptions, hitRate: m.queries ? m.hits / m.queries : 0,
    });
    return true;
  });
  assert.ok(await stat(page, 'sessions') >= 1);
  assert.ok(await stat(page, 'used') >= 1);
  const utilisation = await page.textContent('#stat-utilisation');
  assert.equal(utilisation, `${((100 * (await stat(page, 'used'))) / 1024).toFixed(1)}%`);
});

test('on a phone-sized screen the tabs switch between chat and map, in the dark theme too',
     async (t) => {
  const page = await openPage(t, { width: 390, height: 844 });
  assert.ok(await page.isVisible('#chat-view'));
  assert.ok(!(await page.isVisible('#map-view')));
  await page.click('#theme-toggle');  // auto -> light
  await page.click('#theme-toggle');  // light -> dark
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
  await page.click('.tabs button[data-view="map"]');
  assert.ok(await page.isVisible('#map-view'));
  assert.ok(!(await page.isVisible('#chat-view')));
  const width = await page.$eval('#kvmap', (c) => c.getBoundingClientRect().width);
  assert.ok(width > 300 && width <= 390, `map ${width}px wide`);
  await page.screenshot({ path: path.join(artifacts, 'phone-map-dark.png') });
  await page.click('.tabs button[data-view="chat"]');
  assert.ok(await page.isVisible('#composer'));
  await page.screenshot({ path: path.join(artifacts, 'phone-chat-dark.png') });
});
