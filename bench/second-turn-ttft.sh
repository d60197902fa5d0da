#!/usr/bin/env bash
# A second chat turn's time to first token on one model file, side by side: kvserve serve with its
# prefix cache (a hybrid model resumes from a recurrent-state checkpoint), kvserve serve
# --no-prefix-cache, and llama-server (LLAMA_CPP: its bin folder; default flags, 2 threads),
# alternating, ROUNDS times; bench/second_turn_ttft.py sends the turns.
#   LLAMA_CPP=/path/to/llama.cpp/build/bin bench/second-turn-ttft.sh MODEL.gguf [ROUNDS]
set -euo pipefail
model="$1"
rounds="${2:-2}"
here="$(cd "$(dirname "$0")" && pwd)"
kvserve="${KVSERVE:-$here/../build/kvserve}"
port=28960
wait_ready() {
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null && return 0
    sleep 0.2
  done
  echo "server on $port did not start" >&2
  return 1
}
run() {  # label, command... (each server its own port: a stopped one may still hold its own)
  local label="$1"
  shift
  port=$((port + 1))
  "$@" > "/tmp/second-turn-$label.log" 2>&1 &
  local pid=$!
  wait_ready
  python3 "$here/second_turn_ttft.py" "$port" "$label" 2 || true
  kill "$pid"
  wait "$pid" 2> /dev/null || true
}
for _ in $(seq 1 "$rounds"); do
  run kvserve "$kvserve" serve -m "$model" --port "$((port + 1))" -t 2 -c 4096 --spec none
  run kvserve-no-cache "$kvserve" serve -m "$model" --port "$((port + 1))" -t 2 -c 4096 --spec none \
    --no-prefix-cache
  if [[ -n "${LLAMA_CPP:-}" ]]; then
    run llama-server "$LLAMA_CPP/llama-server" -m "$model" --port "$((port + 1))" -t 2 -c 4096 -np 1
  fi
done
