"""CPU seconds of process trees from /proc (Linux): on a shared machine, where wall times move with the load,
the CPU a run costs is the steadier figure.

A tree's CPU is each live process's user + system time plus what its reaped children used (``cutime``/``cstime``):
Spark's Python workers are forked by its daemon and reaped by it, its runner processes are reaped by the JVM, so the
JVM's tree counts them after they exit too.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3 of proc(5)
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) / _TICK


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant (with their reaped children)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


def child_with(marker: str, parent: int | None = None) -> int | None:
    """The first child of ``parent`` (this process) whose command line contains ``marker``."""
    found = children_with(marker, parent)
    return found[0] if found else None


def children_with(marker: str, parent: int | None = None) -> list[int]:
    """Every child of ``parent`` (this process) whose command line contains ``marker``."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is None or stat[0] != parent:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry.name))
    return found


def own_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` itself: its user + system time without its reaped children's."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def spark_parts(jvm: int) -> dict[str, float]:
    """CPU seconds of a local Spark's parts: the JVM itself, its Python worker daemons with the workers they fork
    (``pyspark.daemon pyspark.worker``: a Python source's reads and their Arrow IPC to the JVM; and the daemons of
    the data source lookup and planning, small beside it), and the rest of its tree (the streaming source runner
    and whatever else it started, reaped ones included). Their sum is ``tree_cpu(jvm)``."""
    jvm_own = own_cpu(jvm)
    workers = sum(tree_cpu(daemon) for daemon in children_with("pyspark.daemon", jvm))
    return {"jvm": jvm_own, "python workers": workers, "other": tree_cpu(jvm) - jvm_own - workers}
