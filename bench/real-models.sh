#!/usr/bin/env bash
# kvserve against llama.cpp on the two real models (scripts/get-model.sh smollm2-135m, gemma3-270m),
# side by side in one run, alternating, ROUNDS rounds:
#   1. `kvserve bench` against `llama-bench`, both `-p 512 -n 128 -r 2 -t 2`: prefill and decode;
#   2. `kvserve bench --concurrency 16` (16 streams decoding at once through the serving engine);
#   3. `kvserve serve` against `llama-server -np 16` under the same load (scripts/loadgen.py: 16
#      streaming clients, 4 requests each, 50-word prompts, 64 tokens): tokens/s, time to first
#      token and the gaps between tokens.
# Prints one JSON line per measurement (for docs/benchmarks.md's table) and a summary of medians.
#
#   LLAMA_CPP=/path/to/llama.cpp/build/bin bench/real-models.sh [ROUNDS]
# KVSERVE (default build/kvserve), THREADS (2), MODELS ("smollm2-135m gemma3-270m").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
kvserve=${KVSERVE:-$root/build/kvserve}
llama=${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp build/bin folder}
threads=${THREADS:-2}
models=${MODELS:-"smollm2-135m gemma3-270m"}
python=${PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $(jobs -p) 2>/dev/null || true' EXIT

# emit NAME ENGINE ROUND KEY VALUE: one JSON line on stdout, kept for the summary.
emit() {
  printf '{"model":"%s","engine":"%s","round":%s,"%s":%s}\n' "$1" "$2" "$3" "$4" "$5" |
    tee -a "$out/results.jsonl"
}

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_ready() {  # URL: until /health answers 200 (both servers have it), 300 s at most
  for _ in $(seq 600); do
    if curl -fs -o /dev/null "$1/health"; then return 0; fi
    sleep 0.5
  done
  echo "real-models: $1 never became ready" >&2
  return 1
}

load() {  # NAME ENGINE ROUND URL
  local result
  result=$("$python" "$root/scripts/loadgen.py" --url "$4" --clients 16 --requests 4 --words 50 \
    --tokens 64 --json --label "$2")
  for key in chunks_per_s ttft_p50_s ttft_p99_s gap_p50_s gap_p99_s errors; do
    emit "$1" "$2" "$3" "$key" "$(echo "$result" | "$python" -c "import json,sys; print(json.load(sys.stdin)['$key'])")"
  done
}

serve_kvserve() {  # NAME FILE ROUND
  local port
  port=$(free_port)
  "$kvserve" serve -m "$2" --host 127.0.0.1 --port "$port" -t "$threads" -c 2048 \
    --max-num-seqs 16 >"$out/kvserve-serve.log" 2>&1 &
  local pid=$!
  wait_ready "http://127.0.0.1:$port"
  load "$1" kvserve "$3" "http://127.0.0.1:$port"
  kill "$pid"
  wait "$pid" || true
}

serve_llama() {  # NAME FILE ROUND
  local port
  port=$(free_port)
  # 16 slots of 2,048 tokens each, continuous batching (its default), the same threads.
  "$llama/llama-server" -m "$2" --host 127.0.0.1 --port "$port" -t "$threads" -np 16 \
    -c 32768 --no-webui >"$out/llama-server.log" 2>&1 &
  local pid=$!
  wait_ready "http://127.0.0.1:$port"
  load "$1" llama.cpp "$3" "http://127.0.0.1:$port"
  kill "$pid"
  wait "$pid" || true
}

bench_pair() {  # NAME FILE ROUND
  local json
  json=$("$kvserve" bench -m "$2" -p 512 -n 128 -r 2 -t "$threads" --concurrency 16 -o json 2>/dev/null)
  emit "$1" kvserve "$3" pp512 "$(echo "$json" | "$python" -c 'import json,sys; print([t["tokens_per_s"] for t in json.load(sys.stdin) if t["test"]=="pp512"][0])')"
  emit "$1" kvserve "$3" tg128 "$(echo "$json" | "$python" -c 'import json,sys; print([t["tokens_per_s"] for t in json.load(sys.stdin) if t["test"]=="tg128"][0])')"
  emit "$1" kvserve "$3" streams16 "$(echo "$json" | "$python" -c 'import json,sys; print([t["tokens_per_s"] for t in json.load(sys.stdin) if t["test"].endswith(" x16")][0])')"
  json=$("$llama/llama-bench" -m "$2" -p 512 -n 128 -r 2 -t "$threads" -o json 2>/dev/null)
  emit "$1" llama.cpp "$3" pp512 "$(echo "$json" | "$python" -c 'import json,sys; print([t["avg_ts"] for t in json.load(sys.stdin) if t["n_prompt"]==512][0])')"
  emit "$1" llama.cpp "$3" tg128 "$(echo "$json" | "$python" -c 'import json,sys; print([t["avg_ts"] for t in json.load(sys.stdin) if t["n_gen"]==128][0])')"
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ), kvserve $(git -C "$root" rev-parse --short HEAD), llama.cpp $(git -C "$llama/../.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" >&2
for round in $(seq "$rounds"); do
  for name in $models; do
    file=$("$root/scripts/get-model.sh" "$name")
    # Alternate which engine goes first, so that neither always meets the other's after-effects.
    if [ $((round % 2)) -eq 1 ]; then
      bench_pair "$name" "$file" "$round"
      serve_kvserve "$name" "$file" "$round"
      serve_llama "$name" "$file" "$round"
    else
      serve_llama "$name" "$file" "$round"
      serve_kvserve "$name" "$file" "$round"
      bench_pair "$name" "$file" "$round"
    fi
  done
done

"$python" - "$out/results.jsonl" <<'EOF' >&2
import collections, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
values = collections.defaultdict(list)
for r in rows:
    key = next(k for k in r if k not in ("model", "engine", "round"))
    values[(r["model"], key, r["engine"])].append(float(r[key]))
print("median over rounds: model / figure: kvserve | llama.cpp | ratio")
for (model, key, engine) in sorted(values):
    if engine != "kvserve":
        continue
    k = statistics.median(values[(model, key, "kvserve")])
    other = values.get((model, key, "llama.cpp"))
    if other:
        l = statistics.median(other)
        print(f"{model} {key}: {k:.3f} | {l:.3f} | {k / l if l else float('nan'):.2f}x")
    else:
        print(f"{model} {key}: {k:.3f}")
EOF
