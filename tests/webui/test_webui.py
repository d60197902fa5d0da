"""The web page of a real `kvserve serve` in Debian's Chromium, headless, driven by Playwright.

The server runs stories260K with an API key. The tests check: chat with streamed replies, stop,
cached prompt tokens on the second turn, the live KV map (blocks in use while a reply runs,
cached-free after, shared blocks between two conversations), the key check, model text shown as
text, and the map's numbers against /metrics. Screenshots go to WEBUI_ARTIFACTS (default
build/webui-artifacts).

    .venv/bin/python -m pytest -q tests/webui   (scripts/webui-test.sh installs what it needs)

Environment: KVSERVE_BINARY (build/kvserve), KVSERVE_MODEL (../shared/models/stories260K.gguf),
WEBUI_ARTIFACTS, CHROMIUM (/usr/bin/chromium). Playwright (the PyPI package, its own driver)
downloads no browser: it launches CHROMIUM. Each launch gets a fresh temporary --user-data-dir
and each test its own browser context (own localStorage). Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("KVSERVE_BINARY", str(ROOT / "build/kvserve"))
MODEL = os.environ.get("KVSERVE_MODEL", str(ROOT / "../shared/models/stories260K.gguf"))
ARTIFACTS = Path(os.environ.get("WEBUI_ARTIFACTS", str(ROOT / "build/webui-artifacts")))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
KEY = "sk-webui-test-key"
WAIT_MS = 30_000  # every wait for the page

# 80 tokens or so: several full 16-token blocks to reuse or share. Each test starts it with its
# own word, so that no two tests share blocks.
SYSTEM = (
    "You are a storyteller. You tell short, happy stories for children about a little girl "
    "named Lily, her brother Tom, their dog Max and the big green park near their house, where "
    "they play with a red ball, look at the birds in the tall trees and eat sandwiches on a "
    "blanket in the sun."
)


def system(tag: str) -> str:
    """The long system prompt, starting with `tag`."""
    return f"{tag}. {SYSTEM}"


# Plain HTTP to the server, never through a proxy.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# ---- the server and the browser ---------------------------------------------------------------


class Server:
    """A running `kvserve serve`: its process, base URL and everything it wrote to stderr."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.url = ""
        self._log: list[str] = []
        self._lock = threading.Lock()

    def log(self) -> str:
        with self._lock:
            return "".join(self._log)

    def append(self, text: str) -> None:
        with self._lock:
            self._log.append(text)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _start_server() -> Server:
    """Starts `kvserve serve` on 127.0.0.1, port 0; returns once its log says listening, ready."""
    # Context 8192 so that a reply can run long enough to be stopped; 20 MiB of KV = 1024 blocks.
    args = [BINARY, "serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0", "-t", "1",
            "-c", "8192", "--kv-memory", "20MiB", "--block-size", "16", "--api-key", KEY]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    server = Server(process)
    started = threading.Event()

    def read_log() -> None:
        # Reads stderr to the end (a full pipe would block the server) and spots the address.
        assert process.stderr is not None
        for line in iter(process.stderr.readline, b""):
            server.append(line.decode(errors="replace"))
            if not server.url:
                log = server.log()
                url = re.search(r"listening on (http://127\.0\.0\.1:\d+)", log)
                if url and "ready:" in log:
                    server.url = url.group(1)
                    started.set()
        started.set()  # exited

    threading.Thread(target=read_log, daemon=True).start()
    if not started.wait(60) or not server.url:
        code = process.poll()
        if code is None:
            process.kill()
            process.wait()
            raise RuntimeError(f"kvserve serve did not start:\n{server.log()}")
        raise RuntimeError(f"kvserve serve exited {code}:\n{server.log()}")
    return server


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The folder for the screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def server(artifacts: Path) -> Iterator[Server]:
    """One `kvserve serve` for all the tests; SIGTERM at the end."""
    server = _start_server()
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture(scope="session")
def browser(server: Server) -> Iterator[Browser]:
    """Debian's Chromium, headless, launched once the server is up and closed before it stops."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def open_page(browser: Browser, server: Server) -> Iterator[Callable[..., Page]]:
    """Opens a page in a fresh context, signed in with the key, the map shown.

    At the end of the test it closes the context and fails when the page threw a script error.
    """
    contexts = []
    errors: list[str] = []

    def open_(viewport: dict[str, int] | None = None) -> Page:
        context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(error.message))
        page.goto(f"{server.url}/")
        page.wait_for_selector("#key-dialog[open]", timeout=WAIT_MS)
        page.fill("#key-input", KEY)
        page.click("#key-ok")
        map_shown(page)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert errors == [], "the page threw"


# ---- helpers ----------------------------------------------------------------------------------


def api_json(server: Server, pathname: str, body: Any = None) -> tuple[int, Any]:
    """Calls the API with the key (POST with a JSON body when `body` is given): status, JSON."""
    headers = {"Authorization": f"Bearer {KEY}"}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    request = urllib.request.Request(server.url + pathname, data=data, headers=headers)
    try:
        with _http.open(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def metrics(server: Server) -> dict[str, float]:
    """The pool and request numbers from /metrics."""
    with _http.open(f"{server.url}/metrics", timeout=60) as response:
        lines = response.read().decode().split("\n")

    def value(name: str, fallback: float | None = None) -> float:
        line = next((line for line in lines if line.startswith(f"{name} ")), None)
        if line is None and fallback is not None:
            return fallback
        assert line is not None, f"no {name} in /metrics"
        return float(line[len(name) + 1:])

    return {
        "used": value('kvserve:kv_cache_blocks{state="used"}'),
        "cached": value('kvserve:kv_cache_blocks{state="cached"}'),
        "free": value('kvserve:kv_cache_blocks{state="free"}'),
        "running": value("kvserve:num_requests_running"),
        "waiting": value("kvserve:num_requests_waiting"),
        "sessions": value("kvserve:num_sessions"),
        "preemptions": value("kvserve:num_preemptions_total"),
        "queries": value("kvserve:prefix_cache_queries_total"),
        "hits": value("kvserve:prefix_cache_hits_total"),
        "generated": value("kvserve:generation_tokens_total"),
        "aborted": value('kvserve:request_success_total{finished_reason="abort"}', 0),
    }


def eventually(what: str, check: Callable[[], Any]) -> None:
    """Waits until `check` returns true (an exception counts as not yet); fails after 30 s."""
    deadline = time.monotonic() + 30
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as error:  # noqa: BLE001 - kept for the message
            last = error
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f": {last}" if last else ""))


def map_shown(page: Page) -> None:
    """Waits for the page's first map snapshot and its model name."""
    page.wait_for_selector('#connection[data-state="live"]', timeout=WAIT_MS)
    page.wait_for_function(
        "() => document.querySelector('#stat-free').dataset.value !== '' &&"
        " document.querySelector('#model-name').textContent !== ''",
        timeout=WAIT_MS)


