#!/usr/bin/env python3
"""Soak client for `kvserve serve` (issue 17), standard library only; scripts/soak.sh runs it.

1. Reference: every request of a fixed, seeded pool is sent alone, one after another; its text
   and tokens are what it must give later under any load.
2. Load: --clients threads send requests of the pool (mixed prompt and output lengths, shared
   prefixes, streamed or not, some in sessions), with idle gaps; --cancel of them are cancelled at
   a random point (the client disconnects mid-stream, or its session is DELETEd). The server's KV
   budget is small, so sequences are preempted. --warmup seconds of it, an idle point, then
   --seconds of it, and a second idle point. At an idle point every client parks before its next
   request, every session is DELETEd and the engine runs nothing.
3. Checks: every request that was not cancelled gives exactly its reference text and tokens; the
   only error status is 429 (a full queue); at the end no block is referenced (/metrics). Idle
   points cut the window into --parts: from the first to the last, resident memory grows by at
   most --max-rss-growth, and the bytes the allocator has handed out (kvserve:heap_in_use_bytes)
   by at most --max-heap-growth per request over every part but the one they grew most in.
   The warm-up and that one part are there because both keep high-water marks that are not
   leaks: resident memory the allocator's fragmentation, the heap buffers that grow to the
   largest step yet seen (the forward pass's workspace: 0.3 MiB between 30 s and 90 s of this
   load), which step up once, where a leak grows in every part. Prints the figures; exits 1 on
   any failure.
"""
import argparse
import http.client
import json
import random
import re
import sys
import threading
import time

WORDS = ("once upon a time there was a little girl named lily she loved to play outside in the "
         "park with her dog and her friend tom one day they found a big red ball under a tree "
         "the sun was warm and the birds sang").split()


def heap_growth(points):
    """The heap's growth between idle points [(bytes in use, requests so far)]: in all, per part,
    and per request over every part but the one it grew most in. A buffer that grows to the
    largest batch yet seen, or a hash table's bucket array, steps up once and stays, which is no
    leak; a leak grows in every part."""
    parts = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(points, points[1:])]
    total = points[-1][0] - points[0][0]
    requests = points[-1][1] - points[0][1]
    rest = sorted(parts)[:-1] if len(parts) > 1 else parts
    return {"bytes": total, "per_request": total / max(1, requests),
            "parts": [d for d, _ in parts],
            "steady": sum(d for d, _ in rest) / max(1, sum(n for _, n in rest))}


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:]+(?:\{[^}]*\})?) ([0-9.eE+-]+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


class Gate:
    """Lets the sampler stop the load at a point: close() returns once every live client is
    parked before its next request; open() lets them go on."""

    def __init__(self, clients):
        self.cv = threading.Condition()
        self.closed = False
        self.parked = 0
        self.live = clients

    def park(self):
        with self.cv:
            if not self.closed:
                return
            self.parked += 1
            self.cv.notify_all()
            while self.closed:
                self.cv.wait()
            self.parked -= 1

    def leave(self):
        with self.cv:
            self.live -= 1
            self.cv.notify_all()

    def close(self):
        with self.cv:
            self.closed = True
            while self.parked < self.live:
                self.cv.wait()

    def open(self):
        with self.cv:
            self.closed = False
            self.cv.notify_all()


def make_pool(count, rng):
    """Requests with shared prefixes (4 stems), mixed lengths, seeds and temperatures."""
    stems = [" ".join(WORDS[i:i + 6 + 4 * i]) for i in range(4)]
    pool = []
    for i in range(count):
        stem = stems[i % len(stems)]
        tail = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30)))
        body = {
            "prompt": (stem + " " + tail).strip(),
            "max_tokens": rng.choice([1, 4, 16, 32, 64, 80]),
            "temperature": rng.choice([0, 0.7, 1.0]),
            "seed": 1000 + i,
            "logprobs": 0,
            "ignore_eos": rng.random() < 0.5,
        }
        pool.append(body)
    return pool


