#!/usr/bin/env python3
"""Speculative decoding side by side: kvserve serve and llama-server, each plain and with its
n-gram speculation, on the speculative bench's chat tasks (`kvserve bench --spec-print-tasks`),
one request at a time, greedy (or seeded sampling: temperature 0.8, top-p 0.95, seed 1000 + the
stream's index), alternating the servers round by round.

    python3 bench/spec_vs_llama.py MODEL.gguf LLAMA_SERVER [--rounds 2] [--max-tokens 128]
        [--chat-template NAME] [--llama-spec ngram-simple,ngram-map-k,ngram-mod] [--streams N]
        [--engines kvserve,llama.cpp] [--sampling greedy|seeded]

With --streams N, each task's conversations are sent N at a time (llama-server gets -np N slots)
and the rate is the streams' tokens after their first over the time from the earliest first token
to the latest last one. --engines kvserve (or llama.cpp) runs one engine only.

Decode rate per request: (completion tokens - 1) / (time of the last streamed token - time of the
first), so the prompt's processing is left out on both sides. Prints a table per task: each
configuration's median rate, its speed-up over its own engine's plain decoding, and whether its
answers equal its engine's plain answers, and the share of its engine's plain answers' tokens that
end a 4-token span already seen in the conversation or the answer before them (`repeats`, as
`kvserve bench --spec` counts them; tokens by `kvserve tokenize`): what n-gram drafting could draft
at best, since each engine speculates on its own plain answers.

Every server's prompts (POST /apply-template) must equal the first server's, conversation by
conversation, or the run stops: a template one engine renders otherwise (llama-server in Jinja
mode takes a built-in name such as "gemma" as the template's text) would time answers to other
prompts. With --chat-template, llama-server runs with --no-jinja to use its built-in template."""
import argparse
import concurrent.futures
import json
import os
import signal
import statistics
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KVSERVE = os.path.join(ROOT, "build", "kvserve")
PORT = 18190
MODEL_ID = ""  # kvserve serves the file name without .gguf; llama-server takes any


def wait_ready(proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError("server not ready")


def json_post(path, body):
    """A POST of `body` as JSON to the running server's `path`."""
    return urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})


