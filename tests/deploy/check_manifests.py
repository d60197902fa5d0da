#!/usr/bin/env python3
"""What a schema cannot see in the rendered manifests (`kubectl kustomize OVERLAY | this`):

  - the Service, PodDisruptionBudget and Deployment selectors match the pod's labels; the HPA
    scales that Deployment; the Ingress points at the Service's port; every Secret and claim a pod
    volume names is rendered (when the overlay is complete: --complete);
  - readiness and startup probe /readyz on the container's port, liveness /livez there (draining
    answers 503 on /readyz and must not restart the pod; a stuck engine fails /livez); the scrape
    annotations name that port;
  - terminationGracePeriodSeconds covers preStop + --shutdown-timeout + 5 s of stream writes;
  - the memory limit covers --kv-memory, the request is within the limit; the CPU request is --threads;
  - the container's command line starts the kvserve built here: its args, with $(VAR) from the
    pod's env, the model path, the API key file from the rendered Secret, a free loopback port and
    --kv-memory cut to 16MiB (the rest as written), turn /readyz 200 (and /livez); the API then
    refuses a call without the key (401) and answers one with it.

Prints one line per check and 'N passed, N failed'.
"""
import argparse
import base64
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

results = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    results.append(bool(ok))
    return ok


def size_bytes(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|KiB|MiB|GiB|TiB|k|M|G)?", str(text))
    if not m:
        raise ValueError(f"size {text!r}")
    scale = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "KiB": 1 << 10,
             "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "k": 1000, "M": 1000**2, "G": 1000**3}
    return float(m.group(1)) * scale[m.group(2)]