def set_settings(page: Page, *, system: str | None = None, temperature: float | None = None,
                 max_tokens: int | None = None, seed: int | None = None,
                 pin: bool | None = None) -> None:
    """Opens the conversation settings and fills in the given ones."""
    if not page.is_visible("#system-prompt"):
        page.click("#settings summary")
    if system is not None:
        page.fill("#system-prompt", system)
    if temperature is not None:
        page.fill("#temperature", str(temperature))
    if max_tokens is not None:
        page.fill("#max-tokens", str(max_tokens))
    if seed is not None:
        page.fill("#seed", str(seed))
    if pin is not None:
        page.set_checked("#pin-session", pin)


def send_and_wait(page: Page, text: str) -> dict[str, str]:
    """Sends `text` and waits for the reply to finish; returns the reply's element's data."""
    before = page.eval_on_selector_all(".message.assistant", "(nodes) => nodes.length")
    page.fill("#input", text)
    page.press("#input", "Enter")
    page.wait_for_function(
        "(n) => document.querySelectorAll('.message.assistant[data-pending=\"false\"]').length"
        " > n",
        arg=before, timeout=WAIT_MS)
    return page.eval_on_selector(".message.assistant:last-of-type", """(node) => ({
        text: node.querySelector('.bubble').textContent,
        ...node.querySelector('.meta').dataset,
        meta: node.querySelector('.meta').textContent,
    })""")


