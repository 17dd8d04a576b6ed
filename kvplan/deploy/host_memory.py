"""The host memory a deployment file gives its server, and the check of an offload tier's pinned memory
against it.

- Kubernetes: the serving container's ``resources.limits.memory`` (a quantity: ``64Gi``, ``500G``, ``1e9``;
  ``k8s.io/apimachinery`` ``resource.Quantity`` suffixes), per pod.
- Compose: ``mem_limit`` or ``deploy.resources.limits.memory`` (Docker's byte units: ``b``, ``k``, ``m``,
  ``g``, powers of 1,024).

Pinned (page-locked) host memory is charged to the memory cgroup of the process that allocates it like any
other anonymous memory, so a tier that pins more than the container's limit gets the server OOM-killed
while it starts (LMCache and vLLM's native offloading pin their whole pool at start-up).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

import re

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.yaml_lines import dig, line_at
from kvplan.lazy_re import lazy_pattern

_K8S = lazy_pattern(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([kMGTPE])|[eE]([0-9]+)|(m))?$")
_K8S_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_K8S_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_DOCKER = lazy_pattern(r"^([0-9]+(?:\.[0-9]+)?)\s*([bkmg]?)b?$", re.I)
_DOCKER_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}


_WHOLE_UNITS = {"": 1, **_K8S_BINARY, **_K8S_DECIMAL}


def k8s_quantity(text: Any) -> int | None:
    """Bytes of a Kubernetes memory quantity (rounded up, as the kubelet does), or None if it is not one."""
    quantity = str(text).strip()
    unit = quantity.lstrip("0123456789")
    digits = len(quantity) - len(unit)
    if 0 < digits <= 9 and unit in _WHOLE_UNITS:  # 64Gi, 500G, 2048: what _K8S reads so, without compiling it
        return int(quantity[:digits]) * _WHOLE_UNITS[unit]
    return _quantity(quantity)


def _quantity(quantity: str) -> int | None:
    m = _K8S.match(quantity)
    if not m:
        return None
    number, binary, decimal, exponent, milli = m.groups()
    if number.isdigit() and len(number) <= 9 and not exponent and not milli:
        # a whole number with a unit (64Gi, 500G): an exact product within Decimal's 28 digits, without decimal
        return int(number) * (_K8S_BINARY[binary] if binary else _K8S_DECIMAL[decimal] if decimal else 1)
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(number)
    except InvalidOperation:
        return None
    if binary:
        value *= _K8S_BINARY[binary]
    elif decimal:
        value *= _K8S_DECIMAL[decimal]
    elif exponent:
        if int(exponent) > 30:
            return None
        value *= Decimal(10) ** int(exponent)
    elif milli:
        value /= 1000
    whole = int(value)
    return whole + (1 if value > whole else 0)


def docker_bytes(text: Any) -> int | None:
    """Bytes of a Docker memory size (``4g``, ``512m``, ``1gb``, ``2048``), or None."""
    m = _DOCKER.match(str(text).strip())
    if not m:
        return None
    return int(float(m.group(1)) * _DOCKER_UNITS[m.group(2).lower()])


def k8s_limit(container: Any) -> Value | None:
    raw = dig(container, "resources", "limits", "memory")
    if raw is None:
        return None
    nbytes = k8s_quantity(raw)
    line = line_at(container, "resources", "limits", "memory")
    return Value(nbytes, line, "resources.limits.memory", str(raw)) if nbytes is not None else None


def compose_limit(svc: Any) -> Value | None:
    for path, spelled in ((("mem_limit",), "mem_limit"), (("deploy", "resources", "limits", "memory"),
                                                           "deploy.resources.limits.memory")):
        raw = dig(svc, *path)
        if raw is not None:
            nbytes = docker_bytes(raw)
            if nbytes is not None:
                return Value(nbytes, line_at(svc, *path), spelled, str(raw))
    return None


def pinned_check(dep: Deployment, offload: dict[str, Any] | None, dp: int = 1) -> tuple[str, int | None, int, int] | None:
    """(message, line, pinned bytes per pod, limit) where the offload tier (of one replica; ``dp`` replicas)
    pins more host memory per pod than the container may use, else None."""
    limit = dep.host_memory
    if offload is None or limit is None or not limit.value:
        return None
    pods = max(1, dep.pods)
    pinned = -(-int(offload["pinned_bytes"]) * max(1, dp) // pods)  # the ranks are spread evenly over the pods
    if pinned <= limit.value:
        return None
    per = f" per pod ({pods} pods)" if pods > 1 else ""
    message = (f"{offload['kind']} pins {pinned:,} B of host memory{per} at start-up; {limit.spelled} "
               f"{limit.raw} is {limit.value:,} B: the container is OOM-killed (pinned memory counts against "
               "its memory limit)")
    return message, limit.line, pinned, int(limit.value)
