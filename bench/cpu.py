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


def thread_cpu(pid: int) -> dict[str, list[float]]:
    """CPU seconds (user, system) and minor page faults so far of a broker, by thread group: the main thread,
    the other threads of the broker process (by name: Java names its threads, Python 3.11 does not), and each
    child process (ours: dispatch). ``--thread-cpu`` prints the difference per message and case."""
    groups: dict[str, list[float]] = {}
    pending = [(pid, "")]
    while pending:
        current, prefix = pending.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
                children = (task / "children").read_text().split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            name = prefix + ("main" if task.name == str(current) else f"thread {comm}")
            row = groups.setdefault(name, [0.0, 0.0, 0.0])
            row[0] += int(fields[11]) / _TICK
            row[1] += int(fields[12]) / _TICK
            row[2] += int(fields[7])
            pending += [(int(child), f"child {child} ") for child in children]
    return groups


def machine_cpu() -> list[float]:
    """The machine's CPU seconds so far (all cores): user (with nice), system, irq + softirq (loopback TCP is mostly
    softirq, charged to no process), idle (with iowait) (/proc/stat)."""
    user, nice, system, idle, iowait, irq, softirq = map(int, Path("/proc/stat").read_text().split()[1:8])
    return [(user + nice) / _TICK, system / _TICK, (irq + softirq) / _TICK, (idle + iowait) / _TICK]


def thread_cpu_report(before: dict[str, list[float]], after: dict[str, list[float]], messages: int) -> str:
    """Per message: user and system CPU us, and minor faults, of each thread group that used any CPU."""
    lines = []
    per = max(1, messages)
    for name, (user, system, faults) in sorted(after.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        old = before.get(name, [0.0, 0.0, 0.0])
        du, ds, df = user - old[0], system - old[1], faults - old[2]
        if du + ds <= 0:
            continue
        lines.append(f"    {name:32} user {du * 1e6 / per:7.1f}  sys {ds * 1e6 / per:7.1f} us/msg  "
                     f"minflt {df / per:6.3f}/msg")
    return "\n".join(lines)
