#!/usr/bin/env python3
"""An agent loop's repeated request against a running `kvserve serve`: the same chat request
(a summary of a tool's output) sent twice in a row, greedy, for three slightly different tool
calls. Prints each pair's wall times and the repeat's drafted and accepted tokens.

    python3 bench/history_repeat.py PORT MODEL_ID LABEL
(bench/history-repeat.sh starts the servers with and without --spec history, alternating.)"""
import json
import sys
import time
import urllib.request

port, model, label = int(sys.argv[1]), sys.argv[2], sys.argv[3]
TOOL_OUTPUT = ("The weather service returned: Berlin, 4 December 2026, cloudy with light rain in "
               "the afternoon, high of 6 degrees, low of 2 degrees, wind from the west at 15 km/h, "
               "humidity 82 percent, sunrise 08:05, sunset 15:53.")


def call(body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.time()
    reply = json.load(urllib.request.urlopen(request))
    return time.time() - start, reply


for call_round in range(3):
    body = {"model": model, "temperature": 0, "max_tokens": 96,
            "messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "Summarise this for me in two sentences: " +
                          TOOL_OUTPUT + f" (call {call_round})"}]}
    first_s, first = call(body)
    repeat_s, repeat = call(body)
    usage = repeat["usage"]
    same = first["choices"][0]["message"] == repeat["choices"][0]["message"]
    print(f"{label}: call {call_round}: first {first_s * 1000:.0f} ms, repeat "
          f"{repeat_s * 1000:.0f} ms, {usage['completion_tokens']} tokens, drafted "
          f"{usage.get('drafted_tokens', 0)}, accepted {usage.get('accepted_tokens', 0)}, "
          f"same answer {same}")
