"""Host ports: a pod cannot land where another pod holds the same protocol and port on an
overlapping host IP (``0.0.0.0`` overlaps every address)."""

from __future__ import annotations

import numpy as np

REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"

Port = tuple[str, str, int]


class PortIndex:
    """Pods holding each (protocol, port), per host IP, counted per node."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used: dict[tuple[str, int], dict[str, np.ndarray]] = {}

    def change(self, ports: tuple[Port, ...], position: int, delta: int) -> None:
        for protocol, ip, port in ports:
            by_ip = self.used.setdefault((protocol, port), {})
            counts = by_ip.get(ip)
            if counts is None:
                counts = by_ip[ip] = np.zeros(self.size, dtype=np.int32)
            counts[position] += delta

    def conflicts(self, wanted: tuple[Port, ...]) -> np.ndarray:
        """Nodes where any of ``wanted`` is taken."""
        taken = np.zeros(self.size, dtype=bool)
        for protocol, ip, port in wanted:
            by_ip = self.used.get((protocol, port))
            if not by_ip:
                continue
            for held_ip, counts in by_ip.items():
                if ip == ANY_IP or held_ip in (ANY_IP, ip):
                    taken |= counts > 0
        return taken
