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
   only error status is 429 (a full queue); at the end no block is referenced (/metrics). Between
   the two idle points resident memory grows by at most --max-rss-growth, and the bytes the
   allocator has handed out (kvserve:heap_in_use_bytes) by at most --max-heap-growth per request.
   The warm-up is there because both keep high-water marks that are not leaks: resident memory
   the allocator's fragmentation, the heap the forward pass's workspace, which grows to the
   largest step yet seen (0.3 MiB between 30 s and 90 s of this load). Prints the figures; exits
   1 on any failure.
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


def complete(port, body, stream, session=None, cancel_after=None, timeout=120):
    """One request. Returns (status, text, tokens, cancelled); text/tokens None when not 200."""
    body = dict(body)
    if session:
        body["session_id"] = session
    body["stream"] = stream
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read()
            return resp.status, None, None, False
        if not stream:
            out = json.loads(resp.read())
            choice = out["choices"][0]
            return 200, choice["text"], choice["logprobs"]["tokens"], False
        text, tokens, events = "", [], 0
        while True:
            line = resp.fp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            event = json.loads(data)
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
    parser.add_argument("--max-heap-growth", type=float, default=1.0, help="bytes per request")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pool = make_pool(args.pool, rng)

    t0 = time.time()
    reference = []
    for body in pool:
        status, text, tokens, _ = complete(args.port, body, stream=False)
        if status != 200:
            print(f"soak: FAIL: reference request got {status}: {body}")
            return 1
        reference.append((text, tokens))
    print(f"soak: reference: {len(pool)} requests alone in {time.time() - t0:.1f} s")

    lock = threading.Lock()
    figures = {"requests": 0, "tokens": 0, "cancelled": 0, "session_deletes": 0, "429": 0,
               "streamed": 0, "mismatches": 0, "errors": 0}
    failures = []
    rss, heap, counts = {}, {}, {}

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
            session = f"soak-{index}-{i}" if crng.random() < 0.15 else None
            cancel_after = crng.randint(1, 8) if cancel else None
            try:
                status, text, tokens, cancelled = complete(args.port, pool[i], stream, session,
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
                elif status != 200:
                    figures["errors"] += 1
                    failures.append(f"request {i}: HTTP {status}")
                elif cancelled:
                    figures["cancelled"] += 1
                else:
                    figures["tokens"] += len(tokens)
                    if (text, tokens) != reference[i]:
                        figures["mismatches"] += 1
                        failures.append(f"request {i} (stream={stream}, session={session}): "
                                        f"{text!r} != alone {reference[i][0]!r}")
            if crng.random() < 0.05:
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

    def sampler():
        while time.time() < window_start:
            time.sleep(0.05)
        paused = time.time()
        gate.close()
        release_sessions()
        m, rss["start"] = idle_figures()
        heap["start"] = int(m.get("kvserve:heap_in_use_bytes", -1))
        with lock:
            counts["start"] = figures["requests"]
        clock["end"] += time.time() - paused
        gate.open()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=sampler))
    m_start = metrics(args.port)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The second idle point: sessions left pinned by clients that kept them go too.
    release_sessions()
    m_end, rss["end"] = idle_figures()
    heap["end"] = int(m_end.get("kvserve:heap_in_use_bytes", -1))
    window_requests = figures["requests"] - counts["start"]
    preemptions = m_end.get("kvserve:num_preemptions_total", 0) - \
        m_start.get("kvserve:num_preemptions_total", 0)
    used = m_end.get('kvserve:kv_cache_blocks{state="used"}', -1)
    growth = rss["end"] / rss["start"] - 1
    heap_growth = heap["end"] - heap["start"]
    heap_per_request = heap_growth / max(1, window_requests)

    print(f"soak: {args.warmup:.0f} s + {args.seconds:.0f} s, {args.clients} clients: "
          f"{figures['requests']} requests ({figures['streamed']} streamed), {figures['tokens']} "
          f"tokens checked, {figures['cancelled']} cancelled mid-stream, "
          f"{figures['session_deletes']} session deletes, {figures['429']} answered 429, "
          f"{int(preemptions)} preemptions")
    print(f"soak: blocks referenced at the end: {int(used)}; over the window's "
          f"{window_requests} requests, idle to idle: resident memory "
          f"{rss['start'] / 2**20:.2f} MiB -> {rss['end'] / 2**20:.2f} MiB ({growth * 100:+.2f}%), "
          f"heap in use {heap['start'] / 2**20:.3f} MiB -> {heap['end'] / 2**20:.3f} MiB "
          f"({heap_growth:+d} bytes, {heap_per_request:+.2f} per request)")
    problems = []
    if failures:
        problems.append(f"{len(failures)} requests went wrong, e.g.:\n" +
                        "\n".join("  " + f for f in failures[:10]))
    no_heap = heap["start"] < 0 or heap["end"] < 0
    checks = [
        (used != 0, f"{int(used)} blocks still referenced"),
        (preemptions <= 0, "no preemption: the KV budget did not press"),
        (figures["cancelled"] == 0, "no request was cancelled mid-stream"),
        (growth > args.max_rss_growth, f"resident memory grew {growth * 100:.2f}% "
                                       f"(limit {args.max_rss_growth * 100:.1f}%)"),
        (no_heap, "no kvserve:heap_in_use_bytes in /metrics"),
        (not no_heap and heap_per_request > args.max_heap_growth,
         f"the heap grew {heap_per_request:.2f} bytes per request "
         f"(limit {args.max_heap_growth:.1f})"),
    ]
    problems += [message for failed, message in checks if failed]
    for problem in problems:
        print("soak: FAIL: " + problem)
    ok = not problems
    print("soak: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