def flag(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def subset(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvserve", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--complete", action="store_true", help="an overlay: every reference resolves")
    parser.add_argument("rendered")
    a = parser.parse_args()
    with open(a.rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    deployment = by_kind["Deployment"]["kvserve"]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    port = ports["http"]

    check(subset(deployment["spec"]["selector"]["matchLabels"], labels), "Deployment selector matches its pods")
    service = by_kind["Service"]["kvserve"]
    check(subset(service["spec"]["selector"], labels), "Service selector matches the pods")
    check(all(p["targetPort"] in ports or p["targetPort"] == port for p in service["spec"]["ports"]),
          "Service targets the container port")
    pdb = by_kind["PodDisruptionBudget"]["kvserve"]
    check(subset(pdb["spec"]["selector"]["matchLabels"], labels), "PodDisruptionBudget selects the pods")
    hpa = by_kind["HorizontalPodAutoscaler"]["kvserve"]
    ref = hpa["spec"]["scaleTargetRef"]
    check(ref["kind"] == "Deployment" and ref["name"] == deployment["metadata"]["name"],
          "HorizontalPodAutoscaler scales the Deployment")
    check(hpa["spec"]["minReplicas"] >= 2 and pdb["spec"].get("maxUnavailable") == 1,
          "at least 2 replicas and one disruption at a time")
    ingress = by_kind["Ingress"]["kvserve"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    check(backend["name"] == "kvserve" and backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]},
          "Ingress routes to the Service's http port")
    check(ingress["metadata"]["annotations"].get("nginx.ingress.kubernetes.io/upstream-hash-by") == "$http_x_session_id",
          "Ingress hashes on X-Session-Id")

    def probe_path(name):
        probe = container.get(name, {})
        http = probe.get("httpGet")
        return (http["path"], http["port"]) if http else None
    check(probe_path("readinessProbe") == ("/readyz", "http") and probe_path("startupProbe") == ("/readyz", "http"),
          "readiness and startup probes: GET /readyz on the http port")
    check(probe_path("livenessProbe") == ("/livez", "http"),
          "liveness probes GET /livez (200 while draining, 503 when the engine is stuck), not /readyz")
    ann = pod["metadata"]["annotations"]
    check(ann.get("prometheus.io/scrape") == "true" and int(ann.get("prometheus.io/port")) == port
          and ann.get("prometheus.io/path") == "/metrics", "scrape annotations name the http port's /metrics")

    args = container["args"]
    # a field reference (the pod's name) stands in as a pod would see it
    env = {e["name"]: e["value"] if "value" in e else "kvserve-7d9f-x2x4q" for e in container.get("env", [])}
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    pre_stop_s = float(pre_stop[1]) if pre_stop[0] == "sleep" else 0
    shutdown = float(flag(args, "--shutdown-timeout", 30))
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    check(grace >= pre_stop_s + shutdown + 5,
          f"terminationGracePeriodSeconds {grace} >= preStop {pre_stop_s:g} + --shutdown-timeout {shutdown:g} + 5")
    kv = size_bytes(flag(args, "--kv-memory"))
    limit = size_bytes(container["resources"]["limits"]["memory"])
    request = size_bytes(container["resources"]["requests"]["memory"])
    check(limit >= kv + (256 << 20) and request <= limit,
          f"memory limit {limit / 2**30:.2f} GiB >= --kv-memory {kv / 2**30:.2f} GiB + 256 MiB, request within it")

    cpu = str(container["resources"]["requests"]["cpu"])
    check(flag(args, "--threads") == cpu, f"CPU request {cpu} = --threads {flag(args, '--threads')}")

    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    secret_name = volumes["api-keys"]["secret"]["secretName"]
    claim = volumes["models"]["persistentVolumeClaim"]["claimName"]
    check(claim in by_kind.get("PersistentVolumeClaim", {}), f"the claim {claim} is rendered")
    if not a.complete:
        print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
        return
    check(secret_name in by_kind.get("Secret", {}), f"the Secret {secret_name} is rendered")

    # The command line, run for real.
    tmp = tempfile.mkdtemp(prefix="kvserve-manifest-")
    key_file = os.path.join(tmp, "api-keys")
    secret = by_kind["Secret"][secret_name]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "api-keys")["mountPath"]
    with open(key_file, "wb") as f:
        f.write(base64.b64decode(re.sub(r"\s", "", secret["data"]["api-keys"])))
    key = next(l.strip() for l in open(key_file) if l.strip() and not l.startswith("#"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    run = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], x) for x in args]
    run[run.index("-m") + 1] = a.model
    run[run.index("--host") + 1] = "127.0.0.1"
    run[run.index("--port") + 1] = str(free)
    run[run.index("--kv-memory") + 1] = "16MiB"
    run[run.index("--api-key-file") + 1] = key_file
    check(flag(args, "--api-key-file", "").startswith(mount + "/"), "--api-key-file is in the Secret's mount")
    log = open(os.path.join(tmp, "serve.log"), "w")
    proc = subprocess.Popen([a.kvserve] + run, stdout=log, stderr=log)
    try:
        ok = False
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{free}/readyz", timeout=1) as r:
                    ok = r.status == 200
            except OSError:
                pass
            if ok or proc.poll() is not None:
                break
            time.sleep(0.1)
        check(ok, "the container's args start kvserve: " + " ".join(run[:2] + ["..."])
              + ("" if ok else "\n" + open(log.name).read()[-800:]))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{free}/livez", timeout=5) as r:
                live = r.status
        except (urllib.error.HTTPError, OSError) as e:
            live = getattr(e, "code", 0)
        check(live == 200, f"/livez answers 200 ({live})")
        url = f"http://127.0.0.1:{free}/v1/models"
        try:
            urllib.request.urlopen(url, timeout=5)
            status = 200
        except urllib.error.HTTPError as e:
            status = e.code
        except OSError:
            status = 0
        check(status == 401, f"without the Secret's key the API answers 401 ({status})")
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                status = r.status
        except (urllib.error.HTTPError, OSError) as e:
            status = getattr(e, "code", 0)
        check(status == 200, f"with it, 200 ({status})")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")


if __name__ == "__main__":
    main()
    sys.exit(0 if results and all(results) else 1)
