"""The multimodal encoder's part of vLLM's profiling run (V1 engine).

``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py; the same code read in the 0.10.1.1, 0.19.0
and 0.33.0 wheels) first encodes a dummy batch when the model takes images: ``MultiModalBudget``
(0.10: v1/worker/utils.py; 0.19, 0.33: multimodal/encoder_budget.py) picks the modality with the most tokens per
item, T, and ``_get_mm_dummy_batch`` builds ``max_mm_items_per_batch`` copies of its largest dummy item:

    items = max(1, min(budget // T, max_num_seqs x max(1, min(limit_mm_per_prompt, max_model_len // T))))
    budget = max(max_num_batched_tokens, T)   (v1/core/encoder_cache_manager.py compute_mm_encoder_budget:
                                               encoder_compute_budget and encoder_cache_size, both
                                               scheduler_config.max_num_batched_tokens by default)

``self.model.embed_multimodal(**batched_dummy_mm_inputs)`` runs the tower on all of them at once, and its outputs
are stored in ``self.encoder_cache`` until the end of ``profile_run``: they are still allocated while
``_dummy_run(max_num_tokens)`` and the sampler run, and so is ``batched_dummy_mm_inputs`` (a local of
``profile_run``; the pixel values in the model dtype: multimodal/processing/context.py ``_postprocess_output``).
Model Runner V2 (0.33 v1/worker/gpu/mm/encoder_runner.py ``profile_encoder_cache``) keeps the outputs only: the
inputs are built and dropped inside ``execute_mm_encoder``. The peak that ``determine_available_memory`` charges
is then the larger of

    the text forward / sampler peak + the kept encoder outputs (+ the pixel values, V1 runner): computed
    the encoder's own peak: the pixel values + its outputs + the widest point of a ViT block over every
    patch of the batch (the residual and the norm's output, the MLP's fc1 output and its activation, split
    over tp as vLLM shards the tower), plus a dense patches^2 mask where the encoder builds one: assumed

In 0.11.0 - 0.12.x ``profile_run`` also widens the encoder outputs it caches, for models whose prompt holds more
tokens than the encoder returns embeddings (vLLM PR #25810): where the first output has fewer rows than R, every
output is copied into a new zeroed (R x width) tensor and only those are kept through the text run, R being the
encoder budget in 0.11.x (``encoder_output_shape[0] < encoder_budget``, so every item of a many-item batch is
widened to the whole budget) and the modality's tokens per item in 0.12.x (PR #29386,
``mm_budget.max_tokens_by_modality``); 0.13.0 caches the outputs as they are (read in the 0.11.0, 0.11.2, 0.12.0
and 0.13.0 sources). While the copies are made the outputs and the copies are both allocated.

``--language-model-only`` (config/multimodal.py ``get_limit_per_prompt`` returns 0) or every modality's
``limit_mm_per_prompt`` at 0 leaves ``mm_max_toks_per_item`` empty, the budget 0, and nothing is encoded.
The encoders' shapes and their largest items: kvplan/sources/vision_towers.py (Qwen2-VL / Qwen2.5-VL / Qwen3-VL's
follow max_model_len and the release: ``VisionTower.sized``).
"""

from __future__ import annotations

from kvplan.engines.version import LATEST, Version
from kvplan.record import dataclass
from kvplan.sources.tower_names import UNRECORDED
from kvplan.sources.vision_towers import VisionTower, vision_tower
from kvplan.spec import ModelSpec

MM_LIMIT_DEFAULT = 999  # config/multimodal.py get_limit_per_prompt: an unspecified modality allows 999 items
# gpu_model_runner.py profile_run widens the cached encoder outputs (the module docstring): to the encoder budget
# from 0.11.0 (PR #25810), to the tokens per item from 0.12.0 (PR #29386), not at all from 0.13.0
WIDENED_TO_BUDGET_SINCE: Version = (0, 11)
WIDENED_TO_ITEM_SINCE: Version = (0, 12)
WIDENED_UNTIL: Version = (0, 13)


@dataclass(frozen=True)
class EncoderProfile:
    items: int
    """Dummy items encoded at once."""
    kept_bytes: int
    """Allocated while the text forward and the sampler run: the encoder outputs (+ the V1 runner's inputs)."""
    peak_bytes: int
    """The encoder's own peak (assumed profile of the tower, see the module; 0 where it is not modelled)."""
    how: str


