#!/usr/bin/env python3
"""Scale-out on loopback, for real: three `kvserve serve` replicas behind nginx (deploy/nginx), a
Prometheus server scraping them with deploy/prometheus/rules.yml, and multi-turn traffic.

  1. consistent hashing on X-Session-Id: every session stays on one replica and every later turn
     reuses its cache (cached_tokens > 0); the same traffic through a round-robin copy of the
     config hits far less (both hit rates printed); SSE passes through nginx;
  2. failover: one replica is killed (SIGKILL) mid-traffic; no request started after the kill
     fails (nginx retries on the next replica), its sessions move and recompute once, the alert
     KvserveReplicaDown fires, the replica restarted on its port serves again; another replica is
     drained (SIGTERM) mid-traffic: it exits 0 and every request started meanwhile answers 200;
  3. every PromQL expression of deploy/grafana/kvserve.json returns data from that Prometheus.

Loopback only, free ports, bounded loops, every process stopped at the end. Prints one line per
check and a closing 'N passed, N failed'; exits non-zero on any failure.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = "127.0.0.1"
NAMES = ["alice", "bob", "carol", "dan", "eve", "finn", "gina", "hugo", "ivy", "jack", "kim", "leo"]
PLACES = ["park", "sea", "forest", "town", "garden", "river", "school", "hill"]
THINGS = ["dog", "ball", "tree", "bird", "boat", "cake", "star", "fish", "hat", "car"]


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        print(("PASS " if ok else "FAIL ") + what, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def http(port, path, body=None, headers=None, timeout=30):
    """(status, headers dict lower-cased, parsed JSON or text); status 0 when no answer came."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{HOST}:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw, hdrs = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, raw, hdrs = error.code, error.read(), error.headers
    except (urllib.error.URLError, ConnectionError, socket.timeout, OSError,
            HTTPException):
        # HTTPException: e.g. IncompleteRead, the headers came and the body was cut off (a
        # replica killed mid-answer). The callers' checks decide whether that request may fail.
        return 0, {}, None
    hdrs = {k.lower(): v for k, v in hdrs.items()}
    try:
        return status, hdrs, json.loads(raw)
    except ValueError:
        return status, hdrs, raw.decode(errors="replace")


