#!/usr/bin/env python3
"""Checks the Dockerfile without a container engine (scripts/image.sh check):

  1. the base image is a dated Debian tag pinned by digest; every pinned package version is the
     one installed here (the build the tests ran with);
  2. the runtime stage's packages are exactly the packages of `ldd build/kvserve`'s libraries
     (libc6 comes with the base image): none missing, none extra;
  3. the runtime stage: a non-root USER, a HEALTHCHECK on /health, ENTRYPOINT kvserve serve,
     /models a volume, only the binary copied from the build stage;
  4. the build context that .dockerignore leaves configures with CMake (the build stage's step);
  5. the runtime's files alone run it: a root made of the binary, the files of the runtime packages
     and libc6's, and the model, entered with chroot as uid 10001 with the image's ENTRYPOINT and
     CMD (host and port changed to a free loopback one); /health turns 200, a completion is
     answered, the HEALTHCHECK command passes, SIGTERM ends it with 0.

Prints one line per check and 'N passed, N failed'.
"""
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_PACKAGES = {"libc6"}  # in every Debian base image
results = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    results.append(bool(ok))
    return ok


def dockerfile_stages(path):
    """[(stage name, [instruction lines joined over backslash continuations])]."""
    stages = []
    logical = ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not logical and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                logical += line[:-1] + " "
                continue
            logical += line
            words = logical.split()
            if words[0].upper() == "FROM":
                name = words[3] if len(words) >= 4 and words[2].upper() == "AS" else str(len(stages))
                stages.append((name, []))
            elif stages:
                stages[-1][1].append(logical.strip())
            logical = ""
    return stages


def pins(instructions):
    out = {}
    for line in instructions:
        if line.upper().startswith("RUN") and "apt-get install" in line:
            for word in line.split():
                m = re.fullmatch(r"([a-z0-9][a-z0-9+.-]+)=(\S+)", word)
                if m:
                    out[m.group(1)] = m.group(2)
    return out


def installed_version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def library_packages(binary):
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    out = {}
    for line in ldd.splitlines():
        m = re.search(r"=> (\S+)", line) or re.match(r"\s*(/\S+)", line)
        if not m:
            continue
        lib = m.group(1)
        for candidate in (lib, os.path.realpath(lib)):
            r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                out[lib] = r.stdout.split(":")[0]
                break
        else:
            out[lib] = None
    return out


