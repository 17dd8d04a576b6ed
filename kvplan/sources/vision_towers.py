"""Vision towers of the multimodal model families kvplan plans: their shape, and the largest item an engine's
processor feeds them (what vLLM's profiling run encodes, kvplan/engines/vllm/encoder_profile.py; SGLang's
fraction rule reads the layers and width only, kvplan/engines/sglang/fraction.py).

A ModelSpec keeps the model type and id, not the checkpoint's vision_config, so the towers are recorded here by
model type (read in tests/data/hf_configs and the checkpoints' preprocessor configs, as each entry says).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

from kvplan.record import dataclass, replace

Release = tuple[int, ...]
"""A vLLM release as kvplan.engines.version holds it (sources do not import engines)."""


@dataclass(frozen=True)
class VisionTower:
    layers: int
    hidden: int
    """vision_config's num_hidden_layers and hidden_size."""
    mlp: int = 0
    """The tower's MLP width (vision_config intermediate_size); 0: not recorded."""
    patch_values: int = 0
    """Pixel values per patch: channels x patch^2 (x the temporal patch, where the processor has one)."""
    patches_per_item: int = 0
    """Patches the encoder sees for the largest item the processor makes (vLLM's dummy image); 0: not derived."""
    tokens_per_item: int = 0
    """Prompt tokens vLLM counts for that item (``get_mm_max_tokens_per_item``: what divides the encoder budget)."""
    embeds_per_item: int = 0
    """Text-model embeddings the encoder returns for it (0: ``tokens_per_item``; fewer where the prompt also
    holds separator or timestamp tokens)."""
    masked_attention: bool = False
    """The encoder attends over all the batch's patches at once with a dense patches x patches mask (not a
    kernel over per-image lengths)."""
    transformers_tower: str = ""
    """Where vLLM runs the tower as Hugging Face transformers' module (AutoModel.from_config), what in it sets the
    peak: it follows the transformers release installed, not vLLM's code."""
    where: str = ""
    """Where the figures come from."""
    gated_mlp: bool = False
    """The MLP is gated (gate and up projections side by side: 2 x mlp wide, then mlp after the activation)."""
    output_widths: int = 1
    """Text-hidden-wide outputs per embedding (Qwen3-VL: the merger's and one per deepstack layer)."""
    sized_by: Callable[[int, Release], tuple[int, int, int]] | None = None
    """Where the largest item follows max_model_len and the vLLM release: (patches, prompt tokens, embeddings)."""

    def sized(self, max_model_len: int, release: Release) -> VisionTower:
        """The tower with its largest item for ``max_model_len`` under vLLM ``release`` (itself where the item
        is fixed)."""
        if self.sized_by is None:
            return self
        patches, tokens, embeds = self.sized_by(max_model_len, release)
        return replace(self, patches_per_item=patches, tokens_per_item=tokens, embeds_per_item=embeds)

    @property
    def embeds(self) -> int:
        return self.embeds_per_item or self.tokens_per_item

    @property
    def profiled(self) -> bool:
        return self.patches_per_item > 0 and self.tokens_per_item > 0 and self.mlp > 0


# SigLIP-So400m at 896 x 896, patch 14 (google/gemma-3-*-it vision_config; Gemma 3 4B, 12B and 27B ship the same
# tower): 64 x 64 = 4,096 patches, average-pooled 4 x 4 to mm_tokens_per_image 256 (vLLM gemma3_mm.py
# get_num_image_tokens: (num_crops + 1) x 256, no crops with pan-and-scan off, its default; the dummy image is
# resized to 896 x 896). Read in 0.19.0, 0.21.0, 0.25.1, 0.33.0; the 0.19.0 H100 logs print 32 items of 8,192 tokens
GEMMA3 = VisionTower(27, 1152, 4304, 3 * 14 * 14, 64 * 64, 256, where=(
    "SigLIP 896 px / patch 14 pooled to 256 tokens (vLLM gemma3_mm.py get_num_image_tokens)"))
# Gemma 4 (gemma4_vision: patch 16, pooling 3 x 3; google/gemma-4-31B-it, -26B-A4B-it (27, 1152, 4304),
# -E2B-it / -E4B-it (16, 768, 3072)): vLLM gemma4_mm.py get_mm_max_tokens_per_item gives image 280, video
# _VIDEO_MAX_FRAMES 32 x (_VIDEO_MAX_SOFT_TOKENS 70 + 2 + 6) = 2,496 (audio, E2B/E4B, audio_seq_length: fewer), so
# the dummy batch is videos: get_dummy_mm_data makes 32 frames of 224 x 224 (the image processor's size is None),
# each fitted to 70 x 3^2 = 630 patches by _compute_num_soft_tokens (384 x 384 px: 576 patches, 64 embeddings) and
# padded to 630 patch slots. Read in 0.19.0, 0.21.0, 0.25.1, 0.33.0 (the same constants and dummy). The tower is
# transformers' (gemma4_mm.py: AutoModel.from_config): from 0.25 vLLM encodes frames in chunks sized for
# Gemma4VisionPatchEmbedder's F.one_hot position transient, (frames, patches, 2, 10240) int64 (_encoder_chunk); the
# transformers 5.24 wheel looks positions up with F.embedding instead
GEMMA4 = VisionTower(27, 1152, 4304, 3 * 16 * 16, 32 * 630, 32 * (70 + 2 + 6), 32 * 64, where=(
    "a 32-frame 224 px dummy video, 630 patch slots and 64 embeddings a frame (vLLM gemma4_mm.py "
    "get_mm_max_tokens_per_item, get_dummy_mm_data, _compute_num_soft_tokens)"), transformers_tower=(
    "Gemma4VisionPatchEmbedder's position transient (an F.one_hot of 160 KiB a patch in some transformers releases; "
    "vLLM gemma4_mm.py _encoder_chunk)"))