def wait_until(predicate, seconds, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class Stack:
    """The processes of the test; stop() ends every one of them (also on an exception)."""

    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.replicas = {}  # name -> {"port", "proc"}
        self.others = []  # (name, Popen)

    def start_replica(self, name, port):
        log = open(os.path.join(self.tmp, f"{name}.log"), "ab")
        proc = subprocess.Popen(
            [self.args.kvserve, "serve", "-m", self.args.model, "--host", HOST, "--port", str(port),
             "--replica-name", name, "-c", "512", "--kv-memory", "64MiB", "--session-ttl", "600", "--max-num-seqs", "8",
             "--shutdown-timeout", "5", "--http-threads", "64"],
            stdout=log, stderr=log, start_new_session=True)
        self.replicas[name] = {"port": port, "proc": proc}
        return wait_until(lambda: http(port, "/health", timeout=2)[0] == 200 or proc.poll() is not None,
                          60) and proc.poll() is None

    def kill_replica(self, name):
        proc = self.replicas[name]["proc"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def start(self, name, argv, ready_port, ready_path):
        log = open(os.path.join(self.tmp, f"{name}.log"), "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        self.others.append((name, proc))
        return wait_until(lambda: http(ready_port, ready_path, timeout=2)[0] == 200 or
                          proc.poll() is not None, 60) and proc.poll() is None

    def stop(self):
        procs = [r["proc"] for r in self.replicas.values()] + [p for _, p in self.others]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def log_tail(self, name, lines=20):
        try:
            with open(os.path.join(self.tmp, f"{name}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def write_nginx(tmp, replicas, hashed, name):
    """An nginx prefix in tmp/name serving deploy/nginx/kvserve.conf on a free port; returns it."""
    prefix = os.path.join(tmp, name)
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    port = free_port()
    with open(os.path.join(ROOT, "deploy/nginx/kvserve.conf")) as f:
        site = f.read()
    site, n = re.subn(r"listen 8080;", f"listen {HOST}:{port};", site)
    assert n == 1, "deploy/nginx/kvserve.conf: expected one 'listen 8080;'"
    if not hashed:
        site, n = re.subn(r"\n\s*hash \$kvserve_route_key consistent;", "", site)
        assert n == 1, "deploy/nginx/kvserve.conf: expected one 'hash ... consistent;'"
    with open(os.path.join(prefix, "kvserve.conf"), "w") as f:
        f.write(site)
    with open(os.path.join(prefix, "kvserve-replicas.conf"), "w") as f:
        for r in replicas:
            f.write(f"server {HOST}:{r} max_fails=1 fail_timeout=3s;\n")
    user = "user root;\n" if os.geteuid() == 0 else ""
    with open(os.path.join(prefix, "nginx.conf"), "w") as f:
        f.write(f"""{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {prefix}/logs/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include kvserve.conf;
}}
""")
    return prefix, port


def write_prometheus(tmp, replica_ports, prom_port):
    """prometheus.yml scraping the replicas every second, with rules.yml whose `for:` waits are cut
    to 0s (the shipped ones are minutes; promtool test rules checks them as written)."""
    with open(os.path.join(ROOT, "deploy/prometheus/rules.yml")) as f:
        rules = re.sub(r"(\n\s*for:) \S+", r"\1 0s", f.read())
    with open(os.path.join(tmp, "rules.yml"), "w") as f:
        f.write(rules)
    targets = ", ".join(f'"{HOST}:{p}"' for p in replica_ports)
    with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: kvserve
    scrape_timeout: 1s
    static_configs:
      - targets: [{targets}]
""")
    return [shutil.which("prometheus"), f"--config.file={tmp}/prometheus.yml",
            f"--storage.tsdb.path={tmp}/tsdb", f"--web.listen-address={HOST}:{prom_port}",
            "--storage.tsdb.retention.time=1h", "--log.level=warn"]


class Session:
    def __init__(self, tag, i):
        self.id = f"{tag}-{i}"
        name, place = NAMES[i % len(NAMES)], PLACES[(i // len(NAMES)) % len(PLACES)]
        self.prompt = f"Story {tag} {i}. Once upon a time, {name} went to the {place} with a friend."
        self.turn = 0
        self.name = name
        self.log = []  # per turn: dict(status, replica, cached, prompt_tokens, start, end, upstream)

    def next_turn(self, port, max_tokens):
        start = time.monotonic()
        status, hdrs, body = http(port, "/v1/completions",
                                  {"prompt": self.prompt, "max_tokens": max_tokens, "temperature": 0},
                                  headers={"X-Session-Id": self.id})
        entry = {"status": status, "start": start, "end": time.monotonic(),
                 "replica": hdrs.get("x-kvserve-replica"), "upstream": hdrs.get("x-kvserve-upstream", "")}
        if status == 200 and isinstance(body, dict):
            usage = body["usage"]
            entry["cached"] = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            entry["prompt_tokens"] = usage["prompt_tokens"]
            thing = THINGS[(self.turn + len(self.id)) % len(THINGS)]
            self.prompt += body["choices"][0]["text"] + f" Then {self.name} saw a {thing}."
            self.turn += 1
        self.log.append(entry)
        return entry


def conversations(port, tag, n_sessions, n_turns, max_tokens, workers):
    """n_sessions conversations of n_turns each, `workers` sessions at a time."""
    sessions = [Session(tag, i) for i in range(n_sessions)]

    def run(session):
        for _ in range(n_turns):
            if session.next_turn(port, max_tokens)["status"] != 200:
                break

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, sessions))
    return sessions


def hit_rate(sessions, first_turn=1):
    cached = sum(e.get("cached", 0) for s in sessions for e in s.log[first_turn:])
    total = sum(e.get("prompt_tokens", 0) for s in sessions for e in s.log[first_turn:])
    return cached / total if total else 0.0


def prom_query(port, expr):
    status, _, body = http(port, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
        return None
    return body["data"]["result"]


def dashboard_exprs(path):
    with open(path) as f:
        dashboard = json.load(f)
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvserve", default=os.path.join(ROOT, "build/kvserve"))
    parser.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--figures", help="write the measured figures here as JSON")
    args = parser.parse_args()
    for tool in ("nginx", "prometheus"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            print(f"scale_out_test: {tool} not found (scripts/deploy-test.sh installs it)")
            return 1
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"

    checks = Checks()
    figures = {}
    tmp = tempfile.mkdtemp(prefix="kvserve-deploy-")
    stack = Stack(args, tmp)
    try:
        names = ["replica-0", "replica-1", "replica-2"]
        ports = [free_port() for _ in names]
        for name, port in zip(names, ports):
            if not checks.check(stack.start_replica(name, port), f"{name} ready on {HOST}:{port}"):
                print(stack.log_tail(name))
                return 1
        prom_port = free_port()
        ok = stack.start("prometheus", write_prometheus(tmp, ports, prom_port), prom_port, "/-/ready")
        if not checks.check(ok, f"prometheus ready on {HOST}:{prom_port}"):
            print(stack.log_tail("prometheus"))
            return 1
        routers = {}
        for kind, hashed in (("hash", True), ("round-robin", False)):
            prefix, port = write_nginx(tmp, ports, hashed, f"nginx-{kind}")
            argv = [nginx, "-p", prefix, "-c", f"{prefix}/nginx.conf"]
            ok = stack.start(f"nginx-{kind}", argv, port, "/nginx-health")
            if not checks.check(ok, f"nginx ({kind}) on {HOST}:{port}"):
                print(stack.log_tail(f"nginx-{kind}"), open(f"{prefix}/logs/error.log").read())
                return 1
            routers[kind] = port

        # 1. Affinity: consistent hashing vs round robin, the same conversations, one after the
        # other (so that round robin's order, and its hit rate, is the same in every run).
        hashed = conversations(routers["hash"], "h", args.sessions, args.turns, 16, 1)
        rr = conversations(routers["round-robin"], "r", args.sessions, args.turns, 16, 1)
        for label, sessions in (("hash", hashed), ("round-robin", rr)):
            statuses = [e["status"] for s in sessions for e in s.log]
            checks.check(statuses == [200] * (args.sessions * args.turns),
                         f"{label}: {len(statuses)} requests all 200")
        sticky = [len({e["replica"] for e in s.log}) == 1 for s in hashed]
        checks.check(all(sticky), f"hash: each of {len(hashed)} sessions stayed on one replica")
        spread = {}
        for s in hashed:
            spread[s.log[0]["replica"]] = spread.get(s.log[0]["replica"], 0) + 1
        checks.check(len(spread) == 3, f"hash: sessions spread over the 3 replicas ({dict(sorted(spread.items()))})")
        later = [e["cached"] for s in hashed for e in s.log[1:]]
        checks.check(all(c > 0 for c in later), f"hash: all {len(later)} later turns had cached tokens > 0")
        h_rate, r_rate = hit_rate(hashed), hit_rate(rr)
        rr_moves = sum(s.log[i]["replica"] != s.log[i - 1]["replica"] for s in rr for i in range(1, len(s.log)))
        print(f"hit rate (cached / prompt tokens, turns 2..{args.turns}): consistent hash {h_rate:.3f}, "
              f"round robin {r_rate:.3f}; round robin moved {rr_moves} of {len(rr) * (args.turns - 1)} "
              f"later turns to another replica")
        checks.check(h_rate > 0.5 and r_rate < h_rate / 3,
                     f"hash hit rate {h_rate:.3f} > 0.5, round robin's {r_rate:.3f} < a third of it")
        # SSE through the router (proxy_buffering off): the events, [DONE], the same text.
        s0 = hashed[0]
        body = {"prompt": s0.prompt, "max_tokens": 12, "temperature": 0}
        whole = http(routers["hash"], "/v1/completions", body, headers={"X-Session-Id": s0.id})[2]
        request = urllib.request.Request(f"http://{HOST}:{routers['hash']}/v1/completions",
                                         data=json.dumps({**body, "stream": True}).encode(),
                                         headers={"Content-Type": "application/json", "X-Session-Id": s0.id})
        with urllib.request.urlopen(request, timeout=30) as response:
            kind, replica = response.headers.get("Content-Type", ""), response.headers.get("X-Kvserve-Replica")
            lines = [l.decode().strip() for l in response if l.strip()]
        events = [json.loads(l[6:]) for l in lines if l.startswith("data: {")]
        streamed = "".join(e["choices"][0]["text"] for e in events)
        checks.check(kind.startswith("text/event-stream") and lines[-1] == "data: [DONE]" and len(events) > 1
                     and streamed == whole["choices"][0]["text"] and replica == s0.log[0]["replica"],
                     f"SSE through nginx: {len(events)} events, [DONE], the same text as the whole answer, "
                     f"from the session's replica")

        figures["affinity"] = {"sessions": args.sessions, "turns": args.turns, "hash_hit_rate": h_rate,
                               "round_robin_hit_rate": r_rate, "round_robin_moved_turns": rr_moves}

        # 2. Failover: kill one replica mid-traffic, restart it, watch it rejoin.
        port = routers["hash"]
        sessions = [Session("f", i) for i in range(24)]
        for s in sessions:  # one turn each, so every session has a home replica
            s.next_turn(port, 8)
        home = {s.id: s.log[0]["replica"] for s in sessions}
        victim = max(set(home.values()), key=lambda r: sum(v == r for v in home.values()))
        victim_port = stack.replicas[victim]["port"]
        kill_at = {}
        done = threading.Event()

        def traffic(session):  # until `done`, at most 300 turns per session
            for _ in range(300):
                if done.is_set():
                    return
                if session.turn >= 10:
                    session.prompt, session.turn = session.prompt[:120], 1  # stay within the context
                session.next_turn(port, 8)
                time.sleep(0.05)

        pool = concurrent.futures.ThreadPoolExecutor(len(sessions))
        futures = [pool.submit(traffic, s) for s in sessions]
        time.sleep(1.0)
        kill_at["t"] = time.monotonic()
        stack.kill_replica(victim)
        fired = wait_until(lambda: any(
            a["labels"].get("alertname") == "KvserveReplicaDown" and a["state"] == "firing"
            for a in (http(prom_port, "/api/v1/alerts")[2] or {}).get("data", {}).get("alerts", [])), 30, 0.5)
        down_s = time.monotonic() - kill_at["t"]
        checks.check(fired, f"alert KvserveReplicaDown firing {down_s:.1f} s after {victim} was killed")
        alerts = (http(prom_port, "/api/v1/alerts")[2] or {}).get("data", {}).get("alerts", [])
        for a in alerts:
            print(f"  alert {a['labels'].get('alertname')} {a['state']} instance={a['labels'].get('instance')}")
        # Down for longer than nginx's fail_timeout (3 s here), so that nginx probes the dead
        # replica again with requests started after the kill and must retry them elsewhere.
        time.sleep(max(0.0, kill_at["t"] + 6.0 - time.monotonic()))
        restart_at = time.monotonic()
        ok = stack.start_replica(victim, victim_port)
        checks.check(ok, f"{victim} restarted on {HOST}:{victim_port}")
        ready_at = time.monotonic()
        rejoined = wait_until(lambda: any(e["replica"] == victim and e["start"] > ready_at
                                          for s in sessions for e in list(s.log)), 30, 0.2)
        # A drain (SIGTERM, as a rolling update or a scale-down stops a pod) mid-traffic: the
        # replica answers 503 to new requests, which nginx retries on the others; it exits 0.
        drained = next(n for n in names if n != victim)
        drained_proc = stack.replicas[drained]["proc"]
        t_term = time.monotonic()
        drained_proc.send_signal(signal.SIGTERM)
        try:
            drain_code = drained_proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            drain_code = None
        t_stopped = time.monotonic()
        time.sleep(1.0)
        checks.check(stack.start_replica(drained, stack.replicas[drained]["port"]),
                     f"{drained} restarted after its drain")
        time.sleep(1.0)
        done.set()
        for f in futures:
            f.result(timeout=60)
        pool.shutdown()
        first_back = min((e["end"] for s in sessions for e in s.log
                          if e["replica"] == victim and e["start"] > ready_at), default=None)
        checks.check(rejoined, f"{victim} serves requests again after its restart"
                     + (f" ({first_back - ready_at:.1f} s after ready)" if first_back else ""))

        t_kill = kill_at["t"]
        entries = [e for s in sessions for e in s.log[1:]]
        after = [e for e in entries if e["start"] > t_kill]
        failed_after = [e for e in after if e["status"] != 200]
        in_flight = [e for e in entries if e["start"] <= t_kill < e["end"]]
        retried = [e for e in after if "," in e["upstream"]]
        checks.check(len(after) > 50 and not failed_after,
                     f"failover: {len(after)} requests started after the kill, {len(failed_after)} failed")
        checks.check(len(retried) > 0, f"failover: {len(retried)} of them reached the dead replica first "
                     "and were retried on another by nginx (X-Kvserve-Upstream lists both)")
        during_drain = [e for e in entries if t_term <= e["start"] <= t_stopped]
        checks.check(drain_code == 0 and all(e["status"] == 200 for e in during_drain),
                     f"drain: {drained} exited {drain_code} after {t_stopped - t_term:.2f} s; the "
                     f"{len(during_drain)} requests started meanwhile all answered 200")
        moved = [s for s in sessions if home[s.id] == victim]
        moved_ok = True
        recomputed = 0
        for s in moved:
            down = [i for i, e in enumerate(s.log) if t_kill < e["start"] < restart_at and e["status"] == 200]
            if not down:
                continue
            moved_ok = moved_ok and all(s.log[i]["replica"] != victim for i in down)
            # its first answer from another replica (perhaps a request in flight at the kill that
            # nginx retried) computed the prompt there
            first_moved = next(e for e in s.log if e["end"] > t_kill and e["status"] == 200 and
                               e["replica"] != victim)
            recomputed += first_moved["cached"] < first_moved["prompt_tokens"] // 2
            first = s.log[down[0]]
            # on its new replica, the turn after the move reuses the cache again
            if len(down) > 1 and s.log[down[1]]["replica"] == first["replica"]:
                moved_ok = moved_ok and s.log[down[1]]["cached"] > 0
        checks.check(moved and moved_ok,
                     f"the {len(moved)} sessions of {victim} moved to the others while it was down, "
                     f"{recomputed} recomputed their prompt once there, then hit the cache again")
        stayed = [s for s in sessions if home[s.id] != victim]
        steady = all(e["replica"] == home[s.id] for s in stayed for e in s.log
                     if e["status"] == 200 and e["end"] < t_term)
        checks.check(steady, f"the {len(stayed)} sessions of the other replicas did not move (until the drain)")
        figures["failover"] = {"sessions": len(sessions), "requests_after_kill": len(after),
                               "failed_after_kill": len(failed_after), "in_flight_at_kill": len(in_flight),
                               "in_flight_failed": sum(e["status"] != 200 for e in in_flight),
                               "in_flight_retried": sum("," in e["upstream"] for e in in_flight),
                               "down_s": round(restart_at - t_kill, 1),
                               "retried_by_nginx": len(retried), "moved_sessions": len(moved),
                               "alert_firing_after_s": round(down_s, 1),
                               "drain_s": round(t_stopped - t_term, 2), "requests_during_drain": len(during_drain),
                               "retried_during_drain": sum("," in e["upstream"] for e in during_drain),
                               "rejoined_after_ready_s": round(first_back - ready_at, 1) if first_back else None}
        print("failover figures: " + json.dumps(figures["failover"]))

        # 3. Every dashboard expression returns data from the live Prometheus.
        time.sleep(2.5)  # the last scrapes of the traffic above
        exprs = dashboard_exprs(os.path.join(ROOT, "deploy/grafana/kvserve.json"))
        empty = []
        for title, expr in exprs:
            concrete = (expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
                        .replace("$job", "kvserve"))
            result = prom_query(prom_port, concrete)
            if not result:
                empty.append(f"{title}: {concrete}")
        for line in empty:
            print("  no data: " + line)
        checks.check(exprs and not empty, f"dashboard: all {len(exprs)} panel queries return data")
        by_replica = prom_query(prom_port, "sum by (instance) (kvserve:prefix_cache_hits_total) / "
                                           "sum by (instance) (kvserve:prefix_cache_queries_total)")
        for r in by_replica or []:
            print(f"  prefix-cache hit rate {r['metric']['instance']}: {float(r['value'][1]):.3f}")
        info = prom_query(prom_port, "kvserve:replica_info")
        checks.check(info and sorted(r["metric"]["replica"] for r in info) == names,
                     "kvserve:replica_info names the 3 replicas")
    finally:
        stack.stop()
        if args.figures:
            with open(args.figures, "w") as f:
                json.dump(figures, f, indent=2)
        if checks.failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}")
        print(f"{checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
