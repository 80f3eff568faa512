"""Property-based fuzzing of the HTTP API from the OpenAPI document (schemathesis): generated
requests, valid and not, for every operation, as an agent and as a consumer. No answer may be a
5xx, and the server must still be healthy afterwards."""
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, running_parley

SCHEMATHESIS = ROOT / ".venv" / "bin" / "schemathesis"
SEED = os.environ.get("E2E_FUZZ_SEED", "1")
EXAMPLES = os.environ.get("E2E_FUZZ_EXAMPLES", "15")


@pytest.fixture(scope="module")
def fuzz_server():
    # No rate limits (the fuzzer is one fast client) and no scanner (uploads are fuzzed, not scanned).
    with running_parley("--clamd", "off", "--rate-logins", "0", "--rate-consumer-messages", "0", "--rate-ip-writes", "0",
                        "--rate-consumer-sessions", "0") as server:
        yield server


def post(url, body, token=None):
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def fuzz(server, token, name):
    report = Path(server.data_dir) / f"fuzz-{name}.txt"
    result = subprocess.run(
        [str(SCHEMATHESIS), "run", str(ROOT / "openapi.json"), "--url", server.url, "-H", f"Authorization: Bearer {token}",
         "--checks", "not_a_server_error", "--max-examples", EXAMPLES, "--seed", SEED, "--request-timeout", "15",
         # Signing out would revoke the token the rest of the run uses.
         "--exclude-path", "/v1/auth/logout", "--exclude-path", "/v1/auth/logout-all"],
        capture_output=True, text=True, timeout=900)
    report.write_text(result.stdout + result.stderr)
    print(f"{name}: " + " | ".join(line.strip() for line in result.stdout.splitlines() if "⚠️" in line or "generated" in line))
    summary = result.stdout[-3000:]
    assert result.returncode == 0, f"schemathesis found failures ({name}):\n{summary}"
    assert " passed" in result.stdout and "generated" in result.stdout, summary
    with urllib.request.urlopen(f"{server.url}/health", timeout=5) as response:
        assert response.status == 200


def test_fuzz_as_agent(fuzz_server):
    token = post(f"{fuzz_server.url}/v1/auth/login", {"email": fuzz_server.email, "password": fuzz_server.password})["token"]
    fuzz(fuzz_server, token, "agent")


def test_fuzz_as_consumer(fuzz_server):
    token = post(f"{fuzz_server.url}/v1/consumer/session", {"appId": fuzz_server.app_id})["token"]
    post(f"{fuzz_server.url}/v1/consumer/messages", {"clientMessageId": "fuzz-1", "text": "hello"}, token)
    fuzz(fuzz_server, token, "consumer")
