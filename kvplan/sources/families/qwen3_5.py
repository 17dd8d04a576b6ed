"""Qwen3.5 (and Qwen3.6, the same ``model_type``): Qwen3-Next's Gated DeltaNet + gated attention decoder with
a dense MLP (``qwen3_5``) or Qwen3-Next's MoE (``qwen3_5_moe``), under a vision tower.

The cached layers are Qwen3-Next's (:func:`~kvplan.sources.families.qwen3_next.qwen3_next_layers`: the
same ``layer_types`` / ``full_attention_interval`` reading, the same DeltaNet state); the parameters are
its decoder's too (transformers ``modeling_qwen3_5.py``), with the DeltaNet input projections stored
split (in_proj_qkv / in_proj_z / in_proj_b / in_proj_a), the decoder under ``model.language_model``,
the MTP layers counted by ``mtp_num_hidden_layers``, and the Qwen3-VL-style vision tower below.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.qwen3_next import hybrid_gdn_params, qwen3_next_layers
from kvplan.sources.families.reader import MAX_LAYERS, ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter


def qwen3_5_mtp_layers(reader: ConfigReader) -> int:
    """``mtp_num_hidden_layers``: the ``mtp.*`` layers a Qwen3.5 checkpoint ships (transformers
    ``Qwen3_5TextConfig``; vLLM ``Qwen3_5MTP`` and SGLang build that many); a config without it is read as
    the other families are (``num_nextn_predict_layers``, 0 when absent)."""
    found = reader.raw("mtp_num_hidden_layers")
    if found is not None:
        return reader.int_of(found[0], found[1], maximum=MAX_LAYERS, minimum=0)
    return reader.mtp_layers()


def qwen3_5_params(b: Counter) -> None:
    """qwen3_5: transformers ``modeling_qwen3_5.py`` (``Qwen3_5ForConditionalGeneration``): the hybrid
    decoder of :func:`~kvplan.sources.families.qwen3_next.hybrid_gdn_params` under
    ``model.language_model``, its ``mtp.*`` layers, and the vision tower."""
    hybrid_gdn_params(b, decoder="model.language_model", split_in_proj=True)
    qwen3_5_vision(b)


def qwen3_5_vision(b: Counter) -> None:
    """``model.visual`` (``Qwen3_5VisionModel``): a Conv3d patch embedding (bias) over temporal_patch_size x
    patch_size^2 pixels, a learned position embedding of num_position_embeddings, ``depth`` pre-LN blocks
    (LayerNorms with bias, fused qkv and proj with bias, a GELU MLP linear_fc1 / linear_fc2 with bias), and
    the patch merger: LayerNorm(hidden), linear_fc1 (hidden x merge^2, square) and linear_fc2 to
    out_hidden_size, with biases. DeepStack mergers (Qwen3-VL) are not part of Qwen3.5: a config that
    lists them has them said, not counted."""
    vc = b.top.get("vision_config")
    if not isinstance(vc, dict):
        b.note("qwen3_5 config without vision_config: vision tower not counted")
        return
    vh, depth, inter, patch, temporal, merge, positions, out = (_vision_int(b, vc, name) for name in (
        "hidden_size", "depth", "intermediate_size", "patch_size", "temporal_patch_size", "spatial_merge_size",
        "num_position_embeddings", "out_hidden_size"))
    chans = _vision_int(b, vc, "in_channels") if "in_channels" in vc else 3  # Qwen3_5VisionConfig default
    v = "model.visual"
    b.add("vision", f"{v}.patch_embed.proj", vh, chans, temporal, patch, patch)
    b.add("vision", f"{v}.patch_embed.proj.bias", vh)
    b.add("vision", f"{v}.pos_embed", positions, vh)
    per_block = 4 * vh + (3 * vh * vh + 3 * vh) + (vh * vh + vh) + (vh * inter + inter) + (inter * vh + vh)
    b.add("vision", f"{v}.blocks", per_block, count=depth)
    merged = vh * merge * merge
    b.norm(f"{v}.merger.norm", vh, bias=True, component="vision")
    b.linear("vision", f"{v}.merger.linear_fc1", merged, merged, bias=True, quantizable=False)
    b.linear("vision", f"{v}.merger.linear_fc2", merged, out, bias=True, quantizable=False)
    if vc.get("deepstack_visual_indexes"):
        b.note("vision_config.deepstack_visual_indexes: DeepStack mergers not counted")


def _vision_int(b: Counter, vc: dict, name: str) -> int:
    if vc.get(name) is None:
        raise ConfigError(f"vision_config has no {name} (needed to count the qwen3_5 vision tower)")
    return b.reader.int_of(f"vision_config.{name}", vc[name])


_QWEN3_5_DEFAULTS = {
    # transformers Qwen3_5TextConfig default (configuration_qwen3_5.py); the DeltaNet head counts and sizes
    # are required, as for qwen3_next
    "linear_conv_kernel_dim": (4, "transformers Qwen3_5TextConfig"),
}
# qwen3_5_moe (Qwen3.5-35B-A3B / -122B / -397B, Qwen3.6-35B-A3B): the same decoder with Qwen3-Next's MoE
# (num_experts of moe_intermediate_size, a shared expert and its gate), counted by the same rule
register("qwen3_5_text", "qwen3_5", "qwen3_5_moe_text", "qwen3_5_moe", layers=qwen3_next_layers, params=qwen3_5_params, defaults=_QWEN3_5_DEFAULTS,
         own_towers=True, mtp=qwen3_5_mtp_layers)