def items_per_batch(tokens_per_item: int, batched_tokens: int, max_num_seqs: int, max_model_len: int,
                    limit: int = MM_LIMIT_DEFAULT) -> int:
    """``MultiModalBudget`` (``_get_max_items``, 0.19.0 multimodal/encoder_budget.py; ``get_max_items`` in 0.10.1.1
    v1/worker/utils.py): the dummy items profile_run encodes, chunked prefill on (V1 always)."""
    budget = max(batched_tokens, tokens_per_item)
    per_prompt = max(1, min(limit, max_model_len // tokens_per_item))
    return max(1, min(budget // tokens_per_item, max_num_seqs * per_prompt))


def widened_rows(tokens_per_item: int, embeds_per_item: int, batched_tokens: int, version: Version) -> int:
    """The rows each cached encoder output is widened to in ``profile_run`` (0: kept as the encoder returned it).

    0.11.x compares the first output's rows with the encoder budget, min(encoder_compute_budget,
    encoder_cache_size) = max(max_num_batched_tokens, T) by default (v1/core/encoder_cache_manager.py
    compute_mm_encoder_budget); 0.12.x with the modality's tokens per item T."""
    if not WIDENED_TO_BUDGET_SINCE <= version < WIDENED_UNTIL:
        return 0
    rows = max(batched_tokens, tokens_per_item) if version < WIDENED_TO_ITEM_SINCE else tokens_per_item
    return rows if embeds_per_item < rows else 0


def profile(spec: ModelSpec, tokens: int, seqs: int, max_model_len: int, tp: int, runner: str,
            language_model_only: bool = False, version: Version = LATEST) -> EncoderProfile | str | None:
    """The encoder's part of the profiling run for ``spec`` on one of ``tp`` ranks, or a note saying why it is
    not planned (a multimodal family whose tower kvplan has not recorded), or None (a text model, or text-only
    serving)."""
    if language_model_only:
        return None
    tower = vision_tower(spec.model_type, spec.id)
    tower = tower.sized(max_model_len, version) if tower is not None else None
    if tower is None or not tower.profiled:
        if tower is not None or spec.model_type in UNRECORDED:
            return (f"vLLM also profiles the vision encoder of this {spec.model_type} model on its largest dummy "
                    "inputs before the text run; kvplan has not derived that tower's largest item, so the activation "
                    "peak leaves it out (there is none under --language-model-only)")
        return None
    return _profile(tower, spec, tokens, seqs, max_model_len, tp, runner, version)


def _profile(tower: VisionTower, spec: ModelSpec, tokens: int, seqs: int, max_model_len: int, tp: int,
             runner: str, version: Version = LATEST) -> EncoderProfile:
    dtype = spec.dtype_bytes
    hidden = spec.hidden_size or 4096
    items = items_per_batch(tower.tokens_per_item, tokens, seqs, max_model_len)
    patches = items * tower.patches_per_item
    # embed_multimodal's outputs: one (tokens_per_item x text hidden) tensor per item, full width on every rank
    outputs = items * tower.embeds * tower.output_widths * hidden * dtype
    pixels = patches * tower.patch_values * dtype
    rows = widened_rows(tower.tokens_per_item, tower.embeds, tokens, version)
    # the widened copies replace the outputs in the encoder cache; both exist while they are made
    widened = items * rows * tower.output_widths * hidden * dtype
    cached, cached_how = (widened, f"outputs widened to {rows:,} rows each") if rows else (outputs, "outputs")
    if runner == "v1":
        kept, kept_how = cached + pixels, f"{cached_how} + pixel values"
    elif runner == "v2":
        kept, kept_how = cached, cached_how
    else:
        raise ValueError(f"vLLM model runner {runner!r}: kvplan knows v1 and v2")
    how = (f"vision encoder: {items} dummy items of {tower.embeds:,} embeddings ({tower.where}); kept through "
           f"the text run: {kept_how} {kept / (1 << 20):,.0f} MiB (computed, gpu_model_runner.py profile_run"
           + (", 0.11-0.12 widening" if rows else "") + "); ")
    copying = outputs + kept if rows else 0  # the outputs and their widened copies, while the copies are made
    if tower.transformers_tower:
        # transformers' module, encoded in memory-sized chunks from 0.25 (gemma4_mm.py _encoder_chunk): its peak is
        # neither vLLM's code nor a ViT block's; a T4 gemma-4-E2B log at 0.29.0 shows none above the text run
        return EncoderProfile(items, kept, copying, how + "encoder peak: transformers' module, not modelled")
    # the MLP's widest point: fc1's output and its activation (a gated MLP: gate and up, then the product)
    mlp = 3 * tower.mlp if tower.gated_mlp else 2 * tower.mlp
    per_patch = (2 * tower.hidden + max(mlp, 4 * tower.hidden) // tp) * dtype
    mask = patches * patches * dtype if tower.masked_attention else 0
    peak = pixels + outputs + patches * per_patch + mask
    how += (f"encoder peak {peak / (1 << 30):.2f} GiB over {patches:,} patches (assumed"
            + (", with the dense patch mask" if mask else "") + ")")
    if copying > peak:
        peak = copying
        how += f"; while widening, the outputs and their copies {copying / (1 << 30):.2f} GiB (computed)"
    return EncoderProfile(items, kept, peak, how)


def add(act: int, how: str, spec: ModelSpec, tokens: int, seqs: int, max_model_len: int, tp: int, engine: str,
        runner: str, language_model_only: bool = False, version: Version = LATEST) -> tuple[int, str, tuple[str, ...]]:
    """The activation peak with the encoder's part (the V1 engine's profile_run; V0 encodes inside its forward
    pass and is not planned here), its description, and a note where the encoder is not planned."""
    if engine != "v1":
        return act, how, ()
    found = profile(spec, tokens, seqs, max_model_len, tp, runner, language_model_only, version)
    if found is None:
        return act, how, ()
    if isinstance(found, str):
        return act, how, (found,)
    total = max(act + found.kept_bytes, found.peak_bytes)
    tower = vision_tower(spec.model_type, spec.id)
    said = () if tower is None or not tower.transformers_tower else ((
        f"vLLM runs this {spec.model_type} model's vision tower as transformers' module: its own peak follows the "
        f"transformers release installed ({tower.transformers_tower}) and may exceed kvplan's estimate"),)
    return total, f"{how}; + {found.how}", said