SYSTEM = ("You are a concise assistant for a travel desk. You answer in one or two sentences, you "
          "call a tool when the user asks about the weather or the time, and you never invent "
          "prices. The desk serves Oslo, Paris, Lima, Tokyo and Nairobi.")
QUESTIONS = ["Is it cold in Oslo today?", "What time is it in Lima?", "Name three sights in Paris.",
             "Describe Tokyo in one sentence.", "Should I pack an umbrella for Nairobi?",
             "Which of the desk's cities is the largest?", "Give me a short greeting.",
             "What is the capital of Japan?"]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                    "required": ["city"]}}},
]
CITY_SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20}, "country": {"type": "string", "maxLength": 20},
    "sights": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3}},
    "required": ["city", "country", "sights"], "additionalProperties": False}


def post(port, path, body, stream, session, timeout):
    """Sends one request (in `session` when given); returns the connection and its response."""
    body = dict(body)
    if session:
        body["session_id"] = session
    body["stream"] = stream
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        return conn, conn.getresponse()
    except Exception:
        conn.close()
        raise


def make_chat_pool(count, rng):
    """Chat requests of a real model: plain answers, tool calls (auto, required, a named tool),
    JSON-schema answers and n > 1, with and without speculation; one shared system prompt."""
    pool = []
    for i in range(count):
        kind = ["plain", "tools", "json", "n"][i % 4]
        body = {
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": rng.choice(QUESTIONS)}],
            "max_tokens": rng.choice([8, 24, 48, 64]),
            "temperature": rng.choice([0, 0.8]),
            "seed": 1000 + i,
            "logprobs": True,
            "speculative": rng.random() < 0.5,
        }
        if kind == "tools":
            body["tools"] = TOOLS
            body["tool_choice"] = rng.choice(
                ["auto", "required", {"type": "function", "function": {"name": "get_time"}}])
            body["parallel_tool_calls"] = False
            body["max_tokens"] = 64
        elif kind == "json":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "city", "schema": CITY_SCHEMA}}
            body["max_tokens"] = 96
        elif kind == "n":
            body["n"] = rng.choice([2, 3])
            body["temperature"] = 0.8
        pool.append(body)
    return pool


def chat_answer(choices):
    """Comparable answers of chat choices: content, reasoning, calls (name, arguments; ids are
    random), finish reason and tokens, per choice index."""
    return tuple((c["content"], c["reasoning"], tuple(c["calls"]), c["finish"], tuple(c["tokens"]))
                 for _, c in sorted(choices.items()))


def new_choice():
    return {"content": "", "reasoning": "", "calls": [], "finish": None, "tokens": []}


def sse_events(resp):
    """The JSON of each data event of a streamed answer, up to [DONE]."""
    while True:
        line = resp.fp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if not line.startswith("data: "):
            continue
        if line[6:] == "[DONE]":
            return
        yield json.loads(line[6:])


def read_chat_stream(resp, cancel_after):
    """A streamed chat completion: (answer, tokens) or None when cancelled after cancel_after
    events."""
    choices, events = {}, 0
    for event in sse_events(resp):
        for choice in event.get("choices", []):
            c = choices.setdefault(choice["index"], new_choice())
            delta = choice.get("delta", {})
            c["content"] += delta.get("content") or ""
            c["reasoning"] += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                function = call.get("function", {})
                if "id" in call:
                    c["calls"].append((function.get("name", ""), ""))
                name, arguments = c["calls"][-1]
                c["calls"][-1] = (name, arguments + (function.get("arguments") or ""))
            if choice.get("finish_reason"):
                c["finish"] = choice["finish_reason"]
            for entry in (choice.get("logprobs") or {}).get("content") or []:
                c["tokens"].append(entry["token"])
        events += 1
        if cancel_after is not None and events >= cancel_after:
            return None
    return choices


