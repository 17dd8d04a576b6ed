"""What vLLM's profiling run charges for the sampler, by release: derived from vLLM's code, not fitted.

The dummy sampler run (V1 ``gpu_model_runner._dummy_sampler_run``, from 0.8.0; V0 ``worker/model_runner.
profile_run``) samples ``rows`` = min(max_num_seqs, max_num_batched_tokens) rows of ``vocab`` logits with top-k
and top-p on (temperature 0.5, top_p 0.9, top_k vocab - 1; V0: top_p 0.99), no logprobs or penalties. Its peak,
per logit, is the bf16 logits (2 B) and their fp32 copy (4 B) plus what the top-k/top-p backend of the release
holds at once (lines are those of each release's wheel):

- PyTorch sort (V0; V1 0.8.x; V1 0.11.1-0.16, where the FlashInfer sampler became opt-in, PR #26859):
  ``logits.sort`` keeps values fp32 + indices int64 (12 B) and, inside torch's segmented radix sort, reverse
  indices and CUB's alternate key/value buffers from the caching allocator (20 B): 38 B. Below 128 rows torch
  sorts by a full sort with int2 segment arrays (32 B transient): 50 B. (0.8.5 ``v1/sample/ops/topk_topp_sampler.py``
  :170-210; 0.16.0 :262-282; V0 0.6.4 ``model_executor/layers/sampler.py`` :426-452; torch ``SortStable.cu``.)
- FlashInfer (0.9.x-0.11.0 when flashinfer is installed, as the vllm/vllm-openai image has it; the 0.10.1.1 log
  in tests/data says "Using FlashInfer for top-p & top-k sampling"): ``top_k_mask_logits`` copy (4 B) and softmax
  probabilities (4 B): 14 B (0.10.1.1 ``topk_topp_sampler.py`` :262-298). vLLM's pip wheel has flashinfer only as
  an extra (0.10.2 METADATA: ``flashinfer-python==0.3.0; extra == "flashinfer"``), so ``pip install vllm`` sorts
  (38 B) and logs "FlashInfer is not available. Falling back to the PyTorch-native implementation": the path is a
  setting (``--vllm-sampler``; VLLM_USE_FLASHINFER_SAMPLER=0/1 in a deployment; the line in a log); where none
  is given kvplan plans the sort (``default``: what pip installs and most logs show), an assumption said in the note;
  ``kvplan check`` plans FlashInfer's for a deployment running the vllm/vllm-openai image (``IMAGE``: flags.py
  image_settings), unless its VLLM_USE_FLASHINFER_SAMPLER says otherwise.
- Triton (0.17+, rows >= 8, PR #33538; from 0.21 a FlashInfer pass then a Triton pass, PR #40376, both 14 B): the
  mask is applied in place; probabilities and the sampling noise (4 + 4 B): 14 B, plus a cached fp32 buffer of
  min(next_pow2(min(SMs, rows)), SMs) x vocab x 4 B (0.17.0 ``topk_topp_triton.py`` :993-1000; 0.19.0 :1011-1018).

FlashInfer's path is CUDA's only: ``TopKTopPSampler.__init__`` takes it under ``current_platform.is_cuda()`` (0.9.2
:32, 0.10.2 :41, 0.11.0 :38), so on vLLM's ROCm platform (AMD Instinct and Radeon cards) 0.9 - 0.11.0 sort, and
there is no flashinfer to assume. (From 0.13 ROCm's own aiter path needs VLLM_ROCM_USE_AITER, off by default, and
``forward_native`` is the release's sort or, from 0.17, Triton on either platform.)

Not modelled (said where it matters): Model Runner V2's sampler (runner.py: it holds the logits only; the V1
figure stands in), the rejection sampler's extra dummy run under speculative decoding, an fp32 lm_head (2 B
less).
"""

from __future__ import annotations

from kvplan.engines.version import Version

SORT_SMALL_ROWS = 128  # torch sorts fewer rows by a full sort (segmented_sort_pairs_by_full_sort)
TRITON_MIN_ROWS = 8  # apply_top_k_top_p_triton needs logits.shape[0] >= 8
FLASHINFER_SINCE, FLASHINFER_OPT_IN_SINCE = (0, 9), (0, 11, 1)
TRITON_SINCE = (0, 17)

