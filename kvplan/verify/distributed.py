"""Every rank allocates its own shard under torch.distributed; rank 0 gets everyone's measurement.

Two ways to start the ranks, one code path:

- ``torchrun --nproc-per-node N -m kvplan verify ... --tp T --pp P``: torchrun sets ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; each process calls
  ``run_rank``.
- ``kvplan verify ... --launch N``: ``launch`` picks a free loopback port, sets the same variables
  and starts N processes with ``torch.multiprocessing.start_processes`` (spawn); each calls
  ``run_rank``, and rank 0 writes the gathered result to a file the launcher reads back.

Each rank plans every rank's cache (``kvplan.verify.ranks.plan_ranks``, no torch, the same on every
rank, so a bad flag fails everywhere before any collective), joins the process group (gloo on the
CPU and for ranks sharing one GPU, which NCCL refuses; NCCL when each rank has its own GPU),
allocates and measures its own shard, frees it, and ``all_gather_object`` hands every measurement to
every rank (so all of them exit with the same status). A rank that cannot allocate reports its error
through the same collective instead of leaving the others waiting; the process group's timeout
bounds everything else.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, TypedDict

from kvplan.engines import DEFAULT_ENGINE
from kvplan.record import dataclass
from kvplan.spec import ModelSpec
from kvplan.verify.errors import VerifyError
from kvplan.verify.rank_results import RankCheck, RanksResult
from kvplan.verify.ranks import RankPlan, check_parallel, parallel_notes, plan_ranks
from kvplan.verify.results import ComponentCheck
from kvplan.verify.shapes import workload_dict

__all__ = ["RankCheck", "RankError", "RanksResult", "launch", "run_rank", "under_torchrun", "free_port"]

DEFAULT_TIMEOUT_S = 300
MAX_TIMEOUT_S = 7 * 24 * 3600
RANKS_PER_CPU = 8
"""--launch starts at most this many rank processes per usable CPU: each imports torch (about 3 s of CPU)
and joins gloo collectives; past it the start-up alone takes minutes and the ranks time out."""
RANK_HOST_BYTES = 512 << 20
"""Host memory one rank process is taken to need besides its shard: measured 240 MB peak RSS for a
``--launch 2 --device cpu`` rank (torch 2.13 CPU build, gloo), doubled for CUDA builds' larger runtime."""
_ENV = ("RANK", "WORLD_SIZE")


class RankError(VerifyError):
    """An error of one rank only (its device), where the others may be fine: that rank reports it."""


# --------------------------------------------------------------------------------------- environment

@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int


def under_torchrun() -> bool:
    """torchrun (or another launcher using its variables) started this process as one rank."""
    return all(name in os.environ for name in _ENV)


def rank_env() -> RankEnv:
    values = {}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        raw = os.environ.get(name, "0" if name == "LOCAL_RANK" else None)
        if raw is None:
            raise VerifyError(f"{name} is not set: start the ranks with torchrun, or pass --launch N")
        try:
            values[name] = int(raw)
        except ValueError:
            raise VerifyError(f"{name}={raw!r} is not an integer") from None
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise VerifyError(f"{name} is not set: start the ranks with torchrun, or pass --launch N")
    env = RankEnv(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])
    if not 0 <= env.rank < env.world_size:
        raise VerifyError(f"RANK={env.rank} is outside WORLD_SIZE={env.world_size}")
    return env


def rank_device(text: str | None, local_rank: int, world_size: int) -> tuple[Any, str, str | None]:
    """(torch device, backend, note). No device: cuda:LOCAL_RANK, NCCL. An explicit device is shared
    by every rank of this node: gloo there (NCCL refuses two ranks on one GPU)."""
    from kvplan.verify.allocate import import_torch, resolve_device

    torch = import_torch()
    raw = (text or "").strip().lower()
    if raw == "cpu":
        return torch.device("cpu"), "gloo", None
    if raw in ("", "cuda"):
        if not torch.cuda.is_available():
            resolve_device("cuda")  # the one-line 'no CUDA here' error
        count = torch.cuda.device_count()
        if local_rank >= count:
            raise VerifyError(f"LOCAL_RANK {local_rank} has no GPU of its own ({count} visible): pass "
                              "--device cuda:0 to share one GPU, or --device cpu")
        return resolve_device(f"cuda:{local_rank}"), "nccl", None
    device = resolve_device(text)
    if device.type == "cuda" and world_size > 1:
        return device, "gloo", (f"every rank on {raw}: collectives over gloo (NCCL refuses two ranks on one "
                                "GPU); the driver (mem_get_info) deltas include the other ranks' allocations")
    return device, ("gloo" if device.type == "cpu" else "nccl"), None


