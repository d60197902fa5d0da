#!/usr/bin/env bash
# The deployment files, tested on loopback (docs/deploy.md): Prometheus rules and config (promtool),
# the Kubernetes manifests (kustomize renders them; strict schema validation offline with the
# kubernetes-validate package, tests/deploy/k8s_validate.py; tests/deploy/check_manifests.py runs
# their command line), the Dockerfile (hadolint; scripts/image.sh check: no container engine runs
# here), and the scale-out test: three replicas behind nginx with Prometheus
# (tests/deploy/scale_out_test.py), and request smuggling attempts through that nginx
# (tests/deploy/smuggling_test.py). Needs build/kvserve; installs nginx and prometheus where
# missing, and the Python tools into .venv (scripts/venv.sh). Ends with 'N passed, N failed'.
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
scripts/venv.sh || exit 1  # kubernetes-validate, hadolint, pyyaml
python=.venv/bin/python

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
step "YAML of the Kubernetes scrape config and the adapter rules" "$python" -c '
import sys, yaml
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    assert isinstance(doc, dict), path
print("ok")' deploy/prometheus/prometheus-k8s.yml deploy/prometheus/adapter-rules.yaml
for dir in base overlays/example; do
  out="$tmp/$(basename "$dir").yaml"
  step "kubectl kustomize deploy/k8s/$dir" bash -c "kubectl kustomize deploy/k8s/$dir > $out"
  step "schemas of deploy/k8s/$dir" bash -c "$python tests/deploy/k8s_validate.py < $out"
done
step "manifest checks (base)" "$python" tests/deploy/check_manifests.py --kvserve "$kvserve" \
  --model "$model" "$tmp/base.yaml"
step "manifest checks (overlay, its command line run)" "$python" tests/deploy/check_manifests.py \
  --kvserve "$kvserve" --model "$model" --complete "$tmp/example.yaml"
step "Dockerfile lint (hadolint)" .venv/bin/hadolint --failure-threshold info Dockerfile
step "image checks (scripts/image.sh check)" scripts/image.sh check "$kvserve"
step "request smuggling through nginx" "$python" tests/deploy/smuggling_test.py \
  --kvserve "$kvserve" --model "$model"
step "scale-out: 3 replicas, nginx, Prometheus" "$python" tests/deploy/scale_out_test.py \
  --kvserve "$kvserve" --model "$model" ${DEPLOY_FIGURES:+--figures "$DEPLOY_FIGURES"}

echo "deploy-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