# Streaming multiprocessors (torch ``multi_processor_count``) of the catalog's GPUs: the Triton buffer's rows.
# NVIDIA's architecture whitepapers and product briefs; AMD's CDNA 3 compute units (what HIP reports).
SM_COUNTS = {"V100-SXM2-16GB": 80, "V100-SXM2-32GB": 80, "T4": 40, "A10": 72, "A10G": 80, "A100-SXM4-40GB": 108,
             "A100-PCIe-40GB": 108, "A100-SXM4-80GB": 108, "A100-PCIe-80GB": 108, "A40": 84, "A800-SXM4-80GB": 108,
             "A800-PCIe-80GB": 108, "RTX-3090": 82, "RTX-A6000": 84, "L4": 58, "L40": 142, "L40S": 142,
             "RTX-4090": 128, "RTX-6000-Ada": 142, "H100-SXM-80GB": 132, "H800-SXM-80GB": 132,
             "H100-PCIe-80GB": 114, "H100-NVL-94GB": 132, "H200-141GB": 132, "H20-96GB": 78, "H20-141GB": 78,
             "GH200-96GB": 132, "B200-180GB": 148, "GB200": 152, "RTX-5090": 170, "MI300X": 304, "MI325X": 304,
             # later additions, each as a device printed it (the catalog entry's memory_source names the file) or
             # from the CUDA cores NVIDIA lists at 128 per SM: B300 multiProcessorCount 148; RTX PRO 6000
             # multi_processor_count=188 (the Workstation Edition has the same 188-SM GB202); GB10 deviceQuery
             # "(048) Multiprocessors"; RTX 5080 multi_processor_count=84; RTX 5070 Ti 8,960 and RTX 5060 Ti 4,608
             # CUDA cores; MI355X 256 compute units (CDNA 4: 8 XCDs x 32)
             "B300-288GB": 148, "RTX-PRO-6000-Server": 188, "RTX-PRO-6000-WS": 188, "GB10": 48, "RTX-5080": 84,
             "RTX-5070-Ti": 70, "RTX-5060-Ti-16GB": 36, "MI355X": 256}
DEFAULT_SMS = 132  # an H100's, where the GPU is not in the table (said in the note)


PATHS = ("sort", "flashinfer", "triton")
# Not a path one chooses: what ``kvplan check`` sets for a deployment running vLLM's own vllm/vllm-openai image
# (flags.py image_settings), whose flashinfer makes 0.9 - 0.11.0 take FlashInfer's path on CUDA; elsewhere the
# release's default, as None.
IMAGE = "image"
IMAGE_WHY = "the vllm/vllm-openai image installs flashinfer"
V1_FLASHINFER_SINCE = (0, 8)  # v1/sample/ops/topk_topp_sampler.py: the V1 sampler's FlashInfer path (0.8.0 wheel)


def flashinfer_if_installed(version: Version, cuda: bool = True) -> bool:
    """0.9 - 0.11.0 on CUDA: the dummy run takes FlashInfer's path where flashinfer is installed, else sorts."""
    return cuda and FLASHINFER_SINCE <= version < FLASHINFER_OPT_IN_SINCE


def default(version: Version, rows: int) -> str:
    """The release's default top-k/top-p path for the dummy run: sort or triton. In 0.9 - 0.11.0 the path rests on
    whether flashinfer is installed (``flashinfer_if_installed``); kvplan takes the sort, as ``pip install vllm`` does
    (flashinfer is only an extra of the wheel) and as the logs show: 15 independent sources in tests/data show
    the path of a 0.9 - 0.11.0 start-up; 14 sort (the FlashInfer-unavailable line), 2 take FlashInfer (one source
    shows both, on two machines)."""
    if version >= TRITON_SINCE and rows >= TRITON_MIN_ROWS:
        return "triton"
    return "sort"  # V0, V1 0.8.x, 0.11.1-0.16, and the Triton releases below 8 rows


def check(version: Version, given: str | None, cuda: bool = True) -> None:
    """Refuse a path the release (or a ROCm GPU) cannot take (field ``vllm_sampler``); None (the default) passes."""
    from kvplan.engines.version import render_version
    from kvplan.errors import UsageError

    if given is None or given == IMAGE:
        return
    if given not in PATHS:
        raise UsageError(f"'{given}': choose sort, flashinfer or triton", field="vllm_sampler")
    if given == "triton" and version < TRITON_SINCE:
        raise UsageError(f"vLLM {render_version(version)} has no Triton top-k/top-p sampler (it came in 0.17)",
                         field="vllm_sampler")
    if given == "flashinfer" and not cuda:
        raise UsageError("vLLM takes FlashInfer's top-k/top-p sampler on CUDA GPUs only (topk_topp_sampler.py: "
                         "current_platform.is_cuda()); this GPU runs vLLM's ROCm platform", field="vllm_sampler")
    if given == "flashinfer" and version < V1_FLASHINFER_SINCE:
        raise UsageError(f"vLLM {render_version(version)} profiles with V0's sampler, which sorts (kvplan plans "
                         "FlashInfer's from the V1 engine, 0.8, on)", field="vllm_sampler")


