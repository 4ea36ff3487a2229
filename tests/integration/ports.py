"""A free loopback port for the process tests (bound a moment later by what they start)."""
import socket


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