def context_files(root, ignore_path):
    """Files a build would see: our .dockerignore uses only '*' and '!path' lines."""
    patterns = [l.strip() for l in open(ignore_path) if l.strip() and not l.startswith("#")]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            keep = True
            for p in patterns:
                negate = p.startswith("!")
                pat = p[1:].rstrip("/") if negate else p.rstrip("/")
                if fnmatch.fnmatch(rel, pat) or rel.startswith(pat + "/"):
                    keep = negate
            if keep:
                out.append(rel)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = os.path.join(ROOT, "build/kvserve")
    model = os.path.join(ROOT, "../shared/models/stories260K.gguf")
    if len(sys.argv) > 1:
        binary = sys.argv[1]
    if len(sys.argv) > 2:
        model = sys.argv[2]
    stages = dockerfile_stages(os.path.join(ROOT, "Dockerfile"))
    names = [n for n, _ in stages]
    check(names == ["build", "runtime"], f"Dockerfile stages {names} are build, runtime")
    build, runtime = dict(stages)["build"], dict(stages)["runtime"]
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.M)
    global_args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text.split("\nFROM", 1)[0], re.M))
    resolved = [re.sub(r"\$\{(\w+)\}", lambda m: global_args.get(m.group(1), "?"), b) for b in bases]
    check(all(re.fullmatch(r"debian:bookworm-\d{8}-slim@sha256:[0-9a-f]{64}", b) for b in resolved),
          f"both stages start from a dated Debian tag pinned by digest ({sorted(set(resolved))})")

    # 1. pins
    all_pins = {**pins(build), **pins(runtime)}
    wrong = {p: (v, installed_version(p)) for p, v in all_pins.items() if installed_version(p) != v}
    check(all_pins and not wrong, f"{len(all_pins)} pinned packages match the versions installed here"
          + (f"; differ (pinned, here): {wrong}" if wrong else ""))

    # 2. runtime packages == packages of the binary's libraries
    libs = library_packages(binary)
    needed = {p for p in libs.values() if p}
    unowned = [l for l, p in libs.items() if p is None and "linux-vdso" not in l]
    shipped = set(pins(runtime))
    missing = needed - shipped - BASE_PACKAGES
    extra = shipped - needed
    check(not missing and not unowned, f"runtime stage has the packages of all {len(libs)} libraries of "
          f"ldd {os.path.relpath(binary, ROOT)} ({', '.join(sorted(needed))})"
          + (f"; missing {sorted(missing)}" if missing else "") + (f"; no package for {unowned}" if unowned else ""))
    check(not extra, "runtime stage installs nothing else" + (f"; extra {sorted(extra)}" if extra else ""))

    # 3. runtime stage shape
    def instr(keyword):
        return [l[len(keyword):].strip() for l in runtime if l.upper().startswith(keyword + " ")]
    users = instr("USER")
    check(users and users[-1].split(":")[0] not in ("0", "root"), f"runtime runs as a non-root user ({users})")
    health = instr("HEALTHCHECK")
    check(health and "/health" in health[0], "runtime has a HEALTHCHECK on /health")
    entry = json.loads(instr("ENTRYPOINT")[-1]) if instr("ENTRYPOINT") else []
    cmd = json.loads(instr("CMD")[-1]) if instr("CMD") else []
    check(entry == ["kvserve", "serve"], f"ENTRYPOINT {entry}")
    check(any("/models" in v for v in instr("VOLUME")), "/models is a VOLUME")
    copies = instr("COPY")
    check(copies == ["--from=build /src/build/kvserve /usr/local/bin/kvserve"],
          f"runtime copies only the binary from the build stage ({copies})")

    tmp = tempfile.mkdtemp(prefix="kvserve-image-")
    proc = None
    try:
        # 4. the build context configures
        context = os.path.join(tmp, "context")
        files = context_files(ROOT, os.path.join(ROOT, ".dockerignore"))
        for rel in files:
            os.makedirs(os.path.dirname(os.path.join(context, rel)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), os.path.join(context, rel))
        r = subprocess.run(["cmake", "-S", context, "-B", os.path.join(tmp, "context-build"), "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DKVSERVE_BUILD_TESTS=OFF"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"the {len(files)} files .dockerignore lets in configure with CMake"
              + ("" if r.returncode == 0 else ":\n" + r.stderr[-2000:]))

        # 5. run in a root of exactly the runtime files
        rootfs = os.path.join(tmp, "rootfs")
        n_files = 0
        for package in sorted(shipped | BASE_PACKAGES):
            listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout.split()
            for path in listed:
                if not re.match(r"/(usr/)?lib(64|32|x32)?/", path):
                    continue
                if os.path.islink(path) or os.path.isfile(path):
                    dest = rootfs + path
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    if not os.path.lexists(dest):
                        shutil.copy2(path, dest, follow_symlinks=False)
                        n_files += 1
        os.makedirs(rootfs + "/usr/local/bin")
        shutil.copy2(binary, rootfs + "/usr/local/bin/kvserve")
        os.makedirs(rootfs + "/models")
        shutil.copy2(model, rootfs + "/models/model.gguf")
        os.chmod(rootfs + "/models", 0o755)
        port = free_port()
        args = list(cmd)
        args[args.index("--port") + 1] = str(port)
        args[args.index("--host") + 1] = "127.0.0.1"
        if not shutil.which("chroot") or os.geteuid() != 0:
            check(False, "chroot run needs root and chroot(8)")
            return
        argv = ["chroot", "--userspec=10001:10001", rootfs, "/usr/local/bin/" + entry[0]] + entry[1:] + args
        log = open(os.path.join(tmp, "chroot.log"), "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        ok = False
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    ok = response.status == 200
            except OSError:
                pass
            if ok or proc.poll() is not None:
                break
            time.sleep(0.1)
        check(ok, f"chroot of {n_files} library files + the binary: `{shlex.join(entry + args)}` "
              f"as uid 10001 turns /health 200" + ("" if ok else ": " + open(log.name).read()[-800:]))
        if ok:
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read())
            text = answer["choices"][0]["text"]
            check(response.status == 200 and text, f"it answers a completion: {text!r}")
            hc = health[0].split("CMD", 1)[1].strip()
            hc_argv = [a.replace("/8080", f"/{port}") for a in json.loads(hc)]
            r = subprocess.run(hc_argv, timeout=10)
            check(r.returncode == 0, "the HEALTHCHECK command passes against it")
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=20) == 0, "SIGTERM: it drains and exits 0")
        proc = None
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"{sum(results)} passed, {len(results) - sum(results)} failed")


if __name__ == "__main__":
    main()
    sys.exit(0 if results and all(results) else 1)