def stat(page: Page, name: str) -> float:
    """A number above the map (`data-value` of #stat-NAME)."""
    return page.eval_on_selector(f"#stat-{name}", "(dd) => Number(dd.dataset.value)")


# ---- tests ------------------------------------------------------------------------------------


def test_key_required(browser: Browser, server: Server) -> None:
    """The page is open, the API behind it refuses without the key and works with it.

    The page answers 200 with a CSP of `script-src 'self'`; without a key the API and both map
    endpoints answer 401 and no map is shown; a wrong key is refused ("invalid API key") and asked
    for again; the right one shows the map, the model's name, and 1024 blocks in all.
    """
    context = browser.new_context()
    try:
        page = context.new_page()
        response = page.goto(f"{server.url}/")
        assert response is not None
        assert response.status == 200
        assert re.search(r"script-src 'self'",
                         response.headers.get("content-security-policy", ""))
        page.wait_for_selector("#key-dialog[open]", timeout=WAIT_MS)
        # Without a key: the API and the map answer 401 and the page shows no map.
        statuses = page.evaluate("""async () => Promise.all(
            ['/v1/models', '/v1/kv-map', '/v1/kv-map/stream'].map(
                async (p) => (await fetch(p)).status))""")
        assert statuses == [401, 401, 401]
        assert page.eval_on_selector("#stat-used", "(dd) => dd.dataset.value") == ""
        # A wrong key is refused and asked for again.
        page.fill("#key-input", "sk-wrong")
        page.click("#key-ok")
        page.wait_for_function(
            "() => document.querySelector('#key-dialog').open &&"
            " /invalid API key/.test(document.querySelector('#key-message').textContent)",
            timeout=WAIT_MS)
        page.fill("#key-input", KEY)
        page.click("#key-ok")
        map_shown(page)
        assert re.search(r"stories260K", page.text_content("#model-name") or "")
        assert stat(page, "free") + stat(page, "used") + stat(page, "cached") == 1024
    finally:
        context.close()


def test_streamed_reply_equals_unstreamed(open_page: Callable[..., Page], server: Server) -> None:
    """A message gets a streamed reply, the same text as the API gives without streaming.

    48 tokens at temperature 0, in more than one piece, with a tokens/s figure under it; the
    bubble's text (without whitespace: it renders Markdown) equals the unstreamed reply's.
    """
    page = open_page()
    set_settings(page, temperature=0, max_tokens=48, pin=False)
    reply = send_and_wait(page, "Once upon a time")
    assert len(reply["text"]) > 0
    assert float(reply["completionTokens"]) == 48
    assert float(reply["deltas"]) > 1, f"the reply came in {reply['deltas']} pieces"
    assert re.search(r"tokens/s", reply["meta"])
    status, whole = api_json(server, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Once upon a time"}],
        "temperature": 0, "top_p": 0.95, "max_tokens": 48,
    })
    assert status == 200
    # The bubble renders Markdown; compare the text without the line structure.

    def squash(text: str) -> str:
        return re.sub(r"\s+", "", text)

    assert squash(reply["text"]) == squash(whole["choices"][0]["message"]["content"])


def test_second_turn_cached(open_page: Callable[..., Page], artifacts: Path) -> None:
    """A second turn shows cached prompt tokens.

    With the session pinned, the second turn's prompt is longer than the first's, at least 64 of
    its tokens came from the cache, and the line under the reply says "(N cached)". Screenshot:
    chat.png.
    """
    page = open_page()
    set_settings(page, system=system("Turns"), temperature=0, max_tokens=24, pin=True)
    first = send_and_wait(page, "Tell me a story about the park.")
    second = send_and_wait(page, "What did Max do next?")
    assert float(second["promptTokens"]) > float(first["promptTokens"])
    assert float(second["cachedTokens"]) >= 64, (
        f"second turn: {second['cachedTokens']} of {second['promptTokens']} prompt tokens cached")
    assert re.search(rf"\({second['cachedTokens']} cached\)", second["meta"])
    page.wait_for_timeout(400)  # one more map update, for the picture
    page.screenshot(path=str(artifacts / "chat.png"))


