"""What processes exist and what they listen on, read from /proc (Linux): for tests that nothing outlives its owner
and that a local Ray instance is reachable from this machine only."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")


def parents() -> dict[int, int]:
    """Each process's parent, by pid."""
    parents = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces and ")"
    return parents


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, parent in parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, waiting for its parent to read its exit status, is not)."""
    try:
        return "\nState:\tZ" not in (PROC / str(pid) / "status").read_text()
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def wait_until(condition: Callable[[], bool], timeout: float, poll: float = 0.2) -> bool:
    """Poll `condition` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])
    return ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))


def _listening_sockets() -> dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """Socket inode -> (address, port) of every TCP socket listening in this network namespace."""
    found = {}
    for table in ("tcp", "tcp6"):
        lines = (PROC / "net" / table).read_text().splitlines()[1:]
        for fields in (line.split() for line in lines):
            if fields[3] == "0A":  # LISTEN
                host, port = fields[1].split(":")
                found[int(fields[9])] = (_address(host), int(port, 16))
    return found


def listening(pids: Iterable[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of each TCP socket the processes listen on."""
    sockets = _listening_sockets()
    found = []
    for pid in pids:
        try:
            descriptors = list((PROC / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                link = str(descriptor.readlink())
            except OSError:  # closed meanwhile
                continue
            if link.startswith("socket:[") and int(link[8:-1]) in sockets:
                address, port = sockets[int(link[8:-1])]
                found.append((pid, str(address), port))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback
