#!/usr/bin/env python3
"""The Vulkan backend's correctness on every model file of ../shared/models (arch/ and
stories260K), side by side with the CPU backend: the largest relative logit error of each
(max |a - b| / max |b| over a row, worst row) for a 12-token prompt, whether Vulkan's greedy
tokens are the CPU's, whether Vulkan's logits are the same bits alone (a token a step),
batched (the prompt in one step) and without the cache (each prefix recomputed), and whether
they are the same bits with each dispatch submitted and waited for on its own
(KVSERVE_VULKAN_SYNC=1) as with dispatches recorded into batches (the default), and whether
they are the same bits with the matrices in device-only memory, uploaded through a staging
buffer (KVSERVE_VULKAN_WEIGHTS=device, a discrete GPU's default) as in mapped memory (the
default here).

    python3 bench/vulkan_vs_cpu.py [--kvserve build/kvserve] [--models ../shared/models]

Prints a Markdown table (docs/benchmarks.md, "The Vulkan backend on lavapipe").
"""
import argparse
import array
import json
import os
import subprocess
import sys
import tempfile

TOKENS = "1,2,3,4,5,6,7,8,9,10,11,12"


def logits(kvserve, model, backend, mode, out_dir, sync=False, weights="mapped"):
    path = os.path.join(out_dir, f"{backend}-{mode}-{int(sync)}-{weights}.f32")
    env = dict(os.environ, KVSERVE_VULKAN_SYNC="1" if sync else "0",
               KVSERVE_VULKAN_WEIGHTS=weights)
    subprocess.run([kvserve, "logits", "-m", model, "--tokens", TOKENS, "--out", path,
                    "--mode", mode, "--backend", backend, "-t", "2"],
                   check=True, capture_output=True, env=env)
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def worst_row_error(a, b, n_rows):
    width = len(a) // n_rows
    worst = 0.0
    for r in range(n_rows):
        ra, rb = a[r * width:(r + 1) * width], b[r * width:(r + 1) * width]
        scale = max(abs(v) for v in rb) or 1e-30
        worst = max(worst, max(abs(x - y) for x, y in zip(ra, rb)) / scale)
    return worst


def greedy(kvserve, model, backend):
    out = subprocess.run([kvserve, "run", "-m", model, "-p", "Once upon a time", "-n", "16",
                          "--temp", "0", "--output-format", "json", "--backend", backend,
                          "-t", "2"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tokens"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvserve", default="build/kvserve")
    parser.add_argument("--models", default="../shared/models")
    args = parser.parse_args()
    files = [os.path.join(args.models, "stories260K.gguf")]
    arch = os.path.join(args.models, "arch")
    files += [os.path.join(arch, f) for f in sorted(os.listdir(arch)) if f.endswith(".gguf")]
    n_rows = len(TOKENS.split(","))
    print("| model | Vulkan vs CPU, worst row | greedy tokens equal | alone = batched = no cache "
          "| batches = synchronous | device-only weights = mapped |")
    print("|---|---|---|---|---|---|")
    for model in files:
        with tempfile.TemporaryDirectory() as tmp:
            cpu = logits(args.kvserve, model, "cpu", "batch", tmp)
            vk = {m: logits(args.kvserve, model, "vulkan", m, tmp)
                  for m in ("batch", "incremental", "no-cache")}
            synchronous = {m: logits(args.kvserve, model, "vulkan", m, tmp, sync=True)
                           for m in ("batch", "incremental")}
            device_only = logits(args.kvserve, model, "vulkan", "batch", tmp, weights="device")
        error = worst_row_error(vk["batch"], cpu, n_rows)
        same_bits = vk["batch"] == vk["incremental"] == vk["no-cache"]
        same_as_sync = all(vk[m] == synchronous[m] for m in synchronous)
        same_as_device_only = vk["batch"] == device_only
        tokens_equal = greedy(args.kvserve, model, "cpu") == greedy(args.kvserve, model, "vulkan")
        print(f"| {os.path.basename(model)} | {error:.2e} | {'yes' if tokens_equal else 'NO'} | "
              f"{'yes' if same_bits else 'NO'} | {'yes' if same_as_sync else 'NO'} | "
              f"{'yes' if same_as_device_only else 'NO'} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
