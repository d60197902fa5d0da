#!/usr/bin/env python3
"""Latency under load for any OpenAI-compatible server (kvserve, llama-server, vLLM, ...),
standard library only.

--clients threads start together (a barrier); each sends --requests streamed completions one
after another, a prompt of --words words (its own seeded words, so clients share no prefix) and
max_tokens --tokens (ignore_eos set, temperature 0). Every SSE chunk that carries text is a token
arrival. Printed: p50/p99 of the time to first token (request sent to first text chunk), of the
gap between a stream's consecutive text chunks, and the total wall time, with tokens per second.

  scripts/loadgen.py --url http://127.0.0.1:8080 --clients 16 --words 50 --tokens 64
"""
import argparse
import http.client
import json
import math
import random
import sys
import threading
import time
import urllib.parse

WORDS = ("the a of and to in is was for on with as by at from that this it be are or an not "
         "river stone light house garden window morning winter city road music paper table "
         "story friend forest market letter summer mountain ocean bridge train cloud dream "
         "quiet bright early slow green golden small heavy gentle sudden open empty warm old "
         "walks finds keeps turns holds opens carries remembers watches builds follows sings").split()


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def prompt_for(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def one_request(url, args, prompt):
    """Sends one streamed completion. Returns (ttft_s, [gap_s...], n_chunks, error or None)."""
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=args.timeout)
    body = {"prompt": prompt, "max_tokens": args.tokens, "stream": True, "temperature": 0,
            "ignore_eos": True}
    if args.model:
        body["model"] = args.model
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    start = time.monotonic()
    try:
        conn.request("POST", parsed.path.rstrip("/") + "/v1/completions", json.dumps(body), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return None, [], 0, "HTTP %d: %s" % (resp.status, resp.read()[:200])
        arrivals = []
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            choices = event.get("choices") or []
            if choices and choices[0].get("text"):
                arrivals.append(time.monotonic())
        if not arrivals:
            return None, [], 0, "no text chunk"
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        return arrivals[0] - start, gaps, len(arrivals), None
    except (OSError, http.client.HTTPException, ValueError) as e:
        return None, [], 0, repr(e)
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL (loopback)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent streaming clients")
    ap.add_argument("--requests", type=int, default=1, help="requests per client, in sequence")
    ap.add_argument("--words", type=int, default=50, help="words per prompt")
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens per request")
    ap.add_argument("--model", default="", help="model name to send (some servers need one)")
    ap.add_argument("--api-key", default="", help="Bearer key, if the server wants one")
    ap.add_argument("--seed", type=int, default=1, help="seed of the prompts' words")
    ap.add_argument("--timeout", type=float, default=600, help="socket timeout, seconds")
    ap.add_argument("--label", default="", help="a name printed with the results")
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = ap.parse_args()
    if args.clients < 1 or args.requests < 1 or args.words < 1 or args.tokens < 1:
        ap.error("--clients, --requests, --words and --tokens must be at least 1")

    rng = random.Random(args.seed)
    prompts = [[prompt_for(rng, args.words) for _ in range(args.requests)]
               for _ in range(args.clients)]
    ttfts, gaps, errors = [], [], []
    chunks = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(args.clients + 1)

    def client(i):
        barrier.wait()
        for prompt in prompts[i]:
            ttft, g, n, err = one_request(args.url, args, prompt)
            with lock:
                if err:
                    errors.append(err)
                else:
                    ttfts.append(ttft)
                    gaps.extend(g)
                    chunks[0] += n

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.monotonic()
    for t in threads:
        t.join()
    total = time.monotonic() - start

    result = {
        "label": args.label, "clients": args.clients, "requests": args.clients * args.requests,
        "words": args.words, "tokens": args.tokens, "errors": len(errors),
        "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
        "gap_p50_s": percentile(gaps, 50), "gap_p99_s": percentile(gaps, 99),
        "gap_max_s": max(gaps) if gaps else float("nan"),
        "total_s": total, "chunks": chunks[0], "chunks_per_s": chunks[0] / total if total else 0,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print("%s%d clients x %d requests, %d words, %d tokens: total %.2f s, %d text chunks "
              "(%.1f/s), errors %d" % (args.label + ": " if args.label else "", args.clients,
                                       args.requests, args.words, args.tokens, total, chunks[0],
                                       result["chunks_per_s"], len(errors)))
        print("  TTFT  p50 %.3f s  p99 %.3f s" % (result["ttft_p50_s"], result["ttft_p99_s"]))
        print("  gap   p50 %.3f s  p99 %.3f s  max %.3f s" %
              (result["gap_p50_s"], result["gap_p99_s"], result["gap_max_s"]))
    for err in errors[:5]:
        print("  error: " + err, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