GEMMA4_SMALL = replace(GEMMA4, layers=16, hidden=768, mlp=3072)
# Llama 4 (meta-llama/Llama-4-Scout/Maverick vision_config): 336 px tiles, patch 14 (576 patches + 1 class
# embedding), pixel shuffle 0.5 to 144 tokens a tile; vLLM mllama4.py get_image_size_with_most_features: a 16 x 1
# tile image (image processor max_patches 16), plus the global tile = 17 chunks
LLAMA4 = VisionTower(34, 1408, 5632, 3 * 14 * 14, 17 * 577, 17 * 144, where=(
    "17 tiles of 336 px (max_patches 16 + the global tile), 144 tokens each (vLLM mllama4.py "
    "get_image_size_with_most_features, get_patch_per_chunk)"))
# MoonViT (moonshotai/Kimi-VL-A3B-Instruct vision_config, patch 14, merge 2 x 2; preprocessor in_token_limit 4096
# patches): vLLM kimi_vl.py's dummy image is 1024 x 1024 (MaxImageTokenMeta), scaled to 897 x 897 to fit 4,096
# patches, padded to 924 x 924: 66 x 66 = 4,356 patches, 33 x 33 = 1,089 tokens (get_num_image_tokens)
KIMI_VL = VisionTower(27, 1152, 4304, 3 * 14 * 14, 66 * 66, 33 * 33, where=(
    "MoonViT: a 1024 px dummy image fitted to 4,096 patches, 4,356 patches padded, 1,089 tokens (vLLM kimi_vl.py "
    "MaxImageTokenMeta, get_num_image_tokens)"))
# Pixtral's tower in Mistral 3 (Mistral-Small-3.1-24B-Instruct-2503 vision_config: 1540 px, patch 14, spatial
# merge 2): 110 x 110 = 12,100 patches, 55 x 55 = 3,025 image embeddings (the [IMG_BREAK] / [IMG_END] tokens are
# not embeddings). Without xformers (not a vLLM dependency) vLLM pixtral.py PixtralHFVisionModel.forward builds
# transformers' generate_block_attention_mask over every patch of the batch: a dense patches^2 mask
MISTRAL3 = VisionTower(24, 1024, 4096, 3 * 14 * 14, 110 * 110, 55 * 55, masked_attention=True, where=(
    "Pixtral 1540 px / patch 14, merged 2 x 2 to 3,025 embeddings, dense block mask without xformers (vLLM "
    "mistral3.py get_image_size_with_most_features, pixtral.py PixtralHFVisionModel.forward)"))