def stream_chat(messages, max_tokens, seed=None):
    """One streamed chat request: greedy, or seeded sampling (temperature 0.8, top-p 0.95)."""
    body = {"model": MODEL_ID, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    if seed is not None:
        body.update({"temperature": 0.8, "top_p": 0.95, "seed": seed})
    request = json_post("/v1/chat/completions", body)
    text, first, last, tokens = "", None, None, None
    with urllib.request.urlopen(request, timeout=600) as reply:
        for raw in reply:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", []):
                piece = choice.get("delta", {}).get("content") or ""
                if piece:
                    now = time.time()
                    first = first or now
                    last = now
                    text += piece
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return text, tokens or 0, first, last


def rendered_prompts(tasks):
    """The running server's prompt text for every conversation (POST /apply-template)."""
    prompts = {}
    for task, conversations in tasks.items():
        for i, messages in enumerate(conversations):
            request = json_post("/apply-template", {"messages": messages})
            with urllib.request.urlopen(request, timeout=60) as reply:
                prompts[(task, i)] = json.loads(reply.read())["prompt"]
    return prompts


def check_same_prompts(prompts, reference, label):
    """Stops the run where a server renders a conversation otherwise than the first one did:
    its answers would be to another prompt, and the speed-ups not comparable."""
    for key, prompt in prompts.items():
        if prompt != reference[key]:
            raise SystemExit(f"{label} renders {key[0]} conversation {key[1]} as {prompt[:80]!r}, "
                             f"not as the first server did ({reference[key][:80]!r}); "
                             "pass the template both understand with --chat-template")


def aggregate_rate(results):
    """Decode tokens/s of streams run together: their tokens after the first over the time from
    the earliest first token to the latest last token (one stream: its own decode rate)."""
    timed = [(tokens, first, last) for _, tokens, first, last in results if first and last]
    if not timed:
        return 0.0
    span = max(last for _, _, last in timed) - min(first for _, first, _ in timed)
    return sum(tokens - 1 for tokens, _, _ in timed) / span if span > 0 else 0.0


def token_ids(model, text):
    out = subprocess.check_output([KVSERVE, "tokenize", "-m", model, "--text", text])
    return [int(t) for t in out.decode().replace(",", " ").replace("[", " ").replace("]", " ").split()]


def repeated_share(model, messages, answer, span=4):
    """The share of the answer's tokens that end a `span`-token run already seen earlier in the
    conversation's contents or the answer (kvserve's RepeatedPositions, over the texts' tokens)."""
    prompt = token_ids(model, "\n".join(m["content"] for m in messages))
    output = token_ids(model, answer) if answer else []
    tokens = prompt + output
    repeated = 0
    for j in range(len(prompt), len(tokens)):
        start = j + 1 - span
        if start < 0:
            continue
        window = tokens[start:j + 1]
        if any(tokens[e:e + span] == window for e in range(start)):
            repeated += 1
    return repeated / len(output) if output else 0.0


def configs(args):
    kv = [KVSERVE, "serve", "-m", args.model, "--port", str(PORT), "-t", "2"]
    lc = [args.llama_server, "-m", args.model, "--port", str(PORT), "-t", "2",
          "-c", str(4096 * args.streams), "-np", str(args.streams), "--no-webui"]
    if args.chat_template:
        kv += ["--chat-template", args.chat_template]
        # A built-in template name: llama-server's Jinja mode (its default) would take the name as
        # the template's text and render every conversation as the bare word ("gemma").
        lc += ["--no-jinja", "--chat-template", args.chat_template]
    out = [("kvserve", "plain", kv + ["--spec", "none"]), ("kvserve", "ngram", kv + ["--spec", "ngram"]),
           ("llama.cpp", "plain", lc)]
    for spec in args.llama_spec.split(","):
        out.append(("llama.cpp", spec, lc + ["--spec-type", spec]))
    return [c for c in out if c[0] in args.engines.split(",")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("llama_server")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--chat-template", default="")
    parser.add_argument("--llama-spec", default="ngram-simple,ngram-map-k,ngram-mod")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--engines", default="kvserve,llama.cpp")
    parser.add_argument("--sampling", choices=["greedy", "seeded"], default="greedy")
    args = parser.parse_args()
    global MODEL_ID
    MODEL_ID = os.path.basename(args.model).removesuffix(".gguf")
    tasks = json.loads(subprocess.check_output([KVSERVE, "bench", "--spec-print-tasks"]))
    rates, answers, reference = {}, {}, None
    for _ in range(args.rounds):
        for engine, spec, command in configs(args):
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_ready(proc)
                prompts = rendered_prompts(tasks)
                reference = reference or prompts
                check_same_prompts(prompts, reference, f"{engine} {spec}")
                for task, conversations in tasks.items():
                    for i, messages in enumerate(conversations):
                        def one(stream):
                            seed = 1000 + stream if args.sampling == "seeded" else None
                            return stream_chat(messages, args.max_tokens, seed)
                        with concurrent.futures.ThreadPoolExecutor(args.streams) as pool:
                            results = list(pool.map(one, range(args.streams)))
                        rates.setdefault((engine, spec, task), []).append(
                            aggregate_rate(results))
                        for stream, (text, _, _, _) in enumerate(results):
                            answers.setdefault((engine, spec, task, i, stream), set()).add(text)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
    repeats = {}
    for (engine, spec, task, i, stream), texts in answers.items():
        if spec == "plain":
            share = repeated_share(args.model, tasks[task][i], sorted(texts)[0])
            repeats.setdefault((engine, task), []).append(share)
    print("| task | engine | speculation | decode t/s (median) | speed-up over its plain | same answers as its plain | its plain answers' repeats |")
    print("|---|---|---|---:|---:|:---:|---:|")
    for task in tasks:
        for engine, spec, _ in configs(args):
            rate = statistics.median(rates[(engine, spec, task)])
            plain = statistics.median(rates[(engine, "plain", task)])
            same = all(answers[(engine, spec, task, i, s)] == answers[(engine, "plain", task, i, s)]
                       for i in range(len(tasks[task])) for s in range(args.streams))
            share = statistics.mean(repeats[(engine, task)])
            print(f"| {task} | {engine} | {spec} | {rate:.1f} | {rate / plain:.2f}x | "
                  f"{'yes' if same else 'no'} | {100 * share:.0f}% |")


if __name__ == "__main__":
    main()
