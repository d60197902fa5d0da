#!/usr/bin/env bash
# Fuzzes the GGUF reader and model loader (fuzz/gguf_fuzz.cc), the safetensors reader and
# config.json parser (fuzz/safetensors_fuzz.cc), then the server's request parsing (head, JSON
# body, completion request, tokenizing and chat templates; fuzz/request_fuzz.cc) and the grammar
# engine (GBNF, JSON Schema, regex patterns, masks; fuzz/grammar_fuzz.cc) and a model's output
# (reasoning and every family's tool calls; fuzz/output_fuzz.cc), for N seconds each (default 60).
#   scripts/fuzz.sh [SECONDS]
# Configures a clang build in build-fuzz/ (override with KVSERVE_FUZZ_BUILD), builds gguf_fuzz with
# libFuzzer + ASan + UBSan, seeds a corpus from the small shared models and crafted files
# (fuzz/make_seeds.py), and runs it. Exits non-zero when the fuzzer finds a crash, a leak, a
# timeout or an out-of-memory input; the input is saved as build-fuzz/crash-* (or leak-*, ...).
# Reproduce one with: build-fuzz/fuzz/gguf_fuzz build-fuzz/crash-...
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KVSERVE_FUZZ_BUILD:-$root/build-fuzz}"
shared="${KVSERVE_SHARED:-$root/../shared}"
jobs="${KVSERVE_FUZZ_BUILD_JOBS:-2}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DKVSERVE_BUILD_FUZZERS=ON -DKVSERVE_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j "$jobs" gguf_fuzz safetensors_fuzz request_fuzz grammar_fuzz output_fuzz

seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
mkdir -p "$seeds" "$corpus"
python3 "$root/fuzz/make_seeds.py" "$seeds"
for model in "$shared"/models/*.gguf "$shared"/models/arch/*.gguf; do
  # Small files only (stories260K, the llama vocabulary, the quantized family files: every GGML
  # weight type and architecture): a big seed slows every run of it.
  if [ -f "$model" ] && [ "$(stat -c %s "$model")" -le $((1200 * 1024)) ]; then
    cp "$model" "$seeds/"
  fi
done

cd "$build"
# -rss_limit_mb / -malloc_limit_mb: a single huge allocation driven by a count in the input is a
# bug (the reader must check counts against the file size first), so fail on it.
# -max_len: inputs above 128 KiB run ~10x slower; the shared models' seeds are cut to their first
# 128 KiB (metadata, tensor infos, the first tensors), the crafted seeds cover whole models.
"$build/fuzz/gguf_fuzz" "$corpus" "$seeds" -max_total_time="$seconds" -timeout=10 \
  -max_len="${KVSERVE_FUZZ_MAX_LEN:-131072}" -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -print_final_stats=1

# Safetensors: seeds are small valid files (one and two tensors, with and without metadata).
st_seeds="$build/fuzz-seeds-safetensors"
st_corpus="$build/fuzz-corpus-safetensors"
mkdir -p "$st_seeds" "$st_corpus"
python3 - "$st_seeds" <<'PY'
import json, struct, sys
def write(path, tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(raw)) + raw + data)
write(sys.argv[1] + "/one.safetensors", {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))})
write(sys.argv[1] + "/two.safetensors", {"a": ("F16", [3], b"\0" * 6), "b": ("BF16", [1, 2], b"\0" * 4)},
      {"format": "pt"})
PY
"$build/fuzz/safetensors_fuzz" "$st_corpus" "$st_seeds" -max_total_time="$seconds" -timeout=10 \
  -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1

# Requests: seeds are bodies of every route's shape (and one HTTP head); the dictionary holds the
# field names. The tokenizer and chat templates run on stories260K's vocabulary.
rq_seeds="$build/fuzz-seeds-request"
rq_corpus="$build/fuzz-corpus-request"
mkdir -p "$rq_seeds" "$rq_corpus"
python3 - "$rq_seeds" <<'PY'
import json, sys
bodies = [
    {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0},
    {"prompt": [1, 2, 3], "n": 2, "logprobs": 3, "stop": ["\n", "The"], "seed": 7},
    {"prompt": ["a", [1, 2]], "logit_bias": {"5": -100}, "top_k": 40, "top_p": 0.9},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
     "stream": True, "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
     "session_id": "s1", "cache_salt": "t", "max_completion_tokens": 5},
    {"messages": [{"role": "user", "content": "Weather?"},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1",
                   "type": "function", "function": {"name": "w", "arguments": "{\"c\":1}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "21 C"}],
     "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
     "tool_choice": "auto"},
    # /v1/messages (Anthropic) and /v1/responses bodies: the translations run on every input.
    {"model": "m", "max_tokens": 8, "system": "Be brief.", "stop_sequences": ["x"],
     "thinking": {"type": "enabled", "budget_tokens": 4},
     "tools": [{"name": "w", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"},
     "messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "w", "input": {}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]},
    {"model": "m", "instructions": "Be brief.", "max_output_tokens": 8, "top_logprobs": 2,
     "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
     "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
     "tool_choice": {"type": "function", "name": "w"},
     "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
               {"type": "function_call", "call_id": "c", "name": "w", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c", "output": "ok"}]},
]
for i, body in enumerate(bodies):
    open(f"{sys.argv[1]}/body{i}.json", "w").write(json.dumps(body))
open(f"{sys.argv[1]}/head.txt", "w").write(
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
PY
model="${KVSERVE_FUZZ_MODEL:-$shared/models/stories260K.gguf}"
[ -f "$model" ] || model=""  # without it: parsing only
KVSERVE_FUZZ_MODEL="$model" "$build/fuzz/request_fuzz" "$rq_corpus" "$rq_seeds" -dict="$root/fuzz/request.dict" \
  -max_total_time="$seconds" -timeout=10 -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -print_final_stats=1

# Grammars: seeds are a GBNF grammar, JSON Schemas and patterns (the first byte picks the kind).
gr_seeds="$build/fuzz-seeds-grammar"
gr_corpus="$build/fuzz-corpus-grammar"
mkdir -p "$gr_seeds" "$gr_corpus"
python3 - "$gr_seeds" <<'PY'
import json, sys
seeds = [
    b"\x00" + b'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws [0-9]{1,3}\nws ::= [ \\t]*\n',
    b"\x00" + b'root ::= ("a" | "b"){2,5} [^x-z\\n]? . "\\u00e9"\n',
    b"\x01" + json.dumps({"type": "object", "properties": {"a": {"type": "integer", "minimum": -5,
        "maximum": 300}, "b": {"type": "array", "items": {"enum": ["x", 1, None]}, "maxItems": 3},
        "c": {"$ref": "#/$defs/c"}}, "required": ["a"], "$defs": {"c": {"anyOf": [{"type": "string",
        "pattern": "^[A-Z]{2}\\d+$"}, {"$ref": "#/$defs/c"}]}}}).encode(),
    b"\x01" + json.dumps({"type": "string", "format": "date-time"}).encode(),
    b"\x02" + b"^(ab|c[d-f]+)?x{2,4}\\.\\d*$",
]
for i, seed in enumerate(seeds):
    open(f"{sys.argv[1]}/seed{i}", "wb").write(seed)
PY
"$build/fuzz/grammar_fuzz" "$gr_corpus" "$gr_seeds" -max_total_time="$seconds" -timeout=10 \
  -max_len=16384 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1

# Model output: seeds are answers in every family's call format, with and without reasoning (the
# first byte picks the options: bits 0-1 the format, 2 the reasoning split, 3 a prompt that opens
# <think>, 4 parallel calls, 5 Qwen's XML calls, 6 gpt-oss's harmony, 7 Gemma 4's output).
out_seeds="$build/fuzz-seeds-output"
out_corpus="$build/fuzz-corpus-output"
mkdir -p "$out_seeds" "$out_corpus"
python3 - "$out_seeds" <<'PY'
import sys
seeds = [
    b"\x15" + b'<think>plan</think>Sure. <tool_call>\n{"name": "w", "arguments": {"c": "Paris"}}\n</tool_call>\n<tool_call>{"name": "t", "arguments": "{}"}</tool_call>',
    b"\x16" + b'<|python_tag|>{"name": "w", "parameters": {"c": 1}}; {"name": "t", "parameters": {}}',
    b"\x17" + b'[TOOL_CALLS][{"name": "w", "arguments": {"c": [1, 2]}}, {"name": "t", "arguments": {}}]',
    b"\x0d" + b'still thinking</think>answer <tool_call>{"name": broken</tool_call>',
    b"\x01" + b"<tool_call><tool_call>{\"name\": \"w\"}</tool_call></tool_call> \xc3\xa9",
    b"\x95" + b'<|channel>thought\nplan<channel|>Sure. <|tool_call>call:w{c:<|"|>Paris<|"|>,n:[1,{a:true}]}<tool_call|><|tool_call>call:t{}<tool_call|>',
    b"\x85" + b'<|channel>thought\nhm <|tool_call>call:w{c:<|"|>open}<tool_call|><channel|>x<channel|> <|tool_call>call:{}<tool_call|>',
]
for i, seed in enumerate(seeds):
    open(f"{sys.argv[1]}/seed{i}", "wb").write(seed)
PY
"$build/fuzz/output_fuzz" "$out_corpus" "$out_seeds" -max_total_time="$seconds" -timeout=10 \
  -max_len=16384 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1