def qwen2_vl_item(max_model_len: int, release: Release) -> tuple[int, int, int]:
    """Qwen2-VL / Qwen2.5-VL (vLLM 0.11.0 and 0.19.0 qwen2_vl.py Qwen2VLProcessingInfo): the largest image is
    ``get_image_size_with_most_features``, smart_resize of 9,999,999 px square under the preprocessor's max_pixels
    12,845,056 = 3,584 px square (factor 28): 256 x 256 patches of 14 px, 16,384 tokens after the 2 x 2 merge. The
    video (mm_counts video 1, registry.py get_max_tokens_per_item_by_modality) takes ``_get_max_video_frames``
    (max_model_len): 2 frames a temporal patch of 16,384 tokens, at most _MAX_FRAMES_PER_VIDEO 14 frames, and wins
    where it is longer (the image, listed first, on a tie). 0.9.0 - 0.10.1 (get_num_frames_with_most_features) first
    take one image's tokens from max_model_len and allow 16 frames (8 temporal patches)."""
    if release < (0, 11):
        tokens = 16384 * max(1, min((max_model_len - 16384) // 16384, 8))
    else:
        tokens = 16384 * max(1, min(max_model_len // 16384, 7))
    return 4 * tokens, tokens, tokens


def _qwen3_video_side(frames: int) -> int:
    """transformers 4.57 Qwen3-VL video smart_resize of a 4,096 px square frame (factor 32, the video processor's
    longest_edge 25,165,824 pixels over all frames; min_pixels is never binding here)."""
    t_bar = round(frames / 2) * 2
    if t_bar * 4096 * 4096 <= 25165824:
        return 4096
    beta = math.sqrt(frames * 4096 * 4096 / 25165824)
    return max(32, math.floor(4096 / beta / 32) * 32)


def _qwen3_video_soft_tokens(frames: int) -> int:
    side = _qwen3_video_side(frames) // 16
    return ((frames + frames % 2) // 2) * side * side // 4


@cache
def qwen3_vl_item(max_model_len: int, release: Release) -> tuple[int, int, int]:
    """Qwen3-VL (vLLM qwen3_vl.py Qwen3VLProcessingInfo): the image is 4,096 px square (preprocessor longest_edge
    16,777,216, factor 32): 65,536 patches, 16,384 tokens. In 0.11.0 - 0.12.0 the video takes
    ``_get_max_video_frames`` from 2 frames (the most frames whose soft tokens fit max_model_len, at most
    _MAX_FRAMES_PER_VIDEO 24,576), each fitted by the video processor so that all frames hold at most 25,165,824
    pixels, and counts 12.5 prompt tokens a soft token (the timestamps, get_max_video_tokens): the video wins, and
    the dummy video is that many frames of that size (get_dummy_mm_data, do_resize off). From 0.13.0 (read in
    0.13.0, 0.16.0, 0.19.0, 0.33.0) get_max_video_tokens counts soft tokens only, at most 12,288 under that pixel
    cap: the image wins."""
    image = (4 * 16384, 16384, 16384)
    if release >= (0, 13):
        return image
    frames = 2
    while frames < 24576 and _qwen3_video_soft_tokens(frames + 1) <= max_model_len:
        frames += 1
    soft = _qwen3_video_soft_tokens(frames)
    if int(soft * 12.5) <= 16384:
        return image
    return 4 * soft, int(soft * 12.5), soft


# Qwen2.5-VL (Qwen/Qwen2.5-VL-7B-Instruct vision_config: depth 32, hidden 1280, intermediate 3420 gated SiLU,
# patch 14, temporal patch 2, spatial merge 2, window 112 with full attention in blocks 7, 15, 23, 31): 3 x 2 x 14^2
# = 1,176 pixel values a patch (an image is repeated to the temporal patch). The 3B / 32B / 72B towers are the same.
# Its attention (vLLM qwen2_5_vl.py) runs flash-attn's varlen kernel over the windows and, in the full-attention
# blocks, over each frame: no patches^2 buffer (assumed: an SDPA / xformers fallback on older GPUs is not modelled)
QWEN2_5_VL = VisionTower(32, 1280, 3420, 3 * 2 * 14 * 14, gated_mlp=True, sized_by=qwen2_vl_item, where=(
    "Qwen2.5-VL: a 3,584 px image or a video of up to 7 temporal patches, 4 patches a token (vLLM qwen2_vl.py "
    "get_image_size_with_most_features, get_num_frames_with_most_features)"))
# Qwen2-VL (Qwen/Qwen2-VL-7B-Instruct vision_config: depth 32, embed_dim 1280, mlp_ratio 4, QuickGELU)
QWEN2_VL = replace(QWEN2_5_VL, mlp=4 * 1280, gated_mlp=False, where=QWEN2_5_VL.where.replace("2.5-", "2-"))
# Qwen3-VL (Qwen/Qwen3-VL-30B-A3B-Instruct and -8B / -32B / -235B vision_config: depth 27, hidden 1152,
# intermediate 4304 (GELU, not gated), patch 16, temporal 2, merge 2, deepstack_visual_indexes 8, 16, 24: the
# merger's output and 3 deepstack outputs, 4 text-hidden widths an embedding; -2B / -4B: depth 24, hidden 1024,
# intermediate 4096, deepstack 5, 11, 17)
QWEN3_VL = VisionTower(27, 1152, 4304, 3 * 2 * 16 * 16, output_widths=4, sized_by=qwen3_vl_item, where=(
    "Qwen3-VL: a 4,096 px image, or in 0.11-0.12 a dummy video of at most 25,165,824 pixels counted 12.5 prompt "
    "tokens a soft token (vLLM qwen3_vl.py get_max_video_tokens, get_dummy_mm_data)"))
QWEN3_VL_SMALL = replace(QWEN3_VL, layers=24, hidden=1024, mlp=4096)

TOWERS: dict[str, VisionTower] = {"gemma3": GEMMA3, "gemma4": GEMMA4, "llama4": LLAMA4, "kimi_vl": KIMI_VL,
                                  "mistral3": MISTRAL3, "qwen2_vl": QWEN2_VL, "qwen2_5_vl": QWEN2_5_VL,
                                  "qwen3_vl": QWEN3_VL, "qwen3_vl_moe": QWEN3_VL}
SMALL_TOWERS: dict[str, VisionTower] = {"gemma-4-e2b": GEMMA4_SMALL, "gemma-4-e4b": GEMMA4_SMALL,
                                        "qwen3-vl-2b": QWEN3_VL_SMALL, "qwen3-vl-4b": QWEN3_VL_SMALL}


def vision_tower(model_type: str, model_id: str) -> VisionTower | None:
    """The model's vision tower where kvplan records one (a smaller tower named by the id first), else None."""
    lowered = model_id.lower()
    small = next((tower for key, tower in SMALL_TOWERS.items() if key in lowered), None)
    return small or TOWERS.get(model_type)
