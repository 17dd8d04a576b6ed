"""What verify across ranks reports: one ``RankCheck`` per rank, gathered into a ``RanksResult``.

Both are plain frozen dataclasses with a stable JSON form (``to_dict``; fields are added, never
renamed) that also travels between the processes (``all_gather_object``, the --launch result file).
"""

from __future__ import annotations

from typing import Any

from kvplan.record import dataclass
from kvplan.verify.results import ComponentCheck


@dataclass(frozen=True)
class RankCheck:
    """One rank's shard: predicted against measured, per component."""

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
    measured_storage_bytes: int
    allocated_bytes: int
    reserved_bytes: int | None
    driver_bytes: int | None
    peak_allocated_bytes: int | None
    buffers: int
    num_blocks: int | None
    components: tuple[ComponentCheck, ...]
    released: bool
    error: str | None = None
    """Why this rank measured nothing (out of memory, no device); None when it measured."""
    referenced_bytes: int | None = None
    """With sharing: bytes of the distinct blocks this rank's block tables reference (None otherwise)."""

    @property
    def exact(self) -> bool:
        return self.error is None and self.measured_storage_bytes == self.predicted_bytes \
            and self.referenced_bytes in (None, self.predicted_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "tp_rank": self.tp_rank, "pp_rank": self.pp_rank, "local_rank": self.local_rank,
            "host": self.host,
            "device": {"device": self.device, "name": self.device_name, "total_bytes": self.device_total_bytes},
            "layers": {"first": self.first_layer, "count": self.num_layers},
            "predicted_bytes": self.predicted_bytes,
            "measured": {"storage_bytes": self.measured_storage_bytes, "allocated_bytes": self.allocated_bytes,
                         "reserved_bytes": self.reserved_bytes, "driver_bytes": self.driver_bytes,
                         "peak_allocated_bytes": self.peak_allocated_bytes},
            "error_bytes": self.measured_storage_bytes - self.predicted_bytes,
            "exact": self.exact,
            "buffers": self.buffers, "num_blocks": self.num_blocks,
            "components": [{"name": c.name, "kind": c.kind, "layers": c.layers, "predicted_bytes": c.predicted_bytes,
                            "measured_bytes": c.measured_bytes, "error_bytes": c.error_bytes}
                           for c in self.components],
            "released": self.released,
            "error": self.error,
            "referenced_bytes": self.referenced_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankCheck:
        m, dev = d["measured"], d["device"]
        return cls(
            rank=d["rank"], tp_rank=d["tp_rank"], pp_rank=d["pp_rank"], local_rank=d["local_rank"], host=d["host"],
            device=dev["device"], device_name=dev["name"], device_total_bytes=dev["total_bytes"],
            first_layer=d["layers"]["first"], num_layers=d["layers"]["count"],
            predicted_bytes=d["predicted_bytes"], measured_storage_bytes=m["storage_bytes"],
            allocated_bytes=m["allocated_bytes"], reserved_bytes=m["reserved_bytes"], driver_bytes=m["driver_bytes"],
            peak_allocated_bytes=m["peak_allocated_bytes"], buffers=d["buffers"], num_blocks=d["num_blocks"],
            components=tuple(ComponentCheck(c["name"], c["kind"], c["layers"], c["predicted_bytes"],
                                            c["measured_bytes"]) for c in d["components"]),
            released=d["released"], error=d["error"], referenced_bytes=d.get("referenced_bytes"),
        )


@dataclass(frozen=True)
class RanksResult:
    kvplan_version: str
    model_id: str
    engine: str
    engine_version: str
    kv_dtype: str
    block_size: int | None
    batch: int
    context: int
    tp: int
    pp: int
    backend: str
    launcher: str
    """'torchrun' (the environment gave the ranks) or 'launch' (--launch spawned them)."""
    ranks: tuple[RankCheck, ...]
    notes: tuple[str, ...] = ()
    sharing: dict[str, Any] | None = None
    """The shared-prefix / samples / beams / speculative workload every rank allocated (as verify's JSON)."""

    @property
    def world_size(self) -> int:
        return self.tp * self.pp

    @property
    def predicted_bytes(self) -> int:
        return sum(r.predicted_bytes for r in self.ranks)

    @property
    def measured_storage_bytes(self) -> int:
        return sum(r.measured_storage_bytes for r in self.ranks)

    @property
    def errors(self) -> tuple[RankCheck, ...]:
        return tuple(r for r in self.ranks if r.error is not None)

    @property
    def exact(self) -> bool:
        """Every rank measured exactly its prediction."""
        return all(r.exact for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (fields are added over time, never renamed)."""
        return {
            "kvplan_version": self.kvplan_version, "model": self.model_id, "engine": self.engine,
            "engine_version": self.engine_version, "kv_dtype": self.kv_dtype, "block_size": self.block_size,
            "batch": self.batch, "context": self.context, "tp": self.tp, "pp": self.pp,
            "world_size": self.world_size, "backend": self.backend, "launcher": self.launcher,
            "predicted_bytes": self.predicted_bytes, "measured_storage_bytes": self.measured_storage_bytes,
            "exact": self.exact, "ranks": [r.to_dict() for r in self.ranks], "notes": list(self.notes),
            "sharing": self.sharing,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RanksResult:
        return cls(d["kvplan_version"], d["model"], d["engine"], d["engine_version"], d["kv_dtype"],
                   d["block_size"], d["batch"], d["context"], d["tp"], d["pp"], d["backend"], d["launcher"],
                   tuple(RankCheck.from_dict(r) for r in d["ranks"]), tuple(d["notes"]), d.get("sharing"))
