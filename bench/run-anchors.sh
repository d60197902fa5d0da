#!/usr/bin/env bash
# Rebuilds the six random-weight anchor models of ../shared/anchors.md with `kvserve synth` (into a
# scratch folder, never the repository) and benchmarks each like `llama-bench -p 512 -n 128 -r 5`,
# then runs the cache comparison on gpt2-124m. Results go to stdout; see docs/benchmarks.md.
#
#   bench/run-anchors.sh [SCRATCH_DIR]          (default: models/anchors, git-ignored)
#   KVSERVE=path/to/kvserve THREADS=2 REPS=5 LENGTHS=64,128,256,512,1024 PLOT=out.svg \
#     bench/run-anchors.sh
# SKIP_CACHE=1 skips the cache comparison (the uncached side is O(n^2): the slow part).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kvserve=${KVSERVE:-$root/build-bench/kvserve}
dir=${1:-$root/models/anchors}
threads=${THREADS:-2}
reps=${REPS:-5}
lengths=${LENGTHS:-64,128,256,512,1024}
plot=${PLOT:-$dir/cache-compare.svg}

if [[ ! -x "$kvserve" ]]; then
  echo "run-anchors: no kvserve binary at $kvserve (build it, or set KVSERVE)" >&2
  exit 2
fi
mkdir -p "$dir"
echo "## $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$kvserve" doctor -t "$threads"
echo

for spec in gpt2-124m:f32 gpt2-124m:f16 gpt2-124m:q8_0 \
            tinyllama-1.1b:q4_0 tinyllama-1.1b:q8_0 tinyllama-1.1b:f16; do
  preset=${spec%%:*}
  type=${spec##*:}
  file=$dir/$preset-$type.gguf
  if [[ ! -f "$file" ]]; then
    "$kvserve" synth --preset "$preset" --type "$type" --seed 1 -t "$threads" -o "$file" >&2
  fi
  "$kvserve" bench -m "$file" -p 512 -n 128 -r "$reps" -t "$threads"
  echo
done

if [[ -z "${SKIP_CACHE:-}" ]]; then
  "$kvserve" bench --cache-compare -m "$dir/gpt2-124m-f32.gguf" --lengths "$lengths" \
    -t "$threads" --plot "$plot"
  echo "plot: $plot"
fi
