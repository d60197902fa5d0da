#!/usr/bin/env python3
"""A second chat turn's time to first token against a running OpenAI-compatible server
(`kvserve serve` or `llama-server`): turn 1 sends a long prompt (about 1000 tokens of
pseudo-text, different in each round so rounds never share a prefix) and takes a 16-token
answer, greedy; turn 2 sends turn 1's prompt, its answer and a new question, and asks one
token, so its wall time is the second turn's time to first token. Prints both times and how many
prompt tokens the server says it took from its cache (kvserve's usage.prompt_tokens_details,
llama-server's timings.cache_n).

    python3 bench/second_turn_ttft.py PORT LABEL [ROUNDS]
(bench/second-turn-ttft.sh starts kvserve with and without its prefix cache and llama-server.)"""
import json
import random
import sys
import time
import urllib.request

port, label = int(sys.argv[1]), sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
WORDS = ("the river stone light morning garden window letter market forest engine signal "
         "harbor paper winter summer valley bridge candle orbit lantern meadow copper").split()


def complete(prompt, max_tokens):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": False}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.time()
    reply = json.load(urllib.request.urlopen(request, timeout=600))
    return time.time() - start, reply


def cached(reply):
    details = reply.get("usage", {}).get("prompt_tokens_details") or {}
    if "cached_tokens" in details:
        return details["cached_tokens"]
    return reply.get("timings", {}).get("cache_n", -1)


complete("warm up", 1)
for r in range(rounds):
    rng = random.Random(1000 + r)
    first = " ".join(rng.choice(WORDS) for _ in range(900)) + "\nQuestion: what happened?\n"
    first_s, reply = complete(first, 16)
    answer = reply["choices"][0]["text"]
    second = first + answer + "\nQuestion: and after that?\n"
    second_s, reply2 = complete(second, 1)
    print(f"{label}: round {r}: turn 1 {first_s * 1000:.0f} ms "
          f"({reply['usage']['prompt_tokens']} prompt tokens), turn 2 time to first token "
          f"{second_s * 1000:.0f} ms ({reply2['usage']['prompt_tokens']} prompt tokens, "
          f"{cached(reply2)} from the cache)", flush=True)
