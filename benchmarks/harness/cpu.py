"""CPU accounting: the CPU minutes this process spends on a run (steadier than wall time on a shared
machine), and the CPU seconds and memory of another process and its descendants, read from
/proc (Linux; elsewhere the tree is the process alone and its figures 0)."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CpuClock:
    """This process's CPU time (user + system, all threads) since the clock was made."""

    def __init__(self) -> None:
        self.start = time.process_time()

    @property
    def seconds(self) -> float:
        return time.process_time() - self.start

    @property
    def minutes(self) -> float:
        return self.seconds / 60


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (children, their children, ...), from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += tree.get(p, [])
    return out


@dataclasses.dataclass
class ProcessStats:
    """One process as /proc shows it now."""

    peak_kib: int
    """VmHWM: its peak resident memory so far."""
    rss_kib: int
    """VmRSS: its resident memory now."""
    cpu_seconds: float
    """User + system CPU seconds so far."""
    command: str


def process_stats(pid: int) -> ProcessStats | None:
    """`pid`'s memory, CPU seconds and command line; None when it is gone (or no /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError, ValueError):
        return None

    def kib(key: str) -> int:
        found = re.search(rf"^{key}:\s+(\d+)", status, re.M)
        return int(found.group(1)) if found else 0

    return ProcessStats(kib("VmHWM"), kib("VmRSS"), cpu, command)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants (a server and its workers)."""
    return sum(s.cpu_seconds for s in map(process_stats, descendants(pid)) if s is not None)


def tree_rss_kib(pid: int) -> int:
    """Resident memory (KiB) of `pid` and its descendants."""
    return sum(s.rss_kib for s in map(process_stats, descendants(pid)) if s is not None)