def complete_chat(port, body, stream, session=None, cancel_after=None, timeout=300):
    """One chat request. Returns (status, answer, tokens, cancelled); answer None when not 200."""
    conn, resp = post(port, "/v1/chat/completions", body, stream, session, timeout)
    try:
        if resp.status != 200:
            resp.read()
            return resp.status, None, 0, False
        if stream:
            choices = read_chat_stream(resp, cancel_after)
            if choices is None:
                return 200, None, 0, True
        else:
            choices = {}
            for choice in json.loads(resp.read())["choices"]:
                message = choice["message"]
                choices[choice["index"]] = {
                    "content": message.get("content") or "",
                    "reasoning": message.get("reasoning_content") or "",
                    "calls": [(call["function"]["name"], call["function"]["arguments"])
                              for call in message.get("tool_calls") or []],
                    "finish": choice["finish_reason"],
                    "tokens": [e["token"] for e in (choice.get("logprobs") or {}).get("content") or []]}
        answer = chat_answer(choices)
        return 200, answer, sum(len(c[4]) for c in answer), False
    finally:
        conn.close()


def check_chat(body, answer):
    """What a chat answer must be whatever the load: a JSON-schema answer that ended is a JSON
    object; a forced tool choice ended in calls with JSON-object arguments. "" when fine."""
    for content, _, calls, finish, _ in answer:
        if "response_format" in body and finish == "stop":
            try:
                if not isinstance(json.loads(content), dict):
                    return f"not a JSON object: {content!r}"
            except ValueError:
                return f"not JSON: {content!r}"
        if body.get("tool_choice") not in (None, "auto") and finish == "tool_calls":
            for _, arguments in calls:
                if not isinstance(json.loads(arguments), dict):
                    return f"arguments not an object: {arguments!r}"
    return ""


def complete_text(port, body, stream, session=None, cancel_after=None, timeout=120):
    """One request. Returns (status, answer, tokens, cancelled); answer (text, tokens) or None
    when not 200."""
    status, text, tokens, cancelled = complete(port, body, stream, session, cancel_after, timeout)
    return status, (None if text is None else (text, tokens)), len(tokens or []), cancelled


def complete(port, body, stream, session=None, cancel_after=None, timeout=120):
    """One request. Returns (status, text, tokens, cancelled); text/tokens None when not 200."""
    conn, resp = post(port, "/v1/completions", body, stream, session, timeout)
    try:
        if resp.status != 200:
            resp.read()
            return resp.status, None, None, False
        if not stream:
            out = json.loads(resp.read())
            choice = out["choices"][0]
            return 200, choice["text"], choice["logprobs"]["tokens"], False
        text, tokens, events = "", [], 0
        for event in sse_events(resp):
            for choice in event.get("choices", []):
                text += choice.get("text", "")
                if choice.get("logprobs"):
                    tokens += choice["logprobs"]["tokens"]
            events += 1
            if cancel_after is not None and events >= cancel_after:
                return 200, None, None, True  # the client hangs up mid-stream
        return 200, text, tokens, False
    finally:
        conn.close()


def delete_session(port, session):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("DELETE", "/v1/sessions/" + session)
    status = conn.getresponse().status
    conn.close()
    return status


