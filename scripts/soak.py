#!/usr/bin/env python3
"""Soak client for `kvserve serve` (issue 17), standard library only; scripts/soak.sh runs it.

1. Reference: every request of a fixed, seeded pool is sent alone, one after another; its text
   and tokens are what it must give later under any load.
2. Load, for --seconds: --clients threads send requests of the pool (mixed prompt and output
   lengths, shared prefixes, streamed or not, some in sessions), with idle gaps; --cancel of them
   are cancelled at a random point (the client disconnects mid-stream, or its session is
   DELETEd). The server's KV budget is small, so sequences are preempted.
3. Checks: every request that was not cancelled gives exactly its reference text and tokens; the
   only error status is 429 (a full queue); at the end no block is referenced (/metrics), and
   resident memory grew by at most --max-rss-growth between the start and the end of the second
   half of the load. Prints the figures; exits 1 on any failure.
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
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pool", type=int, default=48)
    parser.add_argument("--cancel", type=float, default=0.10)
    parser.add_argument("--max-rss-growth", type=float, default=0.01)
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
    rss = {}

    def rss_now():
        with open(f"/proc/{args.pid}/statm") as f:
            return int(f.read().split()[1]) * 4096

    start = time.time()
    end = start + args.seconds
    half = start + args.seconds / 2

    def client(index):
        crng = random.Random(args.seed * 1000 + index)
        while time.time() < end:
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

    def sampler():
        while time.time() < half:
            time.sleep(0.05)
        rss["second_half_start"] = rss_now()
        while time.time() < end:
            time.sleep(0.05)
        rss["second_half_end"] = rss_now()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    threads.append(threading.Thread(target=sampler))
    m_start = metrics(args.port)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Sessions left pinned by clients that kept them: release them, then the engine must be idle.
    for index in range(args.clients):
        for i in range(len(pool)):
            delete_session(args.port, f"soak-{index}-{i}")
    m_end = {}
    for _ in range(200):
        m_end = metrics(args.port)
        if (m_end.get("kvserve:num_requests_running") == 0 and
                m_end.get("kvserve:num_requests_waiting") == 0 and
                m_end.get('kvserve:kv_cache_blocks{state="used"}') == 0):
            break
        time.sleep(0.05)
    preemptions = m_end.get("kvserve:num_preemptions_total", 0) - \
        m_start.get("kvserve:num_preemptions_total", 0)
    used = m_end.get('kvserve:kv_cache_blocks{state="used"}', -1)
    growth = rss["second_half_end"] / rss["second_half_start"] - 1

    print(f"soak: {args.seconds:.0f} s, {args.clients} clients: {figures['requests']} requests "
          f"({figures['streamed']} streamed), {figures['tokens']} tokens checked, "
          f"{figures['cancelled']} cancelled mid-stream, {figures['session_deletes']} session "
          f"deletes, {figures['429']} answered 429, {int(preemptions)} preemptions")
    print(f"soak: blocks referenced at the end: {int(used)}; resident memory "
          f"{rss['second_half_start'] / 2**20:.1f} MiB -> {rss['second_half_end'] / 2**20:.1f} MiB "
          f"over the second half ({growth * 100:+.2f}%)")
    ok = True
    if failures:
        ok = False
        print(f"soak: FAIL: {len(failures)} requests went wrong, e.g.:")
        for f in failures[:10]:
            print("  " + f)
    if used != 0:
        ok = False
        print(f"soak: FAIL: {int(used)} blocks still referenced")
    if preemptions <= 0:
        ok = False
        print("soak: FAIL: no preemption: the KV budget did not press")
    if figures["cancelled"] == 0:
        ok = False
        print("soak: FAIL: no request was cancelled mid-stream")
    if growth > args.max_rss_growth:
        ok = False
        print(f"soak: FAIL: resident memory grew {growth * 100:.2f}% "
              f"(limit {args.max_rss_growth * 100:.1f}%)")
    print("soak: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
