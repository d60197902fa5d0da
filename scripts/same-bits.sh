#!/usr/bin/env bash
# Compares two kvserve binaries output for output: logits of the reference token sequences in the
# batch, incremental and no-cache modes (f32, f16, q8_0 and q4_0 weights, and llama.cpp's Q4_K_M,
# Q5_K_M and Q6_K files; f32 and f16 KV), generated text (greedy, seeded, no-cache), and the serving
# engine's tokens for 16 requests at once, with prefix-cache hits, chunked prefill and preemption
# under a small KV pool. Every output must be the
# same bytes. Use it around a refactor that must not change a number:
#   git stash; scripts/build.sh; cp build/kvserve /tmp/kvserve-old; git stash pop; scripts/build.sh
#   scripts/same-bits.sh /tmp/kvserve-old build/kvserve
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: scripts/same-bits.sh OLD_KVSERVE NEW_KVSERVE" >&2; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
models=../shared/models
ref=../shared/reference
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

stories=$models/stories260K.gguf
gpt2=$models/gpt2-tiny-f32.gguf
for type in f16 q8_0 q4_0; do
  "$new" convert -m "$stories" -o "$work/stories-$type.gguf" --type "$type" >/dev/null 2>&1
done
"$new" convert -m "$gpt2" -o "$work/gpt2-q8_0.gguf" --type q8_0 >/dev/null 2>&1

tokens_of() {  # prompt + greedy tokens of a reference case, comma separated
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(",".join(map(str, j["prompt_tokens"] + j["greedy_tokens"][:24])))' "$1"
}
stories_tokens=$(tokens_of "$ref/stories260K-a.json")
gpt2_tokens=$(tokens_of "$ref/gpt2-tiny-a.json")

requests=$work/requests.jsonl
python3 - "$requests" <<'EOF'
import json, sys
prompts = ["Once upon a time", "Once upon a time, there was a little", "The dog", "Lily and Ben",
           "Once upon a time, there was a little girl named Lily. She loved to play"]
with open(sys.argv[1], "w") as f:
    for i in range(16):
        r = {"id": f"r{i}", "prompt": prompts[i % len(prompts)], "max_tokens": 24 + (i % 5) * 7}
        if i % 3 == 0:
            r["temperature"] = 0
        else:
            r.update(temperature=0.9, top_p=0.95, seed=100 + i)
        if i % 4 == 1:
            r["repetition_penalty"] = 1.1
        f.write(json.dumps(r) + "\n")
EOF

# Each case is the command's arguments separated by '|'; @OUT@ stands for a logits output file.
cases=()
add() { local IFS='|'; cases+=("$*"); }
for m in "$stories" "$work/stories-f16.gguf" "$work/stories-q8_0.gguf" "$work/stories-q4_0.gguf"; do
  for mode in batch incremental no-cache; do
    add logits -m "$m" --tokens "$stories_tokens" --mode $mode --out @OUT@
  done
done
for m in "$gpt2" "$work/gpt2-q8_0.gguf"; do
  for mode in batch incremental no-cache; do
    add logits -m "$m" --tokens "$gpt2_tokens" --mode $mode --out @OUT@
  done
done
add logits -m "$stories" --tokens "$stories_tokens" --mode incremental --kv-type f16 --out @OUT@
# K-quant files made by llama.cpp (the packed x16 tiles; Q4_K_M mixes Q4_K and Q6_K).
arch_tokens=$(tokens_of "$ref/arch/llama3-q4_k_m.json")
for q in q4_k_m q5_k_m q6_k; do
  for mode in batch incremental no-cache; do
    add logits -m "$models/arch/llama3-$q.gguf" --tokens "$arch_tokens" --mode $mode --out @OUT@
  done
done
# Every architecture's random-weight files (llama.cpp's conversions): biases (qwen2), per-head q/k
# norms (qwen3, gemma3, qwen3moe), fused QKV and gate/up (phi3), sliding windows and soft-caps
# (gemma2, gemma3), experts (qwen3moe).
for arch in gemma2 gemma3 phi3 qwen2 qwen3 qwen3moe; do
  for q in f32 q4_k_m; do
    for mode in batch incremental; do
      add logits -m "$models/arch/$arch-$q.gguf" --tokens "$(tokens_of "$ref/arch/$arch-$q.json")" \
        --mode $mode --out @OUT@
    done
  done
done
# The real models, where scripts/get-model.sh has fetched them.
for m in models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf; do
  [ -f "$m" ] && add run -m "$m" -p "The capital of France is" -n 24 --temp 0
done
for m in "$stories" "$work/stories-q4_0.gguf"; do
  add run -m "$m" -p "Once upon a time" -n 48 --temp 0
  add run -m "$m" -p "Once upon a time" -n 48 --temp 0.8 --seed 7
  add run -m "$m" -p "Once upon a time" -n 32 --temp 0 --no-cache
  add run -m "$m" -p "Once upon a time" -n 32 --temp 0 --kv-type f16
  add run -m "$m" --batch-file "$requests"
  add run -m "$m" --batch-file "$requests" --max-batched-tokens 7 --block-size 8
  add run -m "$m" --batch-file "$requests" --kv-memory 160KiB --block-size 8 --max-num-seqs 16
done
add run -m "$gpt2" --batch-file "$requests"

# Batch results carry wall-clock timings, and how many prompt tokens came from the prefix cache
# depends on which step each request arrived in: drop both before comparing (the tokens may not
# depend on either).
strip_timings() {
  python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line); j.pop("timings", None); j.pop("cached_tokens", None); print(json.dumps(j, sort_keys=True))'
}

run_case() {  # binary, case, output file (logits go to the file plus .f32)
  local -a argv
  IFS='|' read -r -a argv <<<"${2//@OUT@/$3.f32}"
  if [[ $2 == *--batch-file* ]]; then
    "$1" "${argv[@]}" 2>/dev/null | strip_timings >"$3"
  else
    "$1" "${argv[@]}" >"$3" 2>/dev/null
  fi
}

passed=0
failed=0
i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  same=1
  # A binary that refuses a case (an older one without K-quants, say) fails that case only.
  if ! run_case "$old" "$c" "$work/old-$i"; then same=0; echo "FAILED (old): kvserve ${c//|/ }" >&2; fi
  if ! run_case "$new" "$c" "$work/new-$i"; then same=0; echo "FAILED (new): kvserve ${c//|/ }" >&2; fi
  cmp -s "$work/old-$i" "$work/new-$i" || same=0
  if [ -f "$work/old-$i.f32" ] || [ -f "$work/new-$i.f32" ]; then
    cmp -s "$work/old-$i.f32" "$work/new-$i.f32" || same=0
  fi
  if [ $same = 1 ] && [ -s "$work/old-$i" -o -s "$work/old-$i.f32" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "DIFFERENT: kvserve ${c//|/ }" >&2
  fi
done
echo "same-bits: $passed passed, $failed failed"
[ $failed -eq 0 ]
