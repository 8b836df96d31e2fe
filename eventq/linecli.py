"""``eventq client``: type workq commands, see the raw replies (like ``nc -C``).

Each line typed is sent with ``\\r\\n`` (the protocol's line end); replies are printed
as they arrive. A data block is just the next line typed.
"""

from __future__ import annotations

import socket
import sys
import threading


def run_line_client(host: str, port: int) -> int:
    try:
        sock = socket.create_connection((host, port), timeout=5)
    except OSError as error:
        print(f"eventq: cannot connect to {host}:{port}: {error}. Is `eventq serve` "
              "(or `make run`) running?", file=sys.stderr)
        return 1
    sock.settimeout(None)
    input_done = threading.Event()

    def show_replies() -> None:
        while True:
            data = sock.recv(65536)
            if not data:
                if not input_done.is_set():
                    print("(connection closed by the server)", file=sys.stderr, flush=True)
                return
            sys.stdout.write(data.decode("utf-8", "replace").replace("\r\n", "\n"))
            sys.stdout.flush()

    reader = threading.Thread(target=show_replies, daemon=True)
    reader.start()
    try:
        for line in sys.stdin:
            sock.sendall(line.rstrip("\r\n").encode() + b"\r\n")
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    input_done.set()
    sock.shutdown(socket.SHUT_WR)
    reader.join(timeout=5)
    return 0
