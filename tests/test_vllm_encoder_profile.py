"""The multimodal encoder's part of vLLM's profiling run (kvplan/engines/vllm/encoder_profile.py), with values worked
out by hand from vLLM's code (gpu_model_runner.py profile_run, multimodal/encoder_budget.py MultiModalBudget, read
in the 0.19.0 wheel) and the two 0.19.0 H100 logs that print the item count."""

from __future__ import annotations

import dataclasses

import pytest

import kvplan
from kvplan.budgets.base import GIB, Settings
from kvplan.engines.sglang.fraction import vision_tower as sglang_tower
from kvplan.engines.vllm import encoder_profile
from kvplan.sources.resolve import load_model

KIMI_VL = "tests/data/hf_configs/moonshotai__Kimi-VL-A3B-Instruct.json"


def test_items_match_the_logged_encoder_cache_line():
    # 0.19.0 H100 logs (llmd-planner), vllm serve defaults 8192 batched tokens, 1024 seqs, max_model_len 8192:
    # "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 32 image items" (gemma-3)
    # and "... with 7 image items" (Kimi-VL): 8192 // 256 = 32, 8192 // 1089 = 7
    assert encoder_profile.items_per_batch(256, 8192, 1024, 8192) == 32
    assert encoder_profile.items_per_batch(1089, 8192, 1024, 8192) == 7
    # an item larger than the batch: the budget grows to one item (compute_mm_encoder_budget's max)
    assert encoder_profile.items_per_batch(3025, 2048, 256, 32768) == 1
    # the decoder side: max_num_seqs x items per prompt (limit_mm_per_prompt, max_model_len // T)
    assert encoder_profile.items_per_batch(256, 8192, 4, 300) == 4
    assert encoder_profile.items_per_batch(256, 8192, 8, 8192, limit=1) == 8


def test_gemma3_kept_bytes_by_hand():
    spec = load_model("google/gemma-3-4b-it")
    found = encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1")
    # 32 items x 256 tokens x hidden 2,560 x 2 B (encoder_cache) + 32 x 4,096 patches x 3 x 14 x 14 bf16 pixel
    # values (batched_dummy_mm_inputs, alive to the end of profile_run)
    assert found.items == 32
    assert found.kept_bytes == 32 * 256 * 2560 * 2 + 32 * 4096 * 588 * 2 == 196_083_712
    # Model Runner V2 builds its inputs inside execute_mm_encoder: only the outputs stay
    assert encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v2").kept_bytes == 32 * 256 * 2560 * 2


def test_kimi_vl_kept_bytes_by_hand():
    spec = load_model(KIMI_VL)
    found = encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1")
    # 1024 px dummy -> 897 px (4,096 patches) -> padded to 924: 66 x 66 patches, 33 x 33 = 1,089 tokens; text hidden 2,048
    assert found.items == 7
    assert found.kept_bytes == 7 * 1089 * 2048 * 2 + 7 * 66 * 66 * 588 * 2 == 67_082_400


def test_the_encoder_peak_wins_where_it_is_larger():
    # Mistral 3's Pixtral tower without xformers: a dense mask over both dummy images' 24,200 patches
    spec = dataclasses.replace(load_model("google/gemma-3-4b-it"), model_type="mistral3", hidden_size=5120,
                               id="mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    found = encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1")
    patches = 2 * 110 * 110
    outputs, pixels = 2 * 3025 * 5120 * 2, patches * 588 * 2
    assert found.peak_bytes == pixels + outputs + patches * (2 * 1024 + 2 * 4096) * 2 + patches * patches * 2
    act, _, _ = encoder_profile.add(100, "text", spec, 8192, 1024, 8192, 1, "v1", "v1")
    assert act == found.peak_bytes
    act, _, _ = encoder_profile.add(4 * GIB, "text", spec, 8192, 1024, 8192, 1, "v1", "v1")
    assert act == 4 * GIB + found.kept_bytes


def test_text_only_serving_and_v0_get_nothing():
    spec = load_model("google/gemma-3-4b-it")
    assert encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1", language_model_only=True) is None
    assert encoder_profile.add(123, "x", spec, 8192, 1024, 8192, 1, "v0", "v1") == (123, "x", ())
    assert encoder_profile.profile(load_model("Qwen/Qwen3-8B"), 8192, 1024, 8192, 1, "v1") is None


