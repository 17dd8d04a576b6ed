"""Several deployments on one GPU: what each takes, whether each starts, and the KV cache each gets.

Engines take memory in turn: each starts on what the ones before it hold (``Settings.device_used_bytes``), and
each engine's own rule (``Engine.device_share``, in ``engines/<engine>/device.py``) says what it holds once started
and whether it starts at all (vLLM from 0.9 refuses when the free memory is below its fraction of the total;
SGLang and TensorRT-LLM size their cache from the free memory, so a later one gets less). A deployment that does
not start holds nothing. ``share_gpu`` plans the order given and, where it differs, the reverse; where the given
order does not start every deployment with room for one request, the fixes are the nearest memory fraction of one
deployment (and the other order) with which all do, each planned again.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.errors import KvplanError, UsageError
from kvplan.record import dataclass, replace

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

FIX_STEP = 0.01
"""Fractions tried for a fix: two decimals, as people write them."""


@dataclass(frozen=True)
class Tenant:
    """One deployment on the shared GPU: ``plan_at(settings)`` plans it (``max_batch``) with those settings."""

    name: str
    engine: str
    settings: Any
    plan_at: Callable[[Any], Any]


@dataclass(frozen=True)
class Started:
    """One deployment in one start order."""

    name: str
    engine: str
    used_before_bytes: int
    """Memory the deployments started before it hold on the GPU."""
    starts: bool
    reason: str
    takes_bytes: int
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_concurrency: float
    fits: bool = True
    """One request of max_model_len fits its KV cache (an engine may start without: SGLang caps requests)."""
    capped: str = ""
    """What the engine does when it starts without room for one request ("" where it has room)."""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "engine": self.engine, "used_before_bytes": self.used_before_bytes,
                "starts": self.starts, "reason": self.reason, "fits": self.fits, "capped": self.capped,
                "takes_bytes": self.takes_bytes,
                "kv_cache_bytes": self.kv_cache_bytes, "kv_cache_tokens": self.kv_cache_tokens,
                "max_concurrency": round(self.max_concurrency, 4), "notes": list(self.notes)}


@dataclass(frozen=True)
class Order:
    deployments: tuple[Started, ...]
    total_bytes: int

    @property
    def all_start(self) -> bool:
        return all(d.starts for d in self.deployments)

    @property
    def all_fit(self) -> bool:
        """Every deployment starts and holds one request of its max_model_len."""
        return all(d.starts and d.fits for d in self.deployments)

    @property
    def left_bytes(self) -> int:
        return self.total_bytes - sum(d.takes_bytes for d in self.deployments)

    def to_dict(self) -> dict[str, Any]:
        return {"order": [d.name for d in self.deployments], "all_start": self.all_start, "all_fit": self.all_fit,
                "left_bytes": self.left_bytes, "deployments": [d.to_dict() for d in self.deployments]}


@dataclass(frozen=True)
class ShareFix:
    """A change with which every deployment starts and holds one request, in the order given (or the order it
    names): ``order`` is it planned again."""

    deployment: str
    """The deployment changed ("" for a change of start order)."""
    setting: str
    """The ``Settings`` field changed, or "order"."""
    flag: str
    value: Any
    order: Order

    def to_dict(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "setting": self.setting, "flag": self.flag, "value": self.value,
                "planned": self.order.to_dict()}

    def text(self) -> str:
        if self.setting == "order":
            return f"start {' then '.join(self.value)}"
        return f"{self.deployment}: {self.flag} {self.value:g}"


@dataclass(frozen=True)
class ShareResult:
    gpu: str
    total_bytes: int
    orders: tuple[Order, ...]
    """The order given, then the reverse where it differs."""
    fixes: tuple[ShareFix, ...] = ()

    @property
    def all_start(self) -> bool:
        return self.orders[0].all_start

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "total_bytes": self.total_bytes, "all_start": self.all_start,
                "orders": [o.to_dict() for o in self.orders], "fixes": [f.to_dict() for f in self.fixes]}


def start_in_turn(tenants: Sequence[Tenant]) -> tuple[Order, str]:
    """Each tenant planned on the memory the ones before it left; (the order, the GPU's name)."""
    from kvplan.engines import get_engine

    used, out, gpu, total = 0, [], "", 0
    for tenant in tenants:
        plan = tenant.plan_at(replace(tenant.settings, device_used_bytes=used))
        if gpu and (plan.gpu_name, plan.gpu_total_bytes) != (gpu, total):
            raise UsageError(f"{tenant.name} is planned on {plan.gpu_name}, the others on {gpu}: deployments "
                             "sharing a GPU share its type", field="gpu")
        gpu, total = plan.gpu_name, plan.gpu_total_bytes
        eng = get_engine(tenant.engine)
        _, version = eng.version_of(plan.engine_version)
        share = eng.device_share(plan.items, total, plan.tp, plan.pp, version, used)
        reason, capped = share.refusal, ""
        if not plan.fits and not reason:
            reason = _short(tenant.engine, eng, plan, used)
            if reason.startswith("+"):  # the engine starts all the same (and caps requests)
                capped, reason = reason[1:], ""
        starts = not reason
        out.append(Started(tenant.name, plan.engine, used, starts, reason, share.takes_bytes if starts else 0,
                           plan.per_gpu.kv_cache_bytes, plan.kv_cache_tokens, plan.max_concurrency, plan.fits,
                           capped, share.notes))
        if starts:
            used += share.takes_bytes
    return Order(tuple(out), total), gpu


def _short(engine: str, eng: Any, plan: Any, used: int) -> str:
    """Why a deployment whose pool holds less than one request does not start; "+" and a note where its engine
    starts all the same (SGLang caps requests: its serve flags' ``short_pool``; TensorRT-LLM shrinks the window)."""
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(engine)
    if serve is not None and serve.short_pool is not None:
        capped = serve.short_pool(plan.kv_cache_tokens, plan.max_model_len, {})
        if capped is not None:
            return capped.message if capped.severity == "error" else "+" + capped.message
    if eng.unfit and plan.per_gpu.kv_cache_bytes > 0:
        return "+" + eng.unfit
    return (f"its KV cache does not hold one request of {plan.max_model_len:,} tokens beside the "
            f"{used / (1 << 30):.2f} GiB others hold")


def share_gpu(tenants: Sequence[Tenant], *, fixes: bool = True) -> ShareResult:
    """The deployments started in the order given (and in the reverse where it differs), with fixes where the
    order given does not start them all."""
    if len(tenants) < 2:
        raise UsageError("sharing a GPU takes two deployments or more", field="deployments")
    given, gpu = start_in_turn(tenants)
    orders = [given]
    reverse = list(reversed(tenants))
    if [t.name for t in reverse] != [t.name for t in tenants]:
        orders.append(start_in_turn(reverse)[0])
    found: list[ShareFix] = []
    if fixes and not given.all_fit:
        if len(orders) > 1 and orders[1].all_fit:
            found.append(ShareFix("", "order", "", [t.name for t in reverse], orders[1]))
        for i in range(len(tenants)):
            fix = _fraction_fix(tenants, i, given.deployments[i])
            if fix is not None:
                found.append(fix)
    return ShareResult(gpu, given.total_bytes, tuple(orders), tuple(found))


def _fraction_fix(tenants: Sequence[Tenant], i: int, started: Started) -> ShareFix | None:
    """The memory fraction of tenant ``i`` nearest its own with which every tenant starts, in the order given."""
    from kvplan.engines import get_engine

    tenant = tenants[i]
    fraction = get_engine(tenant.engine).memory_fraction
    if fraction is None or tenant.settings.kv_cache_memory_bytes is not None:
        return None
    field, flag = fraction
    current = getattr(tenant.settings, field)
    if current is None:
        current = tenant.plan_at(replace(tenant.settings, device_used_bytes=started.used_before_bytes)
                                 ).engine_defaults.get(field)
    steps = round(1 / FIX_STEP)
    values = sorted((round(k * FIX_STEP, 2) for k in range(1, steps + 1)), key=lambda v: (abs(v - current), v))
    for value in values:
        if abs(value - current) < FIX_STEP / 2:
            continue
        changed = [*tenants]
        changed[i] = replace(tenant, settings=replace(tenant.settings, **{field: value}))
        try:
            order, _ = start_in_turn(changed)
        except KvplanError:
            continue
        if order.all_fit:
            return ShareFix(tenant.name, field, flag, value, order)
    return None
