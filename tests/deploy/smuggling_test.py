#!/usr/bin/env python3
"""Request smuggling through the shipped nginx configuration (issue 33): one `kvserve serve`
replica behind deploy/nginx/kvserve.conf, on loopback. Each attempt is one request whose end two
parsers could disagree on (two Content-Lengths, Transfer-Encoding with Content-Length, obfuscated
Transfer-Encodings, bad chunk sizes, obsolete line folding, bare LF, whitespace before the colon),
with a second request, GET /smuggled-N, hidden where a parser that disagreed with nginx would find
it. Sent on a raw socket to nginx; then a normal completion through nginx must answer 200 with the
text it gives directly (nginx's kept-alive upstream connections are not poisoned).

At the end, kvserve's own count of 404 answers (the only answer a GET /smuggled-N can get) must
equal the number of /smuggled requests nginx itself forwarded (its access log, upstream status
404): kvserve never answered a request nginx did not see. Each attempt sent straight to kvserve
(no nginx) gets a 4xx/501 and the connection closed.

  tests/deploy/smuggling_test.py [--kvserve build/kvserve] [--model ...stories260K.gguf]

Prints one line per check and a closing 'N passed, N failed'; exits non-zero on any failure.
"""
import argparse
import os
import re
import shutil
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_out_test import HOST, ROOT, Checks, Stack, free_port, http, write_nginx  # noqa: E402

NORMAL = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}


def attempts():
    """(name, raw bytes) of each smuggling attempt; {smuggled} is the hidden request."""
    body = '{"prompt":"Once upon a time","max_tokens":2}'
    n = len(body)
    post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    te = "Transfer-Encoding: chunked\r\n"
    chunked = f"{n:x}\r\n{body}\r\n0\r\n\r\n"
    return [
        ("CL.CL differing", post + f"Content-Length: {n}\r\nContent-Length: {n + 40}\r\n\r\n{body}{{smuggled}}"),
        ("CL list differing", post + f"Content-Length: {n}, {n + 40}\r\n\r\n{body}{{smuggled}}"),
        ("CL.TE", post + f"Content-Length: {len(chunked) + 40}\r\n{te}\r\n{chunked}{{smuggled}}"),
        ("TE.CL", post + f"{te}Content-Length: 4\r\n\r\n{chunked}{{smuggled}}"),
        ("TE xchunked", post + f"Transfer-Encoding: xchunked\r\nContent-Length: {n}\r\n\r\n{body}{{smuggled}}"),
        ("TE chunked, identity", post + f"Transfer-Encoding: chunked, identity\r\n\r\n{chunked}{{smuggled}}"),
        ("TE twice", post + f"{te}Transfer-Encoding: x\r\n\r\n{chunked}{{smuggled}}"),
        ("TE space before colon", post + f"Transfer-Encoding : chunked\r\nContent-Length: {n}\r\n\r\n{body}{{smuggled}}"),
        ("TE folded", post + f"Content-Length: {n}\r\nX-A: b\r\n Transfer-Encoding: chunked\r\n\r\n{body}{{smuggled}}"),
        ("CL after bare LF", post + f"X-A: b\nContent-Length: {n}\r\n\r\n{body}{{smuggled}}"),
        ("chunk size with garbage", post + f"{te}\r\n{n:x} garbage\r\n{body}\r\n0\r\n\r\n{{smuggled}}"),
        ("chunk size overflow", post + f"{te}\r\n1{'0' * 16}{n:x}\r\n{body}\r\n0\r\n\r\n{{smuggled}}"),
        ("chunk data without CRLF", post + f"{te}\r\n{n:x}\r\n{body}XX0\r\n\r\n{{smuggled}}"),
        ("negative chunk size", post + f"{te}\r\n-1\r\n{body}\r\n0\r\n\r\n{{smuggled}}"),
    ]


def exchange(port, data, wait_s=2.0):
    """Everything the server sends on a new connection after `data`, and whether it closed."""
    with socket.create_connection((HOST, port), timeout=wait_s) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out, True
                out += chunk
        except (socket.timeout, ConnectionResetError):
            return out, False


def statuses(raw):
    return [int(m) for m in re.findall(rb"HTTP/1\.[01] (\d{3}) ", raw)]


def metric(port, name):
    status, _, text = http(port, "/metrics")
    m = re.search(r"\n" + re.escape(name) + r" ([0-9.e+]+)", text if isinstance(text, str) else "")
    return float(m.group(1)) if m else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvserve", default=os.path.join(ROOT, "build/kvserve"))
    parser.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    args = parser.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        print("smuggling_test: nginx not found (scripts/deploy-test.sh installs it)")
        return 1
    checks = Checks()
    tmp = tempfile.mkdtemp(prefix="kvserve-smuggling-")
    stack = Stack(args, tmp)
    try:
        port = free_port()
        if not checks.check(stack.start_replica("replica-0", port), f"kvserve on {HOST}:{port}"):
            print(stack.log_tail("replica-0"))
            return 1
        prefix, front = write_nginx(tmp, [port], True, "nginx")
        ok = stack.start("nginx", [nginx, "-p", prefix, "-c", f"{prefix}/nginx.conf"], front, "/nginx-health")
        if not checks.check(ok, f"nginx (deploy/nginx/kvserve.conf) on {HOST}:{front}"):
            print(stack.log_tail("nginx"))
            return 1
        expected = http(port, "/v1/completions", NORMAL)[2]["choices"][0]["text"]

        for i, (name, template) in enumerate(attempts()):
            smuggled = f"GET /smuggled-{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            data = template.replace("{smuggled}", smuggled).encode()
            raw, _ = exchange(front, data)
            status, _, body = http(front, "/v1/completions", NORMAL)
            text = body["choices"][0]["text"] if status == 200 and isinstance(body, dict) else None
            checks.check(text == expected, f"{name}: nginx answered {statuses(raw)}; the next request "
                                           f"through nginx got 200 and its own answer")
            direct, closed = exchange(port, data)
            answered = statuses(direct)
            checks.check(len(answered) == 1 and answered[0] in (400, 411, 501) and closed,
                         f"{name}: kvserve alone answers {answered} and closes the connection")

        with open(os.path.join(prefix, "logs/access.log"), errors="replace") as f:
            forwarded = sum(1 for line in f if "/smuggled-" in line and '" 404 ' in line)
        answered = metric(port, 'kvserve:http_responses_total{code="404"}')
        checks.check(answered == forwarded,
                     f"kvserve answered {answered:.0f} requests for /smuggled-N, each one nginx forwarded "
                     f"itself ({forwarded}): none reached kvserve unseen")
    finally:
        stack.stop()
        if checks.failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}")
        print(f"{checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
