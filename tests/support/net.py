"""Loopback ports for the tests that start servers or process groups."""

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
