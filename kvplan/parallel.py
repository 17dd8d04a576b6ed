"""Tensor and pipeline parallelism: what one GPU holds of a model's cache.

- Pipeline parallelism splits the decoder layers into stages. vLLM's ``get_pp_indices``
  (``vllm/distributed/utils.py``) gives every stage ``layers // pp`` layers and hands the remainder,
  one each, to the stages before the last, counting backwards (61 layers on PP4: 15, 15, 16, 15);
  kvplan uses that split for every engine and sizes the cache by the stage that holds the most,
  since engines take the smallest block count across ranks.
- Tensor parallelism splits KV heads: vLLM (``ModelConfig.get_num_kv_heads``) and SGLang keep
  ``max(1, kv_heads // tp)`` heads per rank, so past ``tp = kv_heads`` heads are replicated, not
  split. An MLA latent has no heads to split and is replicated on every rank. Recurrent state is split
  along its channels / heads (vLLM ``MambaStateShapeCalculator``).
"""

from __future__ import annotations

from kvplan.errors import UsageError
from kvplan.record import replace
from kvplan.spec import MLA, KVAttention, LayerSpec, ModelSpec, Recurrent, group_layers


def pp_partitions(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, vLLM's default split."""
    if pp < 1:
        raise UsageError(f"{pp} must be at least 1", field="pp")
    if pp > num_layers:
        raise UsageError(f"{pp} exceeds the model's {num_layers} layers", field="pp")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def stage_specs(spec: ModelSpec, pp: int) -> list[ModelSpec]:
    """The model cut into ``pp`` pipeline stages (layer indices stay local to each stage)."""
    if pp == 1:
        return [spec]
    layers = [replace(group, count=1) for group in spec.layers for _ in range(group.count)]
    stages, start = [], 0
    for size in pp_partitions(len(layers), pp):
        chunk = [layer.in_stage(start) for layer in layers[start:start + size]]
        stages.append(replace(spec, layers=group_layers(chunk), assumptions=()))
        start += size
    return stages


def heads_per_rank(kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel rank holds (vLLM, SGLang): replicated once tp exceeds them."""
    return max(1, kv_heads // tp)


def shard_layer(layer: LayerSpec, tp: int) -> LayerSpec:
    """The part of ``layer`` one of ``tp`` ranks caches (vLLM / SGLang rules)."""
    if tp == 1:
        return layer
    if isinstance(layer, KVAttention):
        return replace(layer, kv_heads=heads_per_rank(layer.kv_heads, tp))
    if isinstance(layer, Recurrent):
        first = layer.ssm_state[0]
        return replace(layer, conv_dim=-(-layer.conv_dim // tp),
                       ssm_state=(-(-first // tp), *layer.ssm_state[1:]))
    return layer  # mla: replicated; shared / none: nothing


def shard_spec(spec: ModelSpec, tp: int) -> ModelSpec:
    if tp < 1:
        raise UsageError(f"{tp} must be at least 1", field="tp")
    if tp == 1:
        return spec
    key = (spec, tp)
    found = _SHARDS.get(key)
    if found is None:
        if len(_SHARDS) >= 1024:  # bounded: a run's models x tp sizes
            _SHARDS.clear()
        found = _SHARDS[key] = replace(spec, layers=tuple(shard_layer(layer, tp) for layer in spec.layers))
    return found


_SHARDS: dict[tuple[ModelSpec, int], ModelSpec] = {}
"""(spec, tp) -> one rank's spec: a frozen value, the same for every engine, release and KV dtype laid out on it
(``kvplan check`` lays out a model at one tp for each of them; rebuilding the spec was a third of a layout)."""


def tp_notes(spec: ModelSpec, tp: int) -> list[str]:
    """Warnings worth showing: KV heads copied across ranks, latents replicated."""
    notes = []
    heads = {layer.kv_heads for layer in spec.layers if isinstance(layer, KVAttention)}
    for kv_heads in sorted(heads):
        if tp > kv_heads:
            notes.append(f"tp {tp} exceeds the {kv_heads} KV heads: each head is replicated on "
                         f"{tp // kv_heads} ranks, memory spent on copies (per-GPU KV as at tp {kv_heads})")
    if any(isinstance(layer, MLA) for layer in spec.layers) and tp > 1:
        notes.append(f"the MLA latent is replicated on all {tp} tensor-parallel ranks: per-GPU KV does not "
                     "shrink with tp")
    return notes