def _require_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        # torch's object collectives (all_gather_object) decode through numpy
        raise VerifyError("verify across ranks needs numpy (torch's all_gather_object uses it): "
                          "pip install 'kvplan[verify]'") from None


# --------------------------------------------------------------------------------------- one rank

def run_rank(model: str | ModelSpec, *, tp: int = 1, pp: int = 1, batch: int = 1, context: int | None = None,
             engine: str = DEFAULT_ENGINE, engine_version: str | None = None, kv_dtype: str = "auto",
             block_size: int | None = None, device: str | None = None, timeout_s: int = DEFAULT_TIMEOUT_S,
             launcher: str = "torchrun", **sharing: Any) -> RanksResult:
    """Run this process's rank (from the torchrun environment) and return every rank's measurement.

    ``sharing``: ``prompt_len``, ``output_len``, ``shared_prefix``, ``n``, ``beam_width`` and the
    speculative arguments of ``kvplan.verify.verify``; every rank allocates its shard of that layout."""
    from datetime import timedelta

    from kvplan._version import __version__

    check_parallel(tp, pp)
    if not 0 < timeout_s <= MAX_TIMEOUT_S:  # timedelta refuses ~10^14 s inside each rank (a second line from torch)
        raise VerifyError(f"--timeout {timeout_s} must be positive, at most {MAX_TIMEOUT_S:,} s (a week)")
    env = rank_env()
    if env.world_size != tp * pp:
        raise VerifyError(f"WORLD_SIZE={env.world_size} but --tp {tp} x --pp {pp} = {tp * pp} ranks: start "
                          f"{tp * pp} processes (torchrun --nproc-per-node {tp * pp})")
    spec = model if isinstance(model, ModelSpec) else _load(model)
    plans = plan_ranks(spec, tp=tp, pp=pp, batch=batch, context=context, engine=engine,
                       engine_version=engine_version, kv_dtype=kv_dtype, block_size=block_size, **sharing)
    _require_numpy()
    from kvplan.verify.allocate import import_torch

    torch = import_torch()
    import torch.distributed as dist

    try:
        dev, backend, note = rank_device(device, env.local_rank, env.world_size)
    except VerifyError as exc:
        raise RankError(f"rank {env.rank}: {exc}") from None
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                            timeout=timedelta(seconds=timeout_s))
    try:
        mine = _measure(plans[env.rank], dev, env.local_rank).to_dict()
        gathered: list[Any] = [None] * env.world_size
        dist.all_gather_object(gathered, mine)
    finally:
        dist.destroy_process_group()
    first, work = plans[0].plan, plans[0].work
    assert work is not None
    notes = [*work.notes, *first.notes, *parallel_notes(spec, tp, pp), *([note] if note else [])]
    if dev.type == "cpu":
        notes.append("on the CPU torch keeps no allocator statistics: measured = the tensors' storage bytes")
    return RanksResult(
        kvplan_version=__version__, model_id=spec.id, engine=first.engine, engine_version=first.engine_version,
        kv_dtype=first.kv_dtype, block_size=first.block_size, batch=batch, context=work.context, tp=tp, pp=pp,
        backend=backend, launcher=launcher, ranks=tuple(RankCheck.from_dict(d) for d in gathered),
        notes=tuple(dict.fromkeys(notes)), sharing=workload_dict(work, batch),
    )


class _RankFields(TypedDict):
    """The ``RankCheck`` fields known before the shard is allocated (``_measure``)."""

    rank: int
    tp_rank: int
    pp_rank: int
    local_rank: int
    host: str
    device: str
    device_name: str
    device_total_bytes: int | None
    first_layer: int
    num_layers: int
    predicted_bytes: int
    buffers: int
    num_blocks: int | None