def backend(version: Version, rows: int, given: str | None = None, cuda: bool = True) -> str:
    """The path the dummy run takes: the one given (``--vllm-sampler``, a deployment's
    VLLM_USE_FLASHINFER_SAMPLER, a log's line), else the release's default. Triton sorts below 8 rows as vLLM does.
    ``IMAGE``: FlashInfer where the release takes it with flashinfer installed, else the default."""
    if given == IMAGE:
        return "flashinfer" if flashinfer_if_installed(version, cuda) else default(version, rows)
    if given is None:
        return default(version, rows)
    check(version, given, cuda)
    return "sort" if given == "triton" and rows < TRITON_MIN_ROWS else given


def note(version: Version, rows: int, given: str | None, why: str = "given", cuda: bool = True) -> str | None:
    """The assumptions line for the path taken where it is not the release's only one: given (``why``: where
    from), or the default that rests on flashinfer not being installed (0.9 - 0.11.0, CUDA); None otherwise."""
    path = backend(version, rows, given, cuda)
    if given == IMAGE:
        if path == "flashinfer":
            return f"vLLM sampler: flashinfer top-k/top-p in the profiling run ({IMAGE_WHY})"
        given = None
    if given is not None:
        return f"vLLM sampler: {path} top-k/top-p in the profiling run ({why})"
    if flashinfer_if_installed(version, cuda):
        return ("vLLM sampler: PyTorch sort top-k/top-p in the profiling run, this release's path without flashinfer "
                "(assumed, as `pip install vllm` has it: flashinfer is an extra); where flashinfer is installed (the "
                "vllm/vllm-openai image) vLLM takes FlashInfer's, 14 B per logit: give --vllm-sampler flashinfer "
                "(or VLLM_USE_FLASHINFER_SAMPLER=1) for it")
    return None


def bytes_per_logit(version: Version, rows: int, given: str | None = None, cuda: bool = True) -> tuple[float, str]:
    """The dummy sampler run's peak per logit of ``rows`` x vocab, and which backend holds it (and why)."""
    path = backend(version, rows, given, cuda)
    if given == IMAGE:
        if path == "flashinfer":
            return 14.0, f"FlashInfer top-k/top-p, 14 B per logit ({IMAGE_WHY})"
        given = None
    if path == "flashinfer":
        return 14.0, "FlashInfer top-k/top-p, 14 B per logit (given)"
    if path == "triton":
        return 14.0, "Triton top-k/top-p in place, 14 B per logit, and its cached fp32 buffer" + (
            " (given)" if given else "")
    per_logit, how = sort_bytes_per_logit(rows, given == "sort")
    if given is None and flashinfer_if_installed(version):
        how += (" (without flashinfer, assumed: `pip install vllm`; the image's flashinfer takes 14 B: --vllm-sampler "
                "flashinfer)" if cuda else " (vLLM's ROCm platform: FlashInfer's sampler is CUDA's only)")
    return per_logit, how


def sort_bytes_per_logit(rows: int, given: bool = False) -> tuple[float, str]:
    """The PyTorch sort path's peak per logit (V0's only path: variant.py)."""
    small = rows < SORT_SMALL_ROWS
    why = " (given)" if given else ""
    return (50.0, f"PyTorch full sort of the fp32 logits, 50 B per logit (under 128 rows){why}") if small else \
        (38.0, f"PyTorch sort of the fp32 logits, 38 B per logit{why}")


def fixed_bytes(version: Version, rows: int, vocab: int, gpu_name: str, given: str | None = None) -> tuple[int, str]:
    """The Triton kernel's cached fp32 buffer (0.17+): min(next_pow2(min(SMs, rows)), SMs) rows of vocab."""
    if backend(version, rows, given) != "triton":
        return 0, ""
    sms = SM_COUNTS.get(gpu_name)
    known = sms is not None
    sms = sms or DEFAULT_SMS
    size = min(1 << (min(sms, rows) - 1).bit_length(), sms)
    how = f"Triton buffer {size} x {vocab:,} x 4 B" + ("" if known else f" ({DEFAULT_SMS} SMs assumed: GPU unknown)")
    return size * vocab * 4, how
