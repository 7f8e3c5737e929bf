"""Local fakes of the three model APIs the agent CLIs speak, for the conformance suite.

One server on 127.0.0.1 answers Anthropic Messages (``/v1/messages``, streamed as SSE or not),
OpenAI Responses (``/v1/responses``, streamed) and Gemini (``…:generateContent``,
``…:streamGenerateContent``). What it answers is a ``Script``: the first request of a turn that
offers tools gets one call of the CLI's file-writing tool, the request that carries its result
gets the final text; a reviewer's request gets a verdict (``wire.verdict``). Requests without
tools (titles, checks the CLIs make aside) get a short text.
Every request is kept, so a test can say what the CLI sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import wire


@dataclass(frozen=True)
class Script:
    """What the fake model does in a test."""

    root: str = ""  # the project root: the CLIs want absolute paths
    path: str = "hello.txt"
    content: str = "hello\n"
    # Written instead of ``content`` until a request carries the previous attempt's failure (the
    # prompt of a retry): a first attempt whose check fails.
    first_content: str | None = None
    # Written instead of ``content`` in a fix round (a request that carries its prompt).
    fixed_content: str | None = None
    final: str = "Wrote hello.txt.\n\nCOMPLETED: wrote hello.txt"
    # As a reviewer (a request whose conversation holds a review's prompt), its verdict:
    # "met" (every criterion), "unmet" (the first not, with a blocking finding), "unmet-first"
    # (so until a re-review, after a fix round); first it tries to overwrite ``review_writes``
    # (a file under ``root``) with its CLI's write tool, offered or not, when that is given.
    review: str = "met"
    review_writes: str = ""
    limited: int = 0  # answer the first this many model requests with 429
    unauthorized: bool = False  # answer every request with 401
    tokens: tuple[int, int, int] = (1000, 50, 200)  # input, output, cached: per model request


@dataclass
class Seen:
    method: str
    path: str
    body: dict[str, Any]


@dataclass
class FakeApi:
    script: Script = field(default_factory=Script)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        """Status, content type and body for one request."""
        with self.lock:
            self.seen.append(Seen(method, path, body))
            models = sum(1 for s in self.seen if wire.kind(s.path))
        api = wire.kind(path)
        if api is None:
            return 404, "application/json", b'{"error": {"message": "not faked"}}'
        if self.script.unauthorized:
            return wire.error(api, 401, "invalid x-api-key")
        if models <= self.script.limited:
            return wire.error(api, 429, "Rate limit reached for requests")
        return wire.reply(api, path, body, self.script)


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {"raw": raw.decode("utf-8", "replace")}
            status, ctype, data = api.answer(self.command, self.path, body)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the requests are kept in ``api.seen``

    return Handler


@dataclass
class Running:
    api: FakeApi
    url: str  # http://127.0.0.1:PORT


def serve(script: Script) -> Iterator[Running]:
    """A fixture body: the server runs while the test does."""
    api = FakeApi(script)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Running(api, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
