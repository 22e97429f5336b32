"""A stub OpenAI-compatible server on 127.0.0.1, started by the tests themselves."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class StubServer:
    """Answers each POST with the next scripted (status, body); records requests."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any]] = []
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                stub.requests.append((self.path, dict(self.headers), body))
                status, reply = stub.replies.pop(0)
                payload = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # keep test output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply(self, message: dict[str, Any], status: int = 200) -> None:
        self.replies.append((status, {"choices": [{"index": 0, "message": message}]}))


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables; the stub must be reached directly.
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()
    thread.join()
