#!/usr/bin/env bash
# Installs the Debian packages kvserve needs to build and test, only those that are missing.
# --browser adds Chromium and a font for the web UI's browser tests (scripts/webui-test.sh).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  ccache                           # rebuilds across work trees and CI's clean clones
  libgtest-dev libgmock-dev        # tests
  libpcre2-dev                     # tokenizer pre-split regexes (Unicode classes)
  libicu-dev                       # tokenizer.json normalizers (NFC/NFKC, lowercase)
  nlohmann-json3-dev               # JSON (CLI output, server)
  libcpp-httplib-dev               # HTTP server
  libssl-dev openssl               # HTTPS (--ssl-cert); the test makes its certificate with openssl
  clang libclang-rt-14-dev         # libFuzzer harnesses and sanitizer runtime
  clang-format                     # scripts/format.sh --check (CI)
  libvulkan-dev glslc              # the Vulkan backend: loader, headers, GLSL to SPIR-V compiler
  mesa-vulkan-drivers vulkan-tools # lavapipe (Vulkan on the CPU) runs its tests; vulkaninfo
)

if [ "${1:-}" = "--browser" ]; then
  packages+=(chromium fonts-dejavu-core)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