# Run in the page: the ids of the blocks its running request holds, once there are 8.
OWN_BLOCKS = """() => {
    const m = window.kvserveUi.map.map;
    if (!m) return false;
    const owner = m.owners.findIndex((o) => o.kind === 'request' && o.mine);
    const ids = m.blocks.flatMap(
        (b, id) => (b && b.uses.some((u) => u.owner === owner) ? [id] : []));
    return owner >= 0 && ids.length >= 8 && ids;
}"""


def test_stop_frees_blocks(open_page: Callable[..., Page], server: Server,
                           artifacts: Path) -> None:
    """Stop ends a long reply; the map shows its blocks in use while it runs, cached-free after.

    While the reply (ignore_eos, up to 6000 tokens) runs, the map shows at least 8 blocks held by
    this page's request (screenshot: map-generating.png). Stop ends it: the reply is marked
    stopped and has text; the map then shows no request, none of those blocks in use and all but
    at most one cached-free; /metrics shows nothing running, fewer than 6000 tokens generated and
    one more aborted request.
    """
    page = open_page()
    set_settings(page, system=system("Stop"), temperature=0.8, max_tokens=6000, pin=False)

    # The model would end its story early: ask the server to keep going (the request is the
    # page's own, with ignore_eos added).
    def keep_going(route: Route) -> None:
        body = json.loads(route.request.post_data or "")
        route.continue_(post_data=json.dumps({**body, "ignore_eos": True}))

    page.route("**/v1/chat/completions", keep_going)
    before = metrics(server)
    page.fill("#input", "Tell me the longest story you know.")
    page.press("#input", "Enter")
    page.wait_for_selector("#stop:not([hidden])", timeout=WAIT_MS)
    # While it runs: blocks in use, owned by this conversation's request.
    held = page.wait_for_function(OWN_BLOCKS, timeout=WAIT_MS).json_value()
    assert stat(page, "used") >= len(held)
    page.screenshot(path=str(artifacts / "map-generating.png"))
    page.click("#stop")
    page.wait_for_selector("#send:not([hidden])", timeout=WAIT_MS)
    reply = page.eval_on_selector(".message.assistant:last-of-type", """(node) => ({
        finish: node.querySelector('.meta').dataset.finish,
        text: node.querySelector('.bubble').textContent,
    })""")
    assert reply["finish"] == "stopped"
    assert len(reply["text"]) > 0
    # The server let go of it: nothing running, its blocks cached-free (all but a partial last
    # one, which has no key and is simply free), far fewer than 6000 tokens made.
    eventually("the map to show the request gone", lambda: (
        stat(page, "running") == 0 and page.evaluate(
            "() => window.kvserveUi.map.map.owners.every((o) => o.kind !== 'request')")))
    states = page.evaluate("""(ids) => {
        const m = window.kvserveUi.map.map;
        return ids.map((id) => (m.blocks[id] === null ? 'free'
                                : m.blocks[id].refs > 0 ? 'used' : 'cached'));
    }""", held)
    assert "used" not in states, " ".join(states)
    assert states.count("cached") >= len(held) - 1, " ".join(states)
    after = metrics(server)
    assert after["running"] == 0
    generated = after["generated"] - before["generated"]
    assert generated < 6000, f"{generated:g} tokens generated"
    assert after["aborted"] == before["aborted"] + 1, "the server counts the request as aborted"


# Run in the page: the blocks both sessions (`mine`) hold, once there are 4.
SHARED_BY_BOTH = """(mine) => {
    const m = window.kvserveUi.map.map;
    if (!m) return false;
    const found = m.blocks.flatMap((b, id) => {
        if (!b) return [];
        const owners = new Set(b.uses.map((u) => m.owners[u.owner].session));
        return mine.every((s) => owners.has(s))
            ? [{ id, refs: b.refs, uses: b.uses.length, logical: b.uses[0].logical }] : [];
    });
    return found.length >= 4 && found;
}"""

# Run in the page: the middle of block `id`'s cell on the map canvas, in page coordinates.
CELL_CENTRE = """(id) => {
    const { size, gap, cols } = window.kvserveUi.map.geometry;
    const r = document.querySelector('#kvmap').getBoundingClientRect();
    return { x: r.left + (id % cols) * (size + gap) + size / 2,
             y: r.top + Math.floor(id / cols) * (size + gap) + size / 2 };
}"""