def test_unknown_runner_is_refused_by_name():
    with pytest.raises(ValueError, match="'v3'"):
        encoder_profile.profile(load_model("google/gemma-3-4b-it"), 8192, 1024, 8192, 1, "v3")


def test_budget_adds_it_and_language_model_only_takes_it_away():
    def plan(**settings):
        return kvplan.max_batch("google/gemma-3-4b-it", gpu="H100", engine_version="0.19.0", max_model_len=8192,
                                settings=Settings(**settings))

    text_only, multimodal = plan(language_model_only=True), plan()
    # the sampler peak (1024 x 262,208 logits) is larger than the tower's: the kept bytes add to it
    assert multimodal.per_gpu.activation_bytes - text_only.per_gpu.activation_bytes == 196_083_712


def test_a_tower_not_derived_is_said_not_dropped():
    qwen_vl = dataclasses.replace(load_model("Qwen/Qwen2.5-7B"), model_type="qwen3_5", id="Qwen/Qwen3.5-9B")
    said = encoder_profile.profile(qwen_vl, 8192, 1024, 8192, 1, "v1")
    assert isinstance(said, str) and "qwen3_5" in said
    assert encoder_profile.add(5, "x", qwen_vl, 8192, 1024, 8192, 1, "v1", "v1") == (5, "x", (said,))
    assert encoder_profile.profile(qwen_vl, 8192, 1024, 8192, 1, "v1", language_model_only=True) is None


def test_gemma4_profiles_its_dummy_videos_and_says_the_tower_is_transformers():
    # video: 32 x (70 + 2 + 6) = 2,496 tokens an item (get_mm_max_tokens_per_item); 8192 // 2496 = 3 videos of
    # 32 frames x 64 embeddings (224 px frames fitted to 384 px, 576 patches / 3^2) and 630 patch slots of 16 x 16 x 3
    spec = load_model("google/gemma-4-31B-it")
    found = encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1")
    assert found.items == 3
    assert found.kept_bytes == 3 * 2048 * 5376 * 2 + 3 * 32 * 630 * 768 * 2
    plan = kvplan.max_batch("google/gemma-4-31B-it", gpu="H100", engine_version="0.19.0", max_model_len=8192)
    assert any("transformers' module" in note for note in plan.assumptions)


def test_sglang_reads_the_same_towers():
    assert sglang_tower("gemma3", "google/gemma-3-27b-it") == (27, 1152)
    assert sglang_tower("gemma4", "google/gemma-4-E2B-it") == (16, 768)
    assert sglang_tower("llama4", "meta-llama/Llama-4-Scout-17B-16E-Instruct") == (34, 1408)
    assert sglang_tower("kimi_vl", "moonshotai/Kimi-VL-A3B-Instruct") is None  # not in SGLang's multimodal rule


def test_serve_flag_and_cli_flag_turn_the_encoder_off(tmp_path):
    from kvplan.cli import main
    from kvplan.deploy import check

    def kv(flags: str) -> int:
        path = tmp_path / f"serve{len(flags)}.sh"
        path.write_text(f"# kvplan/gpu: H100\nvllm serve google/gemma-3-4b-it --max-model-len 8192 {flags}\n")
        return check([str(path)]).deployments[0].kv_cache_bytes_per_gpu

    assert kv("--language-model-only") > kv("")
    assert main(["max-batch", "google/gemma-3-4b-it", "--gpu", "H100", "--engine", "sglang",
                 "--language-model-only"]) == 2  # another engine's flag: refused by name


QWEN25_VL = "tests/data/hf_configs_transcribed/Qwen__Qwen2.5-VL-7B-Instruct.json"
QWEN3_VL = "tests/data/hf_configs_transcribed/Qwen__Qwen3-VL-30B-A3B-Instruct.json"


