// kvserve's web page: conversations with streamed replies (the OpenAI chat API), kept in this
// browser, and the live KV block map. Talks only to the server it came from; sends the API key
// as a bearer token when the server wants one.
import { renderMarkdown } from './markdown.js';
import { KvMapView } from './kvmap.js';

const $ = (id) => document.getElementById(id);

const storage = {
  get(key, fallback) {
    try {
      const text = localStorage.getItem(key);
      return text === null ? fallback : JSON.parse(text);
    } catch {
      return fallback;
    }
  },
  set(key, value) {
    try {
      localStorage.setItem(key, JSON.stringify(value));
    } catch {
      // full or disabled: the page still works for this visit
    }
  },
};

function randomId(prefix) {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- API key --------------------------------------------------------------------------------

let apiKey = sessionStorage.getItem('kvserve.apiKey') ?? storage.get('kvserve.apiKey', '');
let keyPrompt = null;  // the open dialog's promise, shared by every caller that got a 401
let keyWaiters = [];

function askKey(message) {
  if (keyPrompt) return keyPrompt;
  const dialog = $('key-dialog');
  const text = $('key-message');
  text.textContent = message;
  text.dataset.error = apiKey ? 'true' : 'false';
  $('key-input').value = '';
  $('key-remember').checked = storage.get('kvserve.apiKey', '') !== '';
  keyPrompt = new Promise((resolve) => {
    const finish = (ok) => {
      $('key-form').removeEventListener('submit', onSubmit);
      $('key-cancel').removeEventListener('click', onCancel);
      dialog.removeEventListener('close', onCancel);
      if (dialog.open) dialog.close();
      keyPrompt = null;
      resolve(ok);
    };
    const onSubmit = (event) => {
      event.preventDefault();
      setKey($('key-input').value.trim(), $('key-remember').checked);
      finish(true);
    };
    const onCancel = () => finish(false);  // the Cancel button, or Escape
    $('key-form').addEventListener('submit', onSubmit);
    $('key-cancel').addEventListener('click', onCancel);
    dialog.addEventListener('close', onCancel);
    dialog.showModal();
    $('key-input').focus();
  });
  return keyPrompt;
}

function setKey(key, remember) {
  apiKey = key;
  sessionStorage.setItem('kvserve.apiKey', key);
  storage.set('kvserve.apiKey', remember ? key : '');
  for (const wake of keyWaiters) wake();
  keyWaiters = [];
}

const keyChanged = () => new Promise((resolve) => keyWaiters.push(resolve));

// fetch() with the key; on 401 asks for a key and tries again (until the dialog is cancelled).
async function api(path, options = {}) {
  for (;;) {
    const headers = { ...(options.headers ?? {}) };
    if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401) return response;
    const body = await response.json().catch(() => ({}));
    const reason = body?.error?.message ?? 'unauthorized';
    const ok = await askKey(`This server needs an API key (${reason}).`);
    if (!ok) return response;
  }
}

async function errorText(response) {
  const body = await response.json().catch(() => null);
  return body?.error?.message ?? `HTTP ${response.status}`;
}

// Server-Sent Events from a fetch() response: yields {event, data}.
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line === '' || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? '' : line.slice(colon + 1);
        if (text.startsWith(' ')) text = text.slice(1);
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
      }
      if (data.length) yield { event, data: data.join('\n') };
    }
  }
}

// ---- conversations --------------------------------------------------------------------------

const DEFAULTS = { temperature: 0.8, top_p: 0.95, max_tokens: 256, seed: '', pin: true };

let conversations = storage.get('kvserve.conversations', []);
if (!Array.isArray(conversations)) conversations = [];
let currentId = storage.get('kvserve.current', null);
let model = null;  // /v1/models entry
let generating = null;  // {conversation, controller} while a reply streams

function newConversation() {
  const c = {
    id: randomId('c'),
    session: randomId('s'),
    title: 'New chat',
    system: '',
    settings: { ...DEFAULTS },
    messages: [],
    updated: Date.now(),
  };
  conversations.unshift(c);
  return c;
}

function current() {
  let c = conversations.find((x) => x.id === currentId);
  if (!c) {
    c = conversations[0] ?? newConversation();
    currentId = c.id;
  }
  return c;
}