def _measure(rp: RankPlan, dev: Any, local_rank: int) -> RankCheck:
    """Allocate this rank's shard, measure it, free it. Errors become the check's ``error``."""
    from kvplan.errors import KvplanError
    from kvplan.verify import allocate as al

    info = al.device_info(dev)
    plan = rp.plan
    start = al.snapshot(dev)
    base = _RankFields(rank=rp.rank, tp_rank=rp.tp_rank, pp_rank=rp.pp_rank, local_rank=local_rank,
                       host=socket.gethostname(), device=al._where(dev), device_name=info.name,
                       device_total_bytes=info.total_bytes, first_layer=rp.first_layer, num_layers=rp.num_layers,
                       predicted_bytes=plan.predicted_bytes, buffers=len(plan.buffers), num_blocks=plan.num_blocks)
    try:
        alloc = al.allocate(plan, dev)
    except KvplanError as exc:
        return RankCheck(**base, measured_storage_bytes=0, allocated_bytes=0, reserved_bytes=None,
                         driver_bytes=None, peak_allocated_bytes=None,
                         components=tuple(ComponentCheck(c.name, c.kind, c.layers, c.predicted_bytes, 0)
                                          for c in plan.components),
                         released=al.live_tensors() == 0, error=str(exc))
    referenced = None
    try:
        m = al.measure(alloc)
        if rp.work is not None and (rp.work.workload is not None or rp.work.speculation is not None) \
                and plan.block_tables:
            from kvplan.verify.tables import block_table_checks

            # the shard's block tables as tensors: the distinct blocks they reference, in this rank's views
            referenced = sum(t.referenced_bytes for t in block_table_checks(al.import_torch(), alloc, plan))
    finally:
        alloc.release()
        del alloc
    end = al.snapshot(dev)
    released = al.live_tensors() == 0 and (start.allocated is None or end.allocated == start.allocated)
    components = [ComponentCheck(c.name, c.kind, c.layers, c.predicted_bytes, m.component_bytes.get(c.name, 0))
                  for c in plan.components]
    unused = m.storage_bytes - sum(m.component_bytes.values())
    if unused:  # bytes no component's views cover
        components.append(ComponentCheck("unaccounted", "unaccounted", 0, 0, unused))
    return RankCheck(**base, measured_storage_bytes=m.storage_bytes, allocated_bytes=m.allocated_bytes,
                     reserved_bytes=m.reserved_bytes, driver_bytes=m.driver_bytes,
                     peak_allocated_bytes=m.peak_allocated_bytes, components=tuple(components), released=released,
                     referenced_bytes=referenced)


def _load(model: str) -> ModelSpec:
    from kvplan.sources.resolve import load_model

    return load_model(model)


# --------------------------------------------------------------------------------------- --launch