def report(args, figures, failures, points, rss, m_start, m_end):
    """Prints the run's figures and its failures; returns the exit status. points: (heap in use,
    requests so far) at each idle point of the window; rss: resident bytes at its first and last;
    m_start, m_end: /metrics before the load and at the last idle point."""
    preemptions = m_end.get("kvserve:num_preemptions_total", 0) - \
        m_start.get("kvserve:num_preemptions_total", 0)
    used = m_end.get('kvserve:kv_cache_blocks{state="used"}', -1)
    growth = rss["end"] / rss["start"] - 1
    heap = heap_growth(points)

    print(f"soak: {args.warmup:.0f} s + {args.seconds:.0f} s, {args.clients} clients: "
          f"{figures['requests']} requests ({figures['streamed']} streamed), {figures['tokens']} "
          f"tokens checked, {figures['cancelled']} cancelled mid-stream, "
          f"{figures['session_deletes']} session deletes, {figures['429']} answered 429, "
          f"{int(preemptions)} preemptions")
    disk = {name: int(m_end.get(f"kvserve:kv_disk_{name}_total", 0) -
                      m_start.get(f"kvserve:kv_disk_{name}_total", 0))
            for name in ("writes", "reads", "hits", "write_failures", "rejected")}
    if disk["writes"] or disk["reads"]:
        print(f"soak: disk tier: {disk['writes']} blocks written, {disk['reads']} read back, "
              f"{disk['hits']} hits, {disk['write_failures']} write failures, "
              f"{disk['rejected']} rejected on read")
    window_requests = points[-1][1] - points[0][1]
    print(f"soak: blocks referenced at the end: {int(used)}; over the window's "
          f"{window_requests} requests, idle to idle: resident memory "
          f"{rss['start'] / 2**20:.2f} MiB -> {rss['end'] / 2**20:.2f} MiB ({growth * 100:+.2f}%), "
          f"heap in use {points[0][0] / 2**20:.3f} MiB -> {points[-1][0] / 2**20:.3f} MiB "
          f"({heap['bytes']:+d} bytes, {heap['per_request']:+.2f} per request); by part: "
          f"{', '.join(f'{d:+d}' for d in heap['parts'])} bytes; without the largest: "
          f"{heap['steady']:+.2f} per request")
    problems = []
    if failures:
        problems.append(f"{len(failures)} requests went wrong, e.g.:\n" +
                        "\n".join("  " + f for f in failures[:10]))
    no_heap = min(h for h, _ in points) < 0
    checks = [
        (used != 0, f"{int(used)} blocks still referenced"),
        (preemptions <= 0, "no preemption: the KV budget did not press"),
        (figures["cancelled"] == 0, "no request was cancelled mid-stream"),
        (growth > args.max_rss_growth, f"resident memory grew {growth * 100:.2f}% "
                                       f"(limit {args.max_rss_growth * 100:.1f}%)"),
        (no_heap, "no kvserve:heap_in_use_bytes in /metrics"),
        (not no_heap and heap["steady"] > args.max_heap_growth,
         f"the heap grew {heap['steady']:.2f} bytes per request in the window's parts but the "
         f"one it grew most in (limit {args.max_heap_growth:.1f})"),
    ]
    problems += [message for failed, message in checks if failed]
    for problem in problems:
        print("soak: FAIL: " + problem)
    ok = not problems
    print("soak: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server, for its memory")
    parser.add_argument("--seconds", type=float, default=60, help="the measured window")
    parser.add_argument("--warmup", type=float, default=60, help="load before the window")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pool", type=int, default=48)
    parser.add_argument("--cancel", type=float, default=0.10)
    parser.add_argument("--max-rss-growth", type=float, default=0.01)
    parser.add_argument("--max-heap-growth", type=float, default=1.0,
                        help="bytes per request, over every part of the window but one")
    parser.add_argument("--parts", type=int, default=4,
                        help="idle points cut the window into this many parts")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--chat", action="store_true",
                        help="a real model's chat pool: tools, JSON schemas, n > 1, speculation")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pool = make_chat_pool(args.pool, rng) if args.chat else make_pool(args.pool, rng)
    send = complete_chat if args.chat else complete_text

    t0 = time.time()
    reference = []
    for body in pool:
        status, answer, _, _ = send(args.port, body, stream=False)
        problem = check_chat(body, answer) if args.chat and status == 200 else ""
        if status != 200 or problem:
            print(f"soak: FAIL: reference request got {status} {problem}: {body}")
            return 1
        reference.append(answer)
    print(f"soak: reference: {len(pool)} requests alone in {time.time() - t0:.1f} s")

    lock = threading.Lock()
    figures = {"requests": 0, "tokens": 0, "cancelled": 0, "session_deletes": 0, "429": 0,
               "streamed": 0, "mismatches": 0, "errors": 0}
    failures = []
    rss = {}
    points = []  # (heap in use, requests so far) at each idle point of the window

    def rss_now():
        with open(f"/proc/{args.pid}/statm") as f:
            return int(f.read().split()[1]) * 4096

    start = time.time()
    clock = {"end": start + args.warmup + args.seconds}  # moved on by the idle point's length
    window_start = start + args.warmup
    gate = Gate(args.clients)

    def client(index):
        crng = random.Random(args.seed * 1000 + index)
        try:
            load(crng, index)
        finally:
            gate.leave()

    def load(crng, index):
        while time.time() < clock["end"]:
            gate.park()
            i = crng.randrange(len(pool))
            stream = crng.random() < 0.6
            cancel = stream and crng.random() < args.cancel / 0.6  # --cancel of all requests
            # A session holds one sequence: the server refuses one with n > 1 (a 400 by design).
            in_session = crng.random() < 0.15 and pool[i].get("n", 1) == 1
            session = f"soak-{index}-{i}" if in_session else None
            cancel_after = crng.randint(1, 8) if cancel else None
            backoff = False
            try:
                status, answer, n_tokens, cancelled = send(args.port, pool[i], stream, session,
                                                           cancel_after)
            except Exception as e:  # noqa: BLE001 - any transport failure is a finding
                with lock:
                    figures["errors"] += 1
                    failures.append(f"request {i}: {e!r}")
                continue
            if session and crng.random() < 0.7:
                delete_session(args.port, session)  # done with it (or cancelled with it)
                with lock:
                    figures["session_deletes"] += 1
            with lock:
                figures["requests"] += 1
                figures["streamed"] += stream
                if status == 429:
                    figures["429"] += 1
                    backoff = True
                elif status != 200:
                    figures["errors"] += 1
                    failures.append(f"request {i}: HTTP {status}")
                elif cancelled:
                    figures["cancelled"] += 1
                else:
                    figures["tokens"] += n_tokens
                    if answer != reference[i]:
                        figures["mismatches"] += 1
                        failures.append(f"request {i} (stream={stream}, session={session}): "
                                        f"{answer!r} != alone {reference[i]!r}")
            if backoff:  # a full queue: retry a little later, as clients do on a 429
                time.sleep(crng.uniform(0.05, 0.3))
            elif crng.random() < 0.05:
                time.sleep(crng.uniform(0.1, 0.5))  # an idle gap

    def release_sessions():
        for index in range(args.clients):
            for i in range(len(pool)):
                delete_session(args.port, f"soak-{index}-{i}")

    def idle_figures():
        """Once the engine is idle with no session pinned: (metrics, resident bytes)."""
        m = {}
        for _ in range(400):
            m = metrics(args.port)
            if (m.get("kvserve:num_requests_running") == 0 and
                    m.get("kvserve:num_requests_waiting") == 0 and
                    m.get('kvserve:kv_cache_blocks{state="used"}') == 0):
                break
            time.sleep(0.05)
        return m, rss_now()

    def idle_point():
        """Parks every client, releases the sessions, records the heap and the request count, and
        moves the load's end on by the pause."""
        paused = time.time()
        gate.close()
        release_sessions()
        m, rss_bytes = idle_figures()
        rss.setdefault("start", rss_bytes)
        with lock:
            points.append((int(m.get("kvserve:heap_in_use_bytes", -1)), figures["requests"]))
        pause = time.time() - paused
        clock["end"] += pause
        return pause

    def sampler():
        """The window's idle points but the last (which comes once the clients have stopped):
        one at its start and one after each of its --parts but the last."""
        paused = 0.0
        for part in range(args.parts):
            while time.time() < window_start + paused + part * args.seconds / args.parts:
                time.sleep(0.05)
            paused += idle_point()
            gate.open()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=sampler))
    m_start = metrics(args.port)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The last idle point: sessions left pinned by clients that kept them go too.
    release_sessions()
    m_end, rss["end"] = idle_figures()
    points.append((int(m_end.get("kvserve:heap_in_use_bytes", -1)), figures["requests"]))
    return report(args, figures, failures, points, rss, m_start, m_end)

if __name__ == "__main__":
    sys.exit(main())