function save() {
  // A reply still streaming is saved as it stands; the flag is not.
  storage.set('kvserve.conversations', conversations.map((c) => ({
    ...c, messages: c.messages.map(({ pending, ...m }) => m),
  })));
  storage.set('kvserve.current', currentId);
}

function renderConversationList() {
  const list = $('conversations');
  list.replaceChildren();
  for (const c of conversations) {
    const li = document.createElement('li');
    li.dataset.id = c.id;
    if (c.id === currentId) li.setAttribute('aria-current', 'true');
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = c.title;
    title.title = c.title;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'delete';
    remove.setAttribute('aria-label', `Delete ${c.title}`);
    remove.textContent = '×';
    remove.addEventListener('click', (event) => {
      event.stopPropagation();
      deleteConversation(c);
    });
    li.append(title, remove);
    li.addEventListener('click', () => selectConversation(c.id));
    list.append(li);
  }
}

async function deleteConversation(c) {
  if (generating?.conversation === c) generating.controller.abort();
  conversations = conversations.filter((x) => x !== c);
  if (currentId === c.id) currentId = null;
  save();
  renderAll();
  // Its pinned blocks go back to the cache now rather than at the session's TTL.
  await api(`/v1/sessions/${encodeURIComponent(c.session)}`, { method: 'DELETE' }).catch(() => {});
}

function selectConversation(id) {
  currentId = id;
  save();
  renderAll();
  $('sidebar').classList.remove('open');
}

// ---- messages -------------------------------------------------------------------------------

const messageNodes = new WeakMap();

function formatMeta(m) {
  const parts = [];
  if (m.usage) {
    parts.push(`prompt ${m.usage.prompt_tokens} tokens (${m.usage.cached_tokens} cached)`);
    parts.push(`${m.usage.completion_tokens} generated`);
  }
  if (m.timing) {
    if (typeof m.timing.first_ms === 'number') parts.push(`first token ${m.timing.first_ms.toFixed(0)} ms`);
    if (typeof m.timing.total_ms === 'number' && m.usage) {
      parts.push(`${m.timing.total_ms.toFixed(0)} ms in all`);
      if (m.timing.tokens_per_s) parts.push(`${m.timing.tokens_per_s.toFixed(0)} tokens/s`);
    }
  }
  if (m.stopped) parts.push('stopped');
  else if (m.finish === 'length') parts.push('cut at max tokens');
  return parts.join(' · ');
}

// Builds or refreshes a message's element. Model text goes through renderMarkdown only (DOM
// nodes, no HTML parsing); user text is shown as typed.
function renderMessage(m) {
  let node = messageNodes.get(m);
  if (!node) {
    node = document.createElement('div');
    const bubble = document.createElement('div');
    bubble.className = 'bubble';
    const meta = document.createElement('div');
    meta.className = 'meta';
    node.append(bubble, meta);
    messageNodes.set(m, node);
  }
  node.className = `message ${m.role}${m.error ? ' error' : ''}`;
  const [bubble, meta] = node.children;
  if (m.error) {
    bubble.textContent = m.error;
  } else if (m.role === 'assistant') {
    bubble.replaceChildren(renderMarkdown(m.content));
    bubble.classList.toggle('typing', !!m.pending);
  } else {
    const p = document.createElement('p');
    p.textContent = m.content;
    bubble.replaceChildren(p);
  }
  meta.textContent = m.role === 'assistant' ? formatMeta(m) : '';
  const dataset = meta.dataset;
  dataset.promptTokens = m.usage?.prompt_tokens ?? '';
  dataset.cachedTokens = m.usage?.cached_tokens ?? '';
  dataset.completionTokens = m.usage?.completion_tokens ?? '';
  dataset.deltas = m.deltas ?? '';
  dataset.finish = m.stopped ? 'stopped' : (m.finish ?? '');
  node.dataset.pending = m.pending ? 'true' : 'false';
  return node;
}

function renderMessages() {
  const c = current();
  const box = $('messages');
  if (c.messages.length === 0) {
    const empty = document.createElement('p');
    empty.className = 'empty';
    empty.textContent = model
      ? `Chat with ${model.id}. Each conversation keeps its KV blocks as a session, so the next turn computes only what is new; watch the map.`
      : 'Connecting…';
    box.replaceChildren(empty);
    return;
  }
  box.replaceChildren(...c.messages.map(renderMessage));
  box.scrollTop = box.scrollHeight;
}

