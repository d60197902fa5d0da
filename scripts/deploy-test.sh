#!/usr/bin/env bash
# The deployment files, tested on loopback (docs/deploy.md): Prometheus rules and config (promtool),
# the Kubernetes manifests (kustomize renders them; schema validation offline with the
# kubernetes-models package; tests/deploy/check_manifests.py runs their command line), the
# Dockerfile (dockerfile-utils' lint; scripts/image.sh check: no container engine runs here), and
# the scale-out test: three
# replicas behind nginx with Prometheus (tests/deploy/scale_out_test.py). Needs build/kvserve;
# installs nginx, prometheus and the npm validator where missing. Ends with 'N passed, N failed'.
set -uo pipefail
cd "$(dirname "$0")/.."
kvserve=${KVSERVE_BUILD_DIR:-build}/kvserve
model=$(scripts/get-model.sh)
if [ ! -x "$kvserve" ]; then
  echo "deploy-test: $kvserve not built (scripts/build.sh)" >&2
  exit 1
fi

packages=(nginx prometheus)       # nginx; prometheus and promtool
command -v kubectl >/dev/null || packages+=(kubernetes-client)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deploy-test: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  # policy-rc.d or not, the packages' own services are not needed: the tests start their own.
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The npm validators, as package-lock.json pins them (reinstalled when a version differs).
(cd tests/deploy/validators && node -e '
  const lock = require("./package-lock.json").packages;
  for (const name of Object.keys(require("./package.json").dependencies)) {
    if (require(`./node_modules/${name}/package.json`).version !== lock[`node_modules/${name}`].version)
      process.exit(1);
  }' 2>/dev/null || npm ci --no-audit --no-fund --loglevel=error)

passed=0
failed=0
step() {  # step NAME COMMAND...: runs it, counts it
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAIL $name" >&2
    failed=$((failed + 1))
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step "promtool check rules" promtool check rules deploy/prometheus/rules.yml
step "promtool test rules" bash -c 'cd deploy/prometheus && promtool test rules rules_test.yml'
step "promtool check config" promtool check config deploy/prometheus/prometheus.yml
step "YAML of the Kubernetes scrape config and the adapter rules" python3 -c '
import sys, yaml
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    assert isinstance(doc, dict), path
print("ok")' deploy/prometheus/prometheus-k8s.yml deploy/prometheus/adapter-rules.yaml
for dir in base overlays/example; do
  out="$tmp/$(basename "$dir").yaml"
  step "kubectl kustomize deploy/k8s/$dir" bash -c "kubectl kustomize deploy/k8s/$dir > $out"
  step "schemas of deploy/k8s/$dir" bash -c "node tests/deploy/validators/k8s_validate.mjs < $out"
done
step "manifest checks (base)" python3 tests/deploy/check_manifests.py --kvserve "$kvserve" \
  --model "$model" "$tmp/base.yaml"
step "manifest checks (overlay, its command line run)" python3 tests/deploy/check_manifests.py \
  --kvserve "$kvserve" --model "$model" --complete "$tmp/example.yaml"
step "Dockerfile lint (dockerfile-utils)" node tests/deploy/validators/dockerfile_lint.mjs Dockerfile
step "image checks (scripts/image.sh check)" scripts/image.sh check "$kvserve"
step "scale-out: 3 replicas, nginx, Prometheus" python3 tests/deploy/scale_out_test.py \
  --kvserve "$kvserve" --model "$model" ${DEPLOY_FIGURES:+--figures "$DEPLOY_FIGURES"}

echo "deploy-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