def test_shared_system_prompt(open_page: Callable[..., Page], artifacts: Path) -> None:
    """Two conversations with the same long system prompt share blocks.

    The second conversation's prompt has at least 64 cached tokens; the map shows at least 4
    blocks held by both sessions, each with 2 references and 2 uses, counted as shared; hovering
    the first one's cell shows a tooltip "in use, 2 references" naming both conversations with
    positions 0-15. Screenshot of the map: map.png.
    """
    page = open_page()
    set_settings(page, system=system("Shared"), temperature=0, max_tokens=16, pin=True)
    send_and_wait(page, "Hello!")
    page.click("#new-chat")
    set_settings(page, system=system("Shared"), temperature=0, max_tokens=16, pin=True)
    second = send_and_wait(page, "Good morning!")
    assert float(second["cachedTokens"]) >= 64, f"{second['cachedTokens']} cached"
    # Both sessions pin the system prompt's blocks: the map marks them shared by 2.
    sessions = page.evaluate(
        "() => JSON.parse(localStorage.getItem('kvserve.conversations')).map((c) => c.session)")
    shared = page.wait_for_function(SHARED_BY_BOTH, arg=sessions, timeout=WAIT_MS).json_value()
    for block in shared:
        assert [block["refs"], block["uses"]] == [2, 2], json.dumps(block)
    assert stat(page, "shared") >= len(shared)
    # Hovering the cell names both conversations and the positions.
    first = next((block for block in shared if block["logical"] == 0), None)
    assert first is not None, json.dumps(shared)
    point = page.evaluate(CELL_CENTRE, first["id"])
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#map-tooltip:not([hidden])", timeout=WAIT_MS)
    tip = page.text_content("#map-tooltip") or ""
    assert re.search(r"in use, 2 references", tip)
    assert re.search(r"“Hello!”, pinned: positions 0–15", tip)
    assert re.search(r"“Good morning!”, pinned: positions 0–15", tip)
    page.locator("#map-view").screenshot(path=str(artifacts / "map.png"))


HOSTILE = (
    'Here: <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">'
    "\n\n**bold** and `<b>code</b>` and [link](javascript:window.__pwned=3)"
    "\n\n```html\n<script>alert(1)</script>\n```"
)


def test_html_shown_as_text(open_page: Callable[..., Page]) -> None:
    """Model output with <script> and other HTML is shown as text.

    Through the page's reply renderer, and in a message the user sends: nothing runs
    (window.__pwned stays unset), no script, img, iframe or onerror element and no link other
    than http(s) or mailto is made, the HTML is in the text as written, and the Markdown around
    it (bold, code spans, fenced code) still renders.
    """
    page = open_page()
    # Through the renderer the streamed replies use.
    page.evaluate("(text) => window.kvserveUi.showAssistantText(text)", HOSTILE)
    # And typed by the user, then sent (the model's reply goes through the renderer as well).
    set_settings(page, max_tokens=8, pin=False)
    send_and_wait(
        page, '<img src=x onerror="window.__pwned = 4"><script>window.__pwned = 5</script>')
    seen = page.evaluate("""() => {
        const box = document.querySelector('#messages');
        return {
            pwned: window.__pwned,
            elements: box.querySelectorAll('script, img, iframe, [onerror]').length,
            javascriptLinks: [...box.querySelectorAll('a')]
                .filter((a) => !/^https?:|^mailto:/.test(a.href)).length,
            text: box.textContent,
            strong: box.querySelector('.message.assistant strong')?.textContent,
            code: [...box.querySelectorAll('.message.assistant code')].map((c) => c.textContent),
        };
    }""")
    assert seen.get("pwned") is None
    assert seen["elements"] == 0
    assert seen["javascriptLinks"] == 0
    assert "<script>window.__pwned = 1</script>" in seen["text"]
    assert '<img src=x onerror="window.__pwned = 4">' in seen["text"]
    assert seen["strong"] == "bold"
    assert seen["code"] == ["<b>code</b>", "<script>alert(1)</script>"]


MARKDOWN = "\n".join([
    "# Title", "", "Some *em* and **strong** and ~~old~~ and `x < y`.", "Second line.", "",
    "- one", "- two [site](https://example.org/a?b=1)", "", "3. three", "4. four", "",
    "> quoted", "", "```js", 'if (a < b) { run("<b>"); }', "```", "", "---",
    "[bad](javascript:alert(1)) [data](data:text/html,x) snake_case_name",
])