function renderSettings() {
  const c = current();
  $('system-prompt').value = c.system;
  $('temperature').value = c.settings.temperature;
  $('top-p').value = c.settings.top_p;
  $('max-tokens').value = c.settings.max_tokens;
  $('seed').value = c.settings.seed;
  $('pin-session').checked = c.settings.pin;
}

function renderComposer() {
  const busy = !!generating;
  $('send').hidden = busy;
  $('stop').hidden = !busy;
}

function renderAll() {
  renderConversationList();
  renderSettings();
  renderMessages();
  renderComposer();
  if (map.snapshot) map.update(map.snapshot);  // owner labels follow the titles
}

function requestBody(c) {
  const messages = [];
  if (c.system.trim()) messages.push({ role: 'system', content: c.system });
  for (const m of c.messages) {
    if (m.error || m.pending) continue;
    messages.push({ role: m.role, content: m.content });
  }
  const s = c.settings;
  const body = {
    model: model?.id,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number(s.temperature),
    top_p: Number(s.top_p),
  };
  if (s.max_tokens !== '' && s.max_tokens !== null) body.max_tokens = Number(s.max_tokens);
  if (s.seed !== '' && s.seed !== null) body.seed = Number(s.seed);
  if (s.pin) body.session_id = c.session;
  return body;
}

async function send(text) {
  const c = current();
  if (generating) return;
  c.messages.push({ role: 'user', content: text });
  if (c.title === 'New chat') c.title = text.slice(0, 40) || 'New chat';
  const reply = { role: 'assistant', content: '', pending: true };
  const body = requestBody(c);
  c.messages.push(reply);
  c.updated = Date.now();
  const controller = new AbortController();
  generating = { conversation: c, controller };
  save();
  renderAll();

  const started = performance.now();
  let first = null;
  let frame = 0;
  const refresh = () => {
    frame = 0;
    if (currentId !== c.id) return;
    renderMessage(reply);
    const box = $('messages');
    box.scrollTop = box.scrollHeight;
  };
  try {
    const response = await api('/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorText(response));
    for await (const event of sseEvents(response)) {
      if (event.data === '[DONE]') break;
      const chunk = JSON.parse(event.data);
      if (chunk.error) throw new Error(chunk.error.message ?? 'error');
      for (const choice of chunk.choices ?? []) {
        const delta = choice.delta?.content;
        if (delta) {
          first ??= performance.now();
          reply.content += delta;
          reply.deltas = (reply.deltas ?? 0) + 1;
          if (!frame) frame = requestAnimationFrame(refresh);
        }
        if (choice.finish_reason) reply.finish = choice.finish_reason;
      }
      if (chunk.usage) {
        reply.usage = {
          prompt_tokens: chunk.usage.prompt_tokens,
          cached_tokens: chunk.usage.prompt_tokens_details?.cached_tokens ?? 0,
          completion_tokens: chunk.usage.completion_tokens,
        };
      }
    }
  } catch (error) {
    if (error.name === 'AbortError') reply.stopped = true;
    else reply.error = `Error: ${error.message}`;
  } finally {
    if (frame) cancelAnimationFrame(frame);
    const ended = performance.now();
    // The rate counts the whole request (prefill, queueing and the network too): on a fast
    // model the tokens arrive in a few reads, and a rate from the first one would mean little.
    const n = reply.usage?.completion_tokens;
    reply.timing = {
      first_ms: first === null ? null : first - started,
      total_ms: ended - started,
      tokens_per_s: n > 0 && ended > started ? (n * 1000) / (ended - started) : null,
    };
    reply.pending = false;
    generating = null;
    c.updated = Date.now();
    save();
    renderAll();
  }
}

// Shows `text` as an assistant message of the current conversation, through the same renderer as
// streamed replies (for tests and for pasting a reply). Not sent anywhere.
function showAssistantText(text) {
  const m = { role: 'assistant', content: String(text) };
  current().messages.push(m);
  save();
  renderMessages();
  return renderMessage(m);
}

// ---- the map --------------------------------------------------------------------------------

function describeOwner(owner) {
  const conversation = owner.session
    ? conversations.find((c) => c.session === owner.session)
    : null;
  const name = conversation ? `“${conversation.title}”` : owner.session ? `session ${owner.session}` : null;
  if (owner.kind === 'request') {
    const label = name ? `${name}, generating` : `request ${owner.id}`;
    return { key: owner.session || owner.id, label };
  }
  return { key: owner.session, label: name ? `${name}, pinned` : `session ${owner.id}` };
}

const map = new KvMapView({
  canvas: $('kvmap'),
  tooltip: $('map-tooltip'),
  legend: $('map-legend'),
  caption: $('map-caption'),
  stat: (name) => $(`stat-${name}`),
}, describeOwner);

function setConnection(state, text) {
  const pill = $('connection');
  pill.dataset.state = state;
  pill.textContent = text;
  pill.title = `map: ${text}`;
}

async function streamMap() {
  let backoff = 500;
  for (;;) {
    try {
      const response = await api('/v1/kv-map/stream?interval_ms=250');
      if (response.status === 401) {
        setConnection('error', 'API key needed');
        await keyChanged();
        continue;
      }
      if (!response.ok) throw new Error(await errorText(response));
      setConnection('live', 'live');
      backoff = 500;
      for await (const event of sseEvents(response)) {
        if (event.event === 'kvmap') map.update(JSON.parse(event.data));
      }
      throw new Error('stream ended');
    } catch (error) {
      setConnection('error', 'reconnecting');
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 8000);
    }
  }
}

