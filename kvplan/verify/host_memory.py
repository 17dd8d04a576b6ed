"""How much host memory a new CPU allocation can get: the least of what the machine, the container
(cgroup v2 or v1) and this process's limits (RLIMIT_AS, RLIMIT_DATA) leave.

``/proc/meminfo`` alone reads the host: inside a container limited to 8 GiB on a 512 GiB machine it
says 500 GiB are free, and the allocation then fails (or the kernel kills the process).
"""

from __future__ import annotations

import os

_CGROUP_ROOT = "/sys/fs/cgroup"
_UNLIMITED = 1 << 60  # cgroup v1 writes "unlimited" as a page-rounded 2^63


def available_bytes() -> int | None:
    """The smallest known limit minus its usage; None where nothing is known (not Linux)."""
    found = [v for v in (meminfo_available(), cgroup_available(), rlimit_available()) if v is not None]
    return max(min(found), 0) if found else None


def meminfo_available() -> int | None:
    """MemAvailable from /proc/meminfo (Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(64).strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _UNLIMITED else value


def _cgroup_dirs(controller_root: str, relative: str) -> list[str]:
    """The process's cgroup directory and its ancestors (a parent's limit applies too); inside a
    container the cgroup namespace often mounts the process's own cgroup at the root."""
    root = os.path.normpath(controller_root)
    path = os.path.normpath(os.path.join(root, relative.lstrip("/")))
    if not os.path.isdir(path) or not path.startswith(root):
        path = root
    dirs = [path]
    while path != root and len(dirs) < 64:
        path = os.path.dirname(path)
        dirs.append(path)
    return dirs


def cgroup_available() -> int | None:
    """The least (limit - usage) over the process's memory cgroups, v2 then v1."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read(65536).splitlines()
    except OSError:
        return None
    left: list[int] = []
    for line in lines:
        _, controllers, relative = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "" and os.path.exists(os.path.join(_CGROUP_ROOT, "cgroup.controllers")):  # v2
            pairs = [(os.path.join(d, "memory.max"), os.path.join(d, "memory.current"))
                     for d in _cgroup_dirs(_CGROUP_ROOT, relative)]
        elif "memory" in controllers.split(","):  # v1
            root = os.path.join(_CGROUP_ROOT, "memory")
            pairs = [(os.path.join(d, "memory.limit_in_bytes"), os.path.join(d, "memory.usage_in_bytes"))
                     for d in _cgroup_dirs(root, relative)]
        else:
            continue
        for limit_file, usage_file in pairs:
            limit, usage = _read_int(limit_file), _read_int(usage_file)
            if limit is not None:
                left.append(limit - (usage or 0))
    return min(left) if left else None


def rlimit_available() -> int | None:
    """RLIMIT_AS / RLIMIT_DATA (``ulimit -v`` / ``-d``) minus this process's virtual size."""
    try:
        import resource
    except ImportError:
        return None
    limits = []
    for name in ("RLIMIT_AS", "RLIMIT_DATA"):
        soft, _ = resource.getrlimit(getattr(resource, name))
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    if not limits:
        return None
    return min(limits) - (_virtual_size() or 0)


def _virtual_size() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