def free_port() -> int:
    """A TCP port free on the loopback interface now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(model: str | ModelSpec, *, nprocs: int, tp: int = 1, pp: int = 1, batch: int = 1,
           context: int | None = None, engine: str = DEFAULT_ENGINE, engine_version: str | None = None,
           kv_dtype: str = "auto", block_size: int | None = None, device: str | None = None,
           timeout_s: int = DEFAULT_TIMEOUT_S, **sharing: Any) -> RanksResult:
    """Start ``nprocs`` = tp x pp rank processes on this machine (torch.multiprocessing, spawn) and
    return what rank 0 gathered. Everything that can be refused is refused here, before spawning.
    ``sharing``: as ``run_rank``."""
    import json
    import tempfile

    check_parallel(tp, pp)
    if nprocs != tp * pp:
        raise VerifyError(f"--launch {nprocs} must equal --tp {tp} x --pp {pp} = {tp * pp}")
    if under_torchrun():
        raise VerifyError("--launch starts its own ranks: not under torchrun (RANK and WORLD_SIZE are set)")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:  # timedelta refuses ~10^14 s inside each rank (a second line from torch)
        raise VerifyError(f"--timeout {timeout_s} must be positive, at most {MAX_TIMEOUT_S:,} s (a week)")
    spec = model if isinstance(model, ModelSpec) else _load(model)
    if isinstance(sharing.get("speculative_model"), str):  # loaded once here, not in every rank
        sharing["speculative_model"] = _load(sharing["speculative_model"])
    plans = plan_ranks(spec, tp=tp, pp=pp, batch=batch, context=context, engine=engine,
                       engine_version=engine_version, kv_dtype=kv_dtype, block_size=block_size, **sharing)
    check_host(nprocs, plans, device)
    _require_numpy()
    from kvplan.verify.allocate import import_torch

    import_torch()
    for local in range(nprocs):  # the device each rank will take, checked once here
        rank_device(device, local, nprocs)
    import torch.multiprocessing as mp

    kwargs = dict(tp=tp, pp=pp, batch=batch, context=context, engine=engine, engine_version=engine_version,
                  kv_dtype=kv_dtype, block_size=block_size, device=device, timeout_s=timeout_s, **sharing)
    with tempfile.TemporaryDirectory(prefix="kvplan-ranks-") as tmp:
        out = os.path.join(tmp, "rank0.json")
        ctx = mp.start_processes(  # type: ignore[no-untyped-call]  # torch leaves it unannotated
            _launched, args=(nprocs, free_port(), spec, kwargs, out), nprocs=nprocs,
                                 join=False, start_method="spawn")
        # the process group's timeout bounds every collective; this bounds start-up and the rest
        deadline = time.monotonic() + timeout_s + 60
        try:
            while not ctx.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise VerifyError(f"--launch: the ranks did not finish within {timeout_s + 60} s: stopped")
        except mp.ProcessRaisedException as exc:
            raise VerifyError(f"--launch: rank {exc.error_index} failed: {_last_line(str(exc))}") from None
        except mp.ProcessExitedException as exc:
            raise VerifyError(f"--launch: rank {exc.error_index} exited with status {exc.exit_code}") from None
        finally:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.terminate()
                    proc.join(5)
        with open(out, encoding="utf-8") as f:
            return RanksResult.from_dict(json.load(f))


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity mask, which containers' cpusets set), or the count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def check_host(nprocs: int, plans: tuple[RankPlan, ...], device: str | None) -> None:
    """Refuse, before spawning, more rank processes than this host's CPUs run or its memory holds: each rank
    needs ``RANK_HOST_BYTES`` plus, on the CPU, its shard."""
    from kvplan.units import format_bytes
    from kvplan.verify.host_memory import available_bytes

    cpus = usable_cpus()
    if cpus is not None and nprocs > cpus * RANKS_PER_CPU:
        raise VerifyError(f"{nprocs} rank processes: this host runs {cpus} CPU(s), at most {cpus * RANKS_PER_CPU} "
                          f"rank processes ({RANKS_PER_CPU} per CPU): start the ranks on more machines with torchrun",
                          field="launch")
    on_host = (device or "").strip().lower() == "cpu"
    need = sum(RANK_HOST_BYTES + (rp.plan.buffer_bytes if on_host else 0) for rp in plans)
    free = available_bytes()
    if free is not None and need > free:
        shards = " and its shard" if on_host else ""
        raise VerifyError(f"{nprocs} rank processes need about {format_bytes(need)} of host memory "
                          f"({format_bytes(RANK_HOST_BYTES)} each for torch{shards}), {format_bytes(free)} is "
                          "available (host, container, ulimit): lower the batch or the context, or start the ranks "
                          "on more machines with torchrun", field="launch")


def _launched(index: int, nprocs: int, port: int, spec: ModelSpec, kwargs: dict[str, Any], out: str) -> None:
    """One spawned rank: torchrun's variables, then the same path as under torchrun."""
    import json

    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE=str(nprocs),
                      LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    result = run_rank(spec, launcher="launch", **kwargs)
    if index == 0:
        tmp = out + ".part"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result.to_dict(), f)
        os.replace(tmp, out)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "no message"
    # 'kvplan.verify.errors.VerifyError: message' -> 'message'
    head, sep, rest = last.partition(": ")
    return rest if sep and "." in head and " " not in head else last
