"""Deployments of one file pinned to the same GPUs (compose ``device_ids``, a kvplan file's ``gpu.devices``):
planned together with ``kvplan.share``, in the file's order and the reverse, and each told its share.

Findings: ``shared-gpu`` (a note: what it takes, and the KV cache it gets there), ``shared-gpu-start`` (an error: it
does not start in the file's order; the suggestion names the fixes, each planned again) and ``shared-gpu-order``
(a warning: it starts only in the file's order, and compose starts services together unless ``depends_on`` orders
them). GPUs that overlap without being the same set are not planned together (a warning says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.deploy.report import DeploymentResult, Finding
from kvplan.errors import KvplanError

GIB = 1 << 30


def check_shared(checked: Sequence[tuple[Any, list[DeploymentResult]]]) -> None:
    """Add the shared-GPU findings to the results of deployments pinned to the same GPUs."""
    groups: dict[tuple[str, ...], list[tuple[Any, DeploymentResult]]] = {}
    for dep, results in checked:
        if dep.devices is not None and len(results) == 1:
            groups.setdefault(dep.devices.value, []).append((dep, results[0]))
    for devices, members in groups.items():
        if len(members) < 2:
            _overlap(devices, members, groups)
            continue
        unplanned = [r.name for _, r in members if r.tenant is None]
        if unplanned:
            for dep, r in members:
                r.findings.append(_finding(dep, r, "warning", "shared-gpu", f"shares GPU {', '.join(devices)} with "
                                           f"{_others(r, members)}; not planned together: {', '.join(unplanned)} "
                                           "could not be planned"))
            continue
        _plan_group(devices, members)


def _plan_group(devices: tuple[str, ...], members: list[tuple[Any, DeploymentResult]]) -> None:
    from kvplan.share import share_gpu

    try:
        shared = share_gpu([r.tenant for _, r in members])
    except KvplanError as exc:
        for dep, r in members:
            r.findings.append(_finding(dep, r, "warning", "shared-gpu", f"shares GPU {', '.join(devices)} with "
                                       f"{_others(r, members)}; not planned together: {exc}"))
        return
    given = {d.name: d for d in shared.orders[0].deployments}
    reverse = {d.name: d for d in shared.orders[-1].deployments} if len(shared.orders) > 1 else given
    fixes = "; ".join(f.text() for f in shared.fixes)
    for position, (dep, r) in enumerate(members):
        mine = given[r.name]
        where = f"shares GPU {', '.join(devices)} with {_others(r, members)}"
        if mine.starts:
            alone = r.kv_cache_bytes_per_gpu
            less = f", {_gib(alone)} alone" if alone is not None and mine.kv_cache_bytes < alone else ""
            r.findings.append(_finding(dep, r, "note", "shared-gpu", f"{where}: started {_ordinal(position)} (the file's "
                                       f"order), it takes {_gib(mine.takes_bytes)} of {_gib(shared.total_bytes)} per GPU, "
                                       f"its KV cache {_gib(mine.kv_cache_bytes)} ({mine.kv_cache_tokens:,} tokens{less})"))
            if mine.capped:  # started on a pool shorter than one request, the engine's own way
                r.findings.append(_finding(dep, r, "warning", "shared-gpu-capped", f"{where}: {mine.capped}",
                                           suggestion=f"planned fixes: {fixes}" if fixes else None))
            if not reverse[r.name].starts and shared.all_start:
                order = [d.name for d in shared.orders[0].deployments]
                how = (f"compose starts services together: give {order[1]} depends_on: [{order[0]}]"
                       if dep.source == "compose" and len(order) == 2 else f"start {' then '.join(order)}")
                r.findings.append(_finding(
                    dep, r, "warning", "shared-gpu-order", f"{where}: it starts only in the file's order "
                    f"({' then '.join(order)}); the other way round, {reverse[r.name].reason}", suggestion=how))
        else:
            r.findings.append(_finding(dep, r, "error", "shared-gpu-start",
                                       f"{where}: started {_ordinal(position)} (the file's order), {mine.reason}",
                                       suggestion=f"planned fixes: {fixes}" if fixes else None))
        r.assumptions.extend(n for n in mine.notes if n not in r.assumptions)


def _overlap(devices: tuple[str, ...], members: list[tuple[Any, DeploymentResult]],
             groups: dict[tuple[str, ...], list[tuple[Any, DeploymentResult]]]) -> None:
    """A deployment whose GPUs overlap another's without being the same set: said, not planned."""
    dep, r = members[0]
    others = [o.name for key, group in groups.items() if key != devices and set(key) & set(devices) for _, o in group]
    if others:
        r.findings.append(_finding(dep, r, "warning", "shared-gpu", f"GPU {', '.join(sorted(set(devices)))} overlap "
                                   f"those of {', '.join(others)}: kvplan plans deployments on the same GPUs together, "
                                   "not partial overlaps"))


def _finding(dep: Any, r: DeploymentResult, severity: Any, code: str, message: str,
             suggestion: str | None = None) -> Finding:
    return Finding(severity, code, message, r.file, dep.devices.line if dep.devices is not None else r.line,
                   deployment=r.name, suggestion=suggestion)


def _others(r: DeploymentResult, members: list[tuple[Any, DeploymentResult]]) -> str:
    return ", ".join(o.name for _, o in members if o is not r)


def _ordinal(i: int) -> str:
    return ("first", "second", "third")[i] if i < 3 else f"{i + 1}th"


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"