def test_markdown(open_page: Callable[..., Page]) -> None:
    """Markdown: lists, headings, code, quotes and only safe links.

    The page's renderer turns a sample of each into exactly the expected HTML; javascript: and
    data: links stay text.
    """
    page = open_page()
    html = page.evaluate("""(text) => {
        const box = document.createElement('div');
        box.append(window.kvserveUi.renderMarkdown(text));
        return box.innerHTML;
    }""", MARKDOWN)
    assert html == "".join([
        "<h3>Title</h3>",
        "<p>Some <em>em</em> and <strong>strong</strong> and <del>old</del> and"
        " <code>x &lt; y</code>.<br>Second line.</p>",
        '<ul><li>one</li><li>two <a href="https://example.org/a?b=1" target="_blank"'
        ' rel="noopener noreferrer nofollow">site</a></li></ul>',
        '<ol start="3"><li>three</li><li>four</li></ol>',
        "<blockquote><p>quoted</p></blockquote>",
        '<pre><code class="language-js">if (a &lt; b) { run("&lt;b&gt;"); }</code></pre>',
        "<hr>",
        "<p>[bad](javascript:alert(1)) [data](data:text/html,x) snake_case_name</p>",
    ])


def test_map_numbers_match_metrics(open_page: Callable[..., Page], server: Server) -> None:
    """The map's numbers agree with /metrics.

    Once the engine is idle after a reply, the blocks in use, cached-free and free, running,
    queue, sessions, preemptions and the prefix hit rate above the map equal /metrics'; at least
    one session and one block are in use; utilisation is blocks in use / 1024 to one decimal.
    """
    page = open_page()
    set_settings(page, system=system("Metrics"), temperature=0, max_tokens=16, pin=True)
    send_and_wait(page, "Once upon a time")

    # The engine is idle now: the map's next snapshot and /metrics see the same pool.
    def same() -> bool:
        m = metrics(server)
        shown = {
            "used": stat(page, "used"), "cached": stat(page, "cached"),
            "free": stat(page, "free"), "running": stat(page, "running"),
            "waiting": stat(page, "waiting"), "sessions": stat(page, "sessions"),
            "preemptions": stat(page, "preemptions"), "hitRate": stat(page, "hit-rate"),
        }
        assert shown == {
            "used": m["used"], "cached": m["cached"], "free": m["free"],
            "running": m["running"], "waiting": m["waiting"], "sessions": m["sessions"],
            "preemptions": m["preemptions"],
            "hitRate": m["hits"] / m["queries"] if m["queries"] else 0,
        }
        return True

    eventually("the map to match /metrics", same)
    assert stat(page, "sessions") >= 1
    assert stat(page, "used") >= 1
    utilisation = page.text_content("#stat-utilisation")
    assert utilisation == f"{100 * stat(page, 'used') / 1024:.1f}%"


def test_phone_tabs_dark(open_page: Callable[..., Page], artifacts: Path) -> None:
    """On a phone-sized screen the tabs switch between chat and map, in the dark theme too.

    At 390x844 only the chat shows; the theme button goes auto -> light -> dark; the map tab shows
    the map alone, between 300 and 390 px wide (phone-map-dark.png); the chat tab brings back the
    composer (phone-chat-dark.png).
    """
    page = open_page({"width": 390, "height": 844})
    assert page.is_visible("#chat-view")
    assert not page.is_visible("#map-view")
    page.click("#theme-toggle")  # auto -> light
    page.click("#theme-toggle")  # light -> dark
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    page.click('.tabs button[data-view="map"]')
    assert page.is_visible("#map-view")
    assert not page.is_visible("#chat-view")
    width = page.eval_on_selector("#kvmap", "(c) => c.getBoundingClientRect().width")
    assert 300 < width <= 390, f"map {width}px wide"
    page.screenshot(path=str(artifacts / "phone-map-dark.png"))
    page.click('.tabs button[data-view="chat"]')
    assert page.is_visible("#composer")
    page.screenshot(path=str(artifacts / "phone-chat-dark.png"))
