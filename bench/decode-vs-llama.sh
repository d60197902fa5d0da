#!/usr/bin/env bash
# Decode at batch 1, kvserve against llama.cpp, side by side in one run: ROUNDS rounds over every
# FILE, alternating which engine goes first, both `-p 0 -n 128 -r 2 -t 2`:
#   kvserve bench -m FILE -p 0 -n 128 -r 2 -t 2 -o json   (its bandwidth probe runs first)
#   llama-bench   -m FILE -p 0 -n 128 -r 2 -t 2 -o json
# Prints one JSON line per measurement, then per file the medians, their ratio and each engine's
# bytes per second as a share of the round's probe (weights read per token x tokens/s).
#
#   LLAMA_CPP=/path/to/llama.cpp/build/bin bench/decode-vs-llama.sh ROUNDS FILE...
# KVSERVE (default build/kvserve), THREADS (2), N_GEN (128). N_PROMPT=N times prefill instead:
# both engines `-p N -n 0`, and the table's t/s are prompt tokens per second (no probe shares).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:?usage: decode-vs-llama.sh ROUNDS FILE...}
shift
kvserve=${KVSERVE:-$root/build/kvserve}
llama=${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp build/bin folder}
threads=${THREADS:-2}
n_gen=${N_GEN:-128}
n_prompt=${N_PROMPT:-0}
if ((n_prompt > 0)); then n_gen=0; fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run_kvserve() {  # FILE ROUND
  "$kvserve" bench -m "$1" -p "$n_prompt" -n "$n_gen" -r 2 -t "$threads" -o json 2>/dev/null |
    python3 -c 'import json,sys
r = json.load(sys.stdin)[0]
print(json.dumps({"file": sys.argv[1], "engine": "kvserve", "round": int(sys.argv[2]),
                  "tg": r["tokens_per_s"], "probe_gb_s": r["bandwidth_gb_s"],
                  "weight_bytes": r["weight_bytes_per_token"],
                  "decode_tiles": r.get("decode_tiles", "")}))' "$1" "$2" | tee -a "$out"
}

run_llama() {  # FILE ROUND
  "$llama/llama-bench" -m "$1" -p "$n_prompt" -n "$n_gen" -r 2 -t "$threads" -o json 2>/dev/null |
    python3 -c 'import json,sys
r = json.load(sys.stdin)[0]
print(json.dumps({"file": sys.argv[1], "engine": "llama.cpp", "round": int(sys.argv[2]),
                  "tg": r["avg_ts"]}))' "$1" "$2" | tee -a "$out"
}

for round in $(seq "$rounds"); do
  for file in "$@"; do
    if ((round % 2)); then
      run_kvserve "$file" "$round"
      run_llama "$file" "$round"
    else
      run_llama "$file" "$round"
      run_kvserve "$file" "$round"
    fi
  done
done

python3 - "$out" "$n_prompt" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
test = f"pp{sys.argv[2]}" if int(sys.argv[2]) > 0 else "tg"
print(f"\n| file | kvserve {test} t/s (median) | llama.cpp {test} t/s (median) | ratio | kvserve % of probe | llama.cpp % of probe | rounds kvserve ahead |")
print("|---|---:|---:|---:|---:|---:|---:|")
for f in dict.fromkeys(r["file"] for r in rows):
    k = {r["round"]: r for r in rows if r["file"] == f and r["engine"] == "kvserve"}
    l = {r["round"]: r for r in rows if r["file"] == f and r["engine"] == "llama.cpp"}
    rounds = sorted(set(k) & set(l))
    kt = statistics.median(k[i]["tg"] for i in rounds)
    lt = statistics.median(l[i]["tg"] for i in rounds)
    share = lambda tg, i: tg * k[i]["weight_bytes"] / (k[i]["probe_gb_s"] * 1e9) * 100
    ks = statistics.median(share(k[i]["tg"], i) for i in rounds)
    ls = statistics.median(share(l[i]["tg"], i) for i in rounds)
    ahead = sum(k[i]["tg"] > l[i]["tg"] for i in rounds)
    shares = f"{ks:.0f}% | {ls:.0f}%" if test == "tg" else "- | -"
    print(f"| {f.split('/')[-1]} | {kt:.1f} | {lt:.1f} | {kt/lt:.2f}x | {shares} | {ahead} of {len(rounds)} |")
PY
