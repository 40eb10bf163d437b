"""Network fault injection for tests: a TCP gate on loopback in front of a real service (Redis,
PostgreSQL). `cut()` drops every connection through it and refuses new ones, as a restart or an
outage of the service does to its clients; `restore()` lets connections through again."""

from __future__ import annotations

import socket
import threading


class TcpGate:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.port = self._listener.getsockname()[1]
        self._open = True
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="tcp-gate", daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._open = False
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._sockets.clear()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if not self._open:
                    client.close()  # the service is "down": the connection ends at once
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                self._sockets.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                for s in (source, sink):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()
                    self._sockets.discard(s)
