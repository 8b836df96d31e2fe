"""``eventq client``: type workq commands, see the raw replies (like ``nc -C``).

Each line typed is sent with ``\\r\\n`` (the protocol's line end); replies are printed
as they arrive. A data block is just the next line typed.

At the end of its input (Ctrl-D, or the end of a piped script) the client closes its
sending side only and prints replies until the server closes: the server answers every
request it received first, however long a lease among them waits (docs/architecture.md,
"Feedback to users"). Ctrl-C leaves at once.
"""

from __future__ import annotations

import codecs
import os
import socket
import ssl
import sys
import threading

CONNECT_TIMEOUT_S = 5
RECV_BYTES = 65536
# How often the main thread wakes while waiting for the replies: Thread.join() without
# a timeout cannot be interrupted by Ctrl-C on every platform.
JOIN_POLL_S = 0.2


def run_line_client(host: str, port: int, token: str | None = None,
                    tls: ssl.SSLContext | None = None) -> int:
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname=host)
        if token is not None and not _authenticated(sock, token):
            sock.close()
            print(f"eventq: {host}:{port} refused the token (-CLIENT-ERROR Unauthorized): "
                  "check --token / EVENTQ_TOKEN against the server's tokens file",
                  file=sys.stderr)
            return 1
    except OSError as error:
        print(f"eventq: cannot connect to {host}:{port}: {error}. Is `eventq serve` "
              "(or `make run`) running?", file=sys.stderr)
        return 1
    sock.settimeout(None)
    input_done = threading.Event()
    replies = threading.Thread(target=_show_replies, args=(sock, input_done), daemon=True)
    replies.start()
    try:
        _send_input(sock)
        input_done.set()
        try:
            sock.shutdown(socket.SHUT_WR)  # "no more requests": the server answers all
        except OSError:
            pass  # the server has closed already: its last replies are still printed
        while replies.is_alive():
            replies.join(JOIN_POLL_S)
    except KeyboardInterrupt:
        pass  # Ctrl-C: the way out of a session, replies or not
    finally:
        sock.close()
    return 0


def _authenticated(sock: socket.socket, token: str) -> bool:
    """Send ``auth <token>`` first (docs/security.md, "Tokens and roles") and read its
    one-line reply."""
    sock.sendall(b"auth " + token.encode("latin-1") + b"\r\n")
    reply = b""
    while not reply.endswith(b"\r\n"):
        chunk = sock.recv(256)
        if not chunk:
            return False
        reply += chunk
    return reply == b"+OK\r\n"


def _send_input(sock: socket.socket) -> None:
    """Every line of stdin with the protocol's line end, as bytes (a data block is
    sent as it is), until its end or until the server closes (a framing error ends the
    connection, docs/protocol.md, "Connections and framing")."""
    try:
        for line in sys.stdin.buffer:
            sock.sendall(line.rstrip(b"\r\n") + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass


def _show_replies(sock: socket.socket, input_done: threading.Event) -> None:
    """Print the replies as they arrive until the server closes the connection (or
    nobody reads them any more: ``eventq client < script | head``)."""
    screen = _ScreenText()
    try:
        while True:
            try:
                data = sock.recv(RECV_BYTES)
            except OSError as error:
                print(f"(connection lost: {error})", file=sys.stderr, flush=True)
                return
            sys.stdout.write(screen.feed(data, final=not data))
            sys.stdout.flush()
            if not data:
                if not input_done.is_set():
                    print("(connection closed by the server)", file=sys.stderr, flush=True)
                return
    except BrokenPipeError:
        # Python's flush of stdout at exit would fail on the closed pipe again.
        sys.stdout = open(os.devnull, "w")


class _ScreenText:
    """Reply bytes as text with lines ending in ``\n``. A reply may be cut anywhere
    between two reads, even inside a ``\r\n`` or a UTF-8 character: such a tail waits
    for the next read."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending_cr = False

    def feed(self, data: bytes, final: bool = False) -> str:
        text = ("\r" if self._pending_cr else "") + self._decoder.decode(data, final)
        self._pending_cr = not final and text.endswith("\r")
        if self._pending_cr:
            text = text[:-1]
        return text.replace("\r\n", "\n")