def test_qwen25_vl_by_hand_from_vllm_090():
    # vLLM 0.9.0 qwen2_vl.py Qwen2VLProcessingInfo.get_image_size_with_most_features: smart_resize of a 9,999,999 px
    # square under max_pixels 12,845,056 (factor 28) = 3,584 px: 256 x 256 patches of 14 px, 16,384 tokens after the
    # 2 x 2 merge; get_num_frames_with_most_features(2048, {image: 1, video: 1}) leaves no room for a second frame:
    # the video is 16,384 tokens too and the image (first) is profiled. The L4 log at 0.9.0.1 prints "a budget of
    # 16384 tokens, and profiled with 1 image items"
    spec = load_model(QWEN25_VL)
    found = encoder_profile.profile(spec, 2048, 256, 2048, 1, "v1", version=(0, 9, 0))
    assert found.items == 1
    outputs, pixels = 16384 * 3584 * 2, 65536 * (3 * 2 * 14 * 14) * 2  # an image repeated to temporal patch 2
    assert found.kept_bytes == outputs + pixels == 271_581_184
    # the assumed peak: residual + norm output (2 x 1,280) and the gated MLP's gate_up (2 x 3,420) + product (3,420)
    assert found.peak_bytes == outputs + pixels + 65536 * (2 * 1280 + 3 * 3420) * 2 == 1_951_924_224
    # a long context makes the video the largest item: 0.9.0 takes one image's tokens off max_model_len and allows
    # 16 frames; 0.11.0 does not and allows 14 (_MAX_FRAMES_PER_VIDEO), 2 frames a temporal patch of 16,384 tokens
    long_090 = encoder_profile.profile(spec, 2048, 256, 65536, 1, "v1", version=(0, 9, 0))
    long_011 = encoder_profile.profile(spec, 2048, 256, 65536, 1, "v1", version=(0, 11, 0))
    assert long_090.kept_bytes == 3 * 16384 * 3584 * 2 + 4 * 3 * 16384 * 1176 * 2
    assert long_011.kept_bytes == 4 * 16384 * 3584 * 2 + 4 * 4 * 16384 * 1176 * 2


