"""A local webhook receiver on loopback: records what it is sent, answers 500 to its first
`failures` deliveries and 200 after, with `answer` as the body."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.waiting import wait_until


class Receiver:
    """A local callback receiver that fails its first `failures` deliveries with 500."""

    def __init__(self, failures: int, answer: bytes = b""):
        self.deliveries: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.deliveries.append((dict(self.headers), body))
                self.send_response(500 if len(receiver.deliveries) <= failures else 200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, timeout: float = 60) -> None:
        wait_until(
            lambda: len(self.deliveries) >= count, timeout, lambda: f"{len(self.deliveries)} of {count} deliveries"
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
