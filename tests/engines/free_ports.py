"""Loopback ports for the engine drivers' side channels and torch.distributed stores.

The vLLM drivers open several ports at fixed offsets from one base (each engine's
distributed store at base, base+1, base+3, the second process's at base+7...), so a
single free port is not enough: ``free_port_run`` finds a base whose whole run is free
at the moment of asking. Another process can still take one before the driver binds it
(no way around that without passing sockets down), but a run checked port by port no
longer collides with ports that were already in use."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel says is free now (bind to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_run(count: int, attempts: int = 200) -> int:
    """A base port such that base .. base+count-1 are all free now."""
    for _ in range(attempts):
        base = free_port()
        if base + count <= 65535 and all(_bindable(base + i) for i in range(1, count)):
            return base
    raise OSError(f"no run of {count} free loopback ports found in {attempts} tries")
