#!/usr/bin/env bash
# `kvserve serve` with and without --spec history, alternating ROUNDS times, each answering
# bench/history_repeat.py (an agent loop's repeated request).
#   bench/history-repeat.sh MODEL.gguf [ROUNDS]     (from the repository root, after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
rounds=${2:-2}
port=18180
id=$(basename "$model" .gguf)
for round in $(seq "$rounds"); do
  for spec in none history; do
    build/kvserve serve -m "$model" --port "$port" -t 2 --spec "$spec" >/tmp/history-repeat.log 2>&1 &
    server=$!
    for _ in $(seq 300); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.1; done
    python3 bench/history_repeat.py "$port" "$id" "round $round, --spec $spec"
    kill "$server"
    wait "$server" 2>/dev/null || true
  done
done
