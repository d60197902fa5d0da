#!/usr/bin/env bash
# The container image (Dockerfile):
#   scripts/image.sh build [TAG]   build it with docker or podman, whichever can run here, and smoke
#                                  test it: /health turns 200 and a completion is answered, with
#                                  stories260K mounted at /models. Where no engine can run, says why
#                                  and runs `check` instead.
#   scripts/image.sh check [BIN]   the checks that need no engine (tests/deploy/image_check.py):
#                                  pins, the runtime's package list against ldd build/kvserve, and
#                                  the binary run in a chroot of exactly the runtime's files.
#   scripts/image.sh pins          the installed versions of the Dockerfile's packages, as pins.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-check}
tag=${2:-kvserve:latest}

model=$(scripts/get-model.sh)

engine_that_runs() {
  for engine in docker podman; do
    if command -v "$engine" >/dev/null && "$engine" info >/dev/null 2>&1; then
      echo "$engine"
      return
    fi
  done
}

case "$action" in
  pins)
    grep -E '^ +[a-z0-9][a-z0-9+.-]+=[^" ]+ \\$' Dockerfile | cut -d= -f1 | tr -d ' ' |
      while read -r package; do
        echo "$package=$(dpkg-query -W -f='${Version}' "$package")"
      done
    ;;
  check)
    exec python3 tests/deploy/image_check.py "${2:-build/kvserve}" "$model"
    ;;
  build)
    engine=$(engine_that_runs)
    if [ -z "$engine" ]; then
      why="no docker or podman found"
      command -v docker >/dev/null && why="docker is only a client here: $(docker info 2>&1 | grep -m1 -i 'cannot\|error' || true)"
      echo "image: no container engine can run on this machine ($why); running the checks that need none" >&2
      exec python3 tests/deploy/image_check.py build/kvserve "$model"
    fi
    revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    "$engine" build --build-arg KVSERVE_REVISION="$revision" -t "$tag" .
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    name="kvserve-smoke-$$"
    "$engine" run -d --rm --name "$name" -p "127.0.0.1:$port:8080" \
      -v "$(cd "$(dirname "$model")" && pwd):/models:ro" "$tag" \
      -m "/models/$(basename "$model")" --host 0.0.0.0 --port 8080 >/dev/null
    trap '"$engine" stop -t 10 "$name" >/dev/null 2>&1 || true' EXIT
    for _ in $(seq 1 100); do
      if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
      sleep 0.2
    done
    curl -fsS "http://127.0.0.1:$port/health"
    echo
    curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}'
    echo
    echo "image: $tag built with $engine and answered a completion"
    ;;
  *)
    echo "usage: scripts/image.sh build [TAG] | check | pins" >&2
    exit 2
    ;;
esac
