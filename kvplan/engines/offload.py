"""KV-cache offload tiers: what a host-memory tier holds and how long bringing a request back takes.

Shared types and the link catalog (``kvplan/data/links.yaml``). The engine packages own their rules:
vLLM's in ``engines/vllm/offload.py``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any
    from pathlib import Path

from functools import lru_cache

from kvplan.errors import UsageError
from kvplan.record import dataclass

DEFAULT_LINK = "pcie5-x16"


@dataclass(frozen=True)
class Link:
    name: str
    bytes_per_s: int
    """Peak bytes per second in one direction."""
    source: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class OffloadTier:
    """One host-memory tier beside the GPU pool, for the whole deployment (all tp x pp ranks)."""

    kind: str
    """What the engine calls it: 'vllm native CPU offloading', 'vllm V0 swap space'."""
    host_bytes: int
    """Bytes the flag gives the tier."""
    blocks: int
    """Blocks the tier holds (what the engine logs)."""
    block_size: int
    tokens: int
    pinned_bytes: int
    """Page-locked host memory the engine allocates for the tier, all ranks together, with its allocator's rounding
    (the larger end of ``pinned_range`` where the release leaves the tensor set open)."""
    requests: int
    """Requests of max_model_len the tier holds whole ("warm" sessions)."""
    request_bytes_per_gpu: int
    """Bytes one request of max_model_len moves over each GPU's link."""
    link: Link
    restore_seconds: float
    """Time to copy one request back to the GPU at the link's peak: a lower bound."""
    disk: DiskTier | None = None
    """A disk tier below this one (LMCache's local disk), or None."""
    remarks: tuple[str, ...] = ()
    """What else the engine's rules say about this tier (how its release pins, what it logs), said in notes."""
    held_bytes: int | None = None
    """Bytes the tier's blocks fill, all ranks together, before any allocator rounding (None: ``pinned_bytes``)."""
    pinned_range: tuple[int, int] | None = None
    """(least, most) pinned bytes where the engine's choice of tensors is not settled by what kvplan knows."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "host_bytes": self.host_bytes, "blocks": self.blocks, "block_size": self.block_size,
            "tokens": self.tokens, "pinned_bytes": self.pinned_bytes, "requests": self.requests,
            "request_bytes_per_gpu": self.request_bytes_per_gpu, "link": self.link.name,
            "link_bytes_per_s": self.link.bytes_per_s, "restore_seconds": self.restore_seconds,
            "disk": self.disk.to_dict() if self.disk is not None else None,
            "held_bytes": self.held_bytes if self.held_bytes is not None else self.pinned_bytes,
            "pinned_bytes_range": list(self.pinned_range) if self.pinned_range is not None else None,
        }

    def notes(self) -> list[str]:
        out = [
            f"{self.kind}: {self.host_bytes / 2**30:.2f} GiB of host memory hold {self.blocks:,} blocks "
            f"({self.tokens:,} tokens, {self.requests:,} requests of max_model_len kept warm); "
            f"{self.pinned_bytes:,} B pinned",
            f"bringing one request back moves {self.request_bytes_per_gpu:,} B per GPU over {self.link.name} "
            f"({self.link.bytes_per_s / 1e9:.1f} GB/s peak): at least {self.restore_seconds * 1e3:.1f} ms",
        ]
        if self.disk is not None:
            out.append(self.disk.note())
        return out + list(self.remarks)


@dataclass(frozen=True)
class DiskTier:
    """A disk tier beside a host-memory tier, for the whole deployment (all ranks that store)."""

    kind: str
    disk_bytes: int
    """Bytes the configuration gives the tier, all storing ranks together."""
    blocks: int
    """Chunks (blocks) each storing rank keeps on disk."""
    tokens: int
    requests: int
    """Requests of max_model_len the tier holds whole."""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "disk_bytes": self.disk_bytes, "blocks": self.blocks, "tokens": self.tokens,
                "requests": self.requests}

    def note(self) -> str:
        return (f"{self.kind}: {self.disk_bytes / 2**30:.2f} GiB of disk hold {self.blocks:,} chunks per rank "
                f"({self.tokens:,} tokens, {self.requests:,} requests of max_model_len); reading them back is "
                "bounded by the disk, which kvplan has no figure for: not modelled")


def links_path() -> Path:
    from pathlib import Path

    return Path(_links_file())


def _links_file() -> str:
    """``str(links_path())`` without importing pathlib (~5 ms of a check's start): a TensorRT-LLM plan looks up
    its offload link on every check."""
    import os

    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "links.yaml")


@lru_cache(maxsize=1)
def load_links() -> tuple[Link, ...]:
    from kvplan.data_files import read_bundled

    data = read_bundled(_links_file())  # its JSON twin (tools/build_data.py): no yaml import
    return tuple(Link(e["name"], int(e["bytes_per_s"]), e["source"], tuple(e.get("aliases", ())))
                 for e in data["links"])


def find_link(name: str | None) -> Link:
    key = (name or DEFAULT_LINK).strip().lower()
    for link in load_links():
        if key == link.name or key in link.aliases:
            return link
    known = ", ".join(link.name for link in load_links())
    raise UsageError(f"unknown link '{name}' (known: {known})", field="offload_link")


def uniform_token_bytes(layout: Any, tier: str, field: str, why: str = "") -> int:
    """Bytes per token of every layer one rank of this stage holds, for a stage whose layers all hold every
    token (full attention or MLA, no padding, no recurrent state): the only layouts kvplan plans host tiers
    for; any other is refused naming the tier (``tier``: "vLLM's host offload tiers", ...)."""
    for g in layout.groups:
        if g.padding or not g.layer.attends_all or g.state is not None:
            raise UsageError(f"kvplan models {tier} for models whose layers all hold every token; this one has "
                             f"{g.kind} layers{why}", field=field)
    return sum(g.count * g.token.bytes for g in layout.groups)
