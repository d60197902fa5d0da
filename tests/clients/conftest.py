"""Shared fixtures of the real-client suites: one `kvserve serve` on loopback per test module.

Environment: KVSERVE_BINARY (the kvserve binary; default build/kvserve) and KVSERVE_CLIENT_MODEL
(the model file; default: `scripts/get-model.sh smollm2-135m`, which fetches SmolLM2-135M-Instruct
once). The server runs with an API key on a free port and is stopped with SIGTERM; its exit status
must be 0 and its log is shown when a test fails.
"""
import os
import pathlib
import re
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
API_KEY = "test-key-0123"


def model_path() -> str:
    path = os.environ.get("KVSERVE_CLIENT_MODEL")
    if path:
        return path
    return subprocess.run([str(ROOT / "scripts/get-model.sh"), "smollm2-135m"], check=True,
                          capture_output=True, text=True).stdout.strip()


class Server:
    """A running `kvserve serve`: base_url (ending in /v1), model id, log text."""

    def __init__(self, extra_args: list[str], model_file: str | None = None):
        binary = os.environ.get("KVSERVE_BINARY", str(ROOT / "build/kvserve"))
        self.model_file = model_file or model_path()
        self.log_file = tempfile.NamedTemporaryFile(prefix="kvserve-client-", suffix=".log")
        args = [binary, "serve", "-m", self.model_file, "--host", "127.0.0.1", "--port", "0",
                "--api-key", API_KEY, "-t", "2", *extra_args]
        self.process = subprocess.Popen(args, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120  # "listening on" comes first, "ready:" once loaded
        port = None
        while port is None:
            log = self.log()
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log)
            if match and "ready:" in log:
                port = int(match.group(1))
            elif self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kvserve serve did not start:\n{self.log()}")
            else:
                time.sleep(0.05)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.model = pathlib.Path(self.model_file).name.removesuffix(".gguf")

    def log(self) -> str:
        return pathlib.Path(self.log_file.name).read_text(errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -1


@pytest.fixture(scope="module")
def server():
    running = Server([])
    yield running
    status = running.stop()
    assert status == 0, f"kvserve serve exited with {status}:\n{running.log()}"