// ---- page chrome ----------------------------------------------------------------------------

const THEMES = ['auto', 'light', 'dark'];

function applyTheme(theme) {
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  $('theme-toggle').title = `Theme: ${theme}`;
  map.refresh();
}

function setView(view) {
  document.querySelector('.layout').dataset.view = view;
  for (const b of document.querySelectorAll('.tabs button')) {
    b.setAttribute('aria-pressed', String(b.dataset.view === view));
  }
  if (view === 'map') map.draw();
}

function bindSettings() {
  const bind = (id, apply) => $(id).addEventListener('input', (event) => {
    apply(current(), event.target);
    save();
  });
  bind('system-prompt', (c, e) => { c.system = e.value; });
  bind('temperature', (c, e) => { c.settings.temperature = e.value; });
  bind('top-p', (c, e) => { c.settings.top_p = e.value; });
  bind('max-tokens', (c, e) => { c.settings.max_tokens = e.value; });
  bind('seed', (c, e) => { c.settings.seed = e.value; });
  bind('pin-session', (c, e) => { c.settings.pin = e.checked; });
}

function bindPage() {
  $('composer').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('input');
    const text = input.value.trim();
    if (!text || generating) return;
    input.value = '';
    send(text);
  });
  $('input').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => generating?.controller.abort());
  $('new-chat').addEventListener('click', () => {
    const c = newConversation();
    selectConversation(c.id);
    $('input').focus();
  });
  $('menu-toggle').addEventListener('click', () => {
    const open = $('sidebar').classList.toggle('open');
    $('menu-toggle').setAttribute('aria-expanded', String(open));
  });
  for (const b of document.querySelectorAll('.tabs button')) {
    b.addEventListener('click', () => setView(b.dataset.view));
  }
  let theme = storage.get('kvserve.theme', 'auto');
  if (!THEMES.includes(theme)) theme = 'auto';
  applyTheme(theme);
  $('theme-toggle').addEventListener('click', () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    storage.set('kvserve.theme', theme);
    applyTheme(theme);
  });
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => map.refresh());
  $('key-button').addEventListener('click', () => askKey('API key for this server (sent as a bearer token).'));
  new ResizeObserver(() => map.draw()).observe($('map-box'));
  bindSettings();
}

async function loadModel() {
  for (;;) {
    try {
      const response = await api('/v1/models');
      if (response.ok) {
        model = (await response.json()).data[0];
        $('model-name').textContent = `${model.id} · context ${model.max_model_len}`;
        renderMessages();
        return;
      }
      setConnection('error', response.status === 401 ? 'API key needed' : await errorText(response));
      if (response.status === 401) await keyChanged();
      else await sleep(2000);
    } catch {
      setConnection('error', 'server unreachable');
      await sleep(2000);
    }
  }
}

bindPage();
renderAll();
window.kvserveUi = { renderMarkdown, showAssistantText, map };
loadModel().then(streamMap);