def test_qwen3_vl_by_hand_from_vllm_0110_and_0190():
    # vLLM 0.11.0 qwen3_vl.py: get_max_video_tokens counts 12.5 prompt tokens a soft token; the frames grow
    # (_get_max_video_frames from 2) to _MAX_FRAMES_PER_VIDEO 24,576, each shrunk by the video processor's pixel
    # cap (25,165,824 over all frames) to 32 x 32 px: 12,288 temporal patches of 2 x 2 patches = 49,152 patches,
    # 12,288 soft tokens x 12.5 = 153,600: the 4 x RTX 3090 log's "a budget of 153600 tokens ... 1 video items"
    spec = load_model(QWEN3_VL)
    # the merger's output and 3 deepstack outputs per embedding, each text hidden 2,048 wide; 3 x 2 x 16^2 values
    outputs, pixels = 12288 * 4 * 2048 * 2, 49152 * 1536 * 2
    # 0.11's item, as the encoder returns it (the release's widening, below, left out: a 0.13 runner)
    tower = encoder_profile.vision_tower(spec.model_type, spec.id).sized(65536, (0, 11, 0))
    found = encoder_profile._profile(tower, spec, 2048, 256, 65536, 4, "v1", (0, 13, 0))
    assert found.items == 1
    assert found.kept_bytes == outputs + pixels == 352_321_536
    assert found.peak_bytes == outputs + pixels + 49152 * (2 * 1152 + 2 * 4304 // 4) * 2
    # 0.11.0 profile_run: the 12,288-row output is fewer rows than the 153,600-token budget, so it is copied into a
    # zeroed 153,600 x 8,192 tensor and that copy is cached through the text run (the outputs are freed after it)
    widened = encoder_profile.profile(spec, 2048, 256, 65536, 4, "v1", version=(0, 11, 0))
    assert widened.kept_bytes == 153600 * 4 * 2048 * 2 + pixels == 2_667_577_344
    # while the copy is made the outputs exist too; that is above the tower's own assumed peak here
    assert widened.peak_bytes == outputs + 153600 * 4 * 2048 * 2 + pixels == 2_868_903_936
    # 0.12.0 widens to the video's tokens per item: one item, the same 153,600 rows
    assert encoder_profile.profile(spec, 2048, 256, 65536, 4, "v1", version=(0, 12, 0)).kept_bytes == 2_667_577_344
    # from 0.13 the video counts its soft tokens only (at most 12,288 under the pixel cap): the 4,096 px image
    # (16,384 tokens, 65,536 patches) is the largest item (read in 0.19.0)
    later = encoder_profile.profile(spec, 2048, 256, 65536, 4, "v1", version=(0, 19, 0))
    assert later.kept_bytes == 16384 * 4 * 2048 * 2 + 65536 * 1536 * 2


def test_widening_follows_the_release_by_hand():
    # vLLM 0.11.0 - 0.11.2 gpu_model_runner.py profile_run: "if encoder_output_shape[0] < encoder_budget", every
    # output widened to the budget; 0.12.0: "< max_mm_tokens_per_item"; 0.13.0: none (sources read at each tag)
    assert encoder_profile.widened_rows(256, 256, 8192, (0, 10, 2)) == 0
    assert encoder_profile.widened_rows(256, 256, 8192, (0, 11, 0)) == 8192
    assert encoder_profile.widened_rows(256, 256, 8192, (0, 11, 2)) == 8192
    assert encoder_profile.widened_rows(256, 256, 8192, (0, 12, 0)) == 0
    assert encoder_profile.widened_rows(2496, 2048, 8192, (0, 12, 0)) == 2496
    assert encoder_profile.widened_rows(153600, 12288, 2048, (0, 13, 0)) == 0
    # an item larger than the batch: the budget is the item (compute_mm_encoder_budget's max)
    assert encoder_profile.widened_rows(153600, 12288, 2048, (0, 11, 0)) == 153600


def test_gemma3_many_items_widened_in_011_by_hand():
    # 0.11.0: each of the 32 outputs (256 rows) is widened to the 8,192-token budget, text hidden 2,560, bf16
    spec = load_model("google/gemma-3-4b-it")
    pixels = 32 * 4096 * 588 * 2
    found = encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1", version=(0, 11, 0))
    assert found.kept_bytes == 32 * 8192 * 2560 * 2 + pixels == 1_496_317_952
    # 0.12.0 (vLLM PR #29386) compares with the 256 tokens per image: nothing is widened
    assert encoder_profile.profile(spec, 8192, 1024, 8192, 1, "v1", version=(0, 12, 0)).kept_bytes == 196_083_712


def test_widening_reaches_the_plan_in_011_only():
    # the whole plan: Gemma 3 4B on an H100 at the 0.10.2 / 0.11.0 defaults (8,192 batched tokens, 1,024 seqs, the
    # same FlashInfer sampler) differs by the widening alone: 32 outputs of (8,192 - 256) more rows x 2,560 x bf16
    def act(version: str) -> int:
        return kvplan.max_batch("google/gemma-3-4b-it", gpu="H100-SXM-80GB", engine_version=version,
                                max_model_len=8192).per_gpu.activation_bytes

    assert act("0.11.0") - act("0.10.2") == 32 * (8192 - 256) * 2560 * 2
    assert act("0.12.0") == act("0.13.0")  # 0.12 widens to the 256 tokens per image: nothing


def test_the_tower_names_are_the_tower_tables_keys():
    """vLLM's budget asks tower_names.may_have_tower before it imports the tower table: the names must be the
    table's own, or a multimodal model would be planned as text."""
    from kvplan.sources import tower_names, vision_towers

    assert tower_names.TOWER_TYPES == set(vision_towers.TOWERS)
    assert tower_names.SMALL_TOWER_IDS == tuple(vision_towers.SMALL_TOWERS)
    assert tower_names.TOWER_TYPES.isdisjoint(tower_names.UNRECORDED)
    for model_type, model_id in [("llama", "meta-llama/Llama-3.1-8B"), ("gemma3", "google/gemma-3-27b-it"),
                                 ("llava", "llava-hf/llava-1.5-7b-hf"), ("gemma4", "x/Gemma-4-E2B-it"),
                                 ("qwen3", "someone/qwen3-vl-2b-text")]:
        known = vision_towers.vision_tower(model_type, model_id) is not None or model_type in tower_names.UNRECORDED
        assert tower_names.may_have_tower(model_type, model_id) == known
