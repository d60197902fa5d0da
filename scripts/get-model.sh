#!/usr/bin/env bash
# Prints the path of the default model, stories260K.gguf: ../shared/models when that folder
# exists, else a copy downloaded once into models/ from its public source.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="$root/../shared/models/stories260K.gguf"
if [ -f "$shared" ]; then
  echo "$shared"
  exit 0
fi
local_copy="$root/models/stories260K.gguf"
if [ ! -f "$local_copy" ]; then
  mkdir -p "$root/models"
  url="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
  echo "get-model: downloading $url" >&2
  curl -fsSL -o "$local_copy.part" "$url"
  mv "$local_copy.part" "$local_copy"
fi
echo "$local_copy"
