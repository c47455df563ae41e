"""A real HTTP server and a bare TCP listener on 127.0.0.1, each in a thread: what
tests/test_models_fetch.py fetches from (and what must hear nothing), and what
scripts/bench/hostile_fetch.py measures against."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server:
    """A real HTTP server on 127.0.0.1 in a thread: path -> bytes; `truncate` paths announce the
    whole length and close after half; `redirect` paths answer 302 to another URL; `raw` paths
    are answered by a function of the handler (a server that misbehaves as it likes)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.truncate: set[str] = set()
        self.redirect: dict[str, str] = {}
        self.raw: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.requests.append(self.path)
                if self.path in outer.raw:
                    with contextlib.suppress(OSError):  # the client may hang up: its business
                        outer.raw[self.path](self)
                    self.close_connection = True
                    return
                if self.path in outer.redirect:
                    self.send_response(302)
                    self.send_header("Location", outer.redirect[self.path])
                    self.end_headers()
                    return
                data = outer.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2] if self.path in outer.truncate else data)
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()


class Listener:
    """A TCP listener on another loopback port that must hear nothing: each connection and its
    first bytes are recorded; `answer` is written back (a proxy refusing a CONNECT)."""

    def __init__(self, answer: bytes = b"") -> None:
        self.heard: list[bytes] = []
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                self.heard.append(data or b"(a connection)")
                with contextlib.suppress(OSError):
                    conn.sendall(self.answer)


def stalling(release: threading.Event, hold_s: float, sent: int = 9 * 2**20,
             length: int = 10 * 2**20) -> Callable[[BaseHTTPRequestHandler], None]:
    """A `raw` answer that announces `length` bytes, sends `sent` zeros and then holds the
    connection until `release` is set (or `hold_s` has passed): a fetch stalled mid-body."""
    def stall(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(length))
        h.end_headers()
        h.wfile.write(b"\0" * sent)
        h.wfile.flush()
        release.wait(hold_s)

    return stall
