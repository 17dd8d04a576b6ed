"""Token eviction on transformers: budgets that drop tokens from the cache, so they change the model's answers.

- ``evict`` (``sink=S,window=W``): StreamingLLM (Xiao et al. 2023, arXiv:2309.17453), attention sinks plus a
  recent window, ``min(context, S + W)`` tokens per full-attention layer (mit-han-lab/streaming-llm
  ``streaming_llm/kv_cache.py`` ``StartRecentKVCache``: ``cache_size = start_size + recent_size``;
  transformers 4.36-4.5x ``SinkCache(window_length, num_sink_tokens)`` keeps ``window_length`` tokens,
  sinks included, after the first decode step). Sliding and chunked layers keep their own window.
- ``evict`` (``heavy=H,recent=R``): H2O (Zhang et al. 2023, arXiv:2306.14048), heavy hitters plus a recent
  window, ``min(context, H + R)`` (FMInference/H2O ``h2o_hf/utils_real_drop/modify_llama.py``
  ``H2OKVCache_LayerWise``: ``cache_size = hh_size + recent_size``).
- ``press`` / ``compression_ratio``: NVIDIA kvpress 0.5.5 (``kvpress/presses``), applied once at prefill
  (``BasePress.forward_hook`` returns early unless prefilling); decoded tokens are appended whole.
  ``ScorerPress.compress`` keeps ``compute_n_kept(k_len, ratio) = max(1, int(k_len * (1 - ratio)))``
  tokens per layer and head (``kvpress/utils.py``); ``PyramidKVPress.get_layer_budget`` gives each layer
  its own budget (window 64, beta 20); ``AdaKVPress`` (per head) only masks the pruned tokens
  (``module.masked_key_indices``) and returns the keys and values whole: no memory is saved.
"""

from __future__ import annotations

from kvplan.engines.layout import CacheLayout, EngineOptions, GroupRule
from kvplan.engines.rules import PrefillKept, SinkWindow
from kvplan.errors import UsageError
from kvplan.record import dataclass, replace
from kvplan.spec import FullAttention, ModelSpec, SlidingWindow

# kvpress presses whose compress is ScorerPress.compress (one budget for every layer and head)
SCORER_PRESSES = {
    "snapkv": "SnapKVPress", "knorm": "KnormPress", "streaming_llm": "StreamingLLMPress", "tova": "TOVAPress",
    "observed_attention": "ObservedAttentionPress (H2O-style)", "expected_attention": "ExpectedAttentionPress",
    "random": "RandomPress", "keydiff": "KeyDiffPress", "lagkv": "LagKVPress", "qfilter": "QFilterPress",
}
PER_LAYER_PRESSES = {"pyramidkv": "PyramidKVPress"}
MASKING_PRESSES = {"adakv": "AdaKVPress", "criticalkv": "CriticalAdaKVPress"}
PRESSES = {**SCORER_PRESSES, **PER_LAYER_PRESSES, **MASKING_PRESSES}
PYRAMID_WINDOW, PYRAMID_BETA = 64, 20  # PyramidKVPress defaults (window_size, beta)
EVICT_FORMS: dict[tuple[str, ...], str] = {("sink", "window"): "StreamingLLM", ("heavy", "recent"): "H2O"}


def parse_evict(text: str) -> tuple[tuple[str, int], ...]:
    """``sink=4,window=4092`` -> (("sink", 4), ("window", 4092)); a one-line error naming the bad part."""
    from kvplan.units import parse_count

    pairs: list[tuple[str, int]] = []
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not name:
            raise UsageError(f"--evict '{text}': write name=tokens pairs, e.g. sink=4,window=4092 or "
                             "heavy=200,recent=200", field="evict")
        pairs.append((name.strip().lower(), parse_count(value.strip(), "evict")))
    return tuple(pairs)


@dataclass(frozen=True)
class RatioKept:
    """kvpress ``compute_n_kept``: ``max(1, int(k_len * (1 - ratio)))`` (Python float arithmetic)."""

    ratio: float

    def kept(self, tokens: int) -> int:
        return max(1, int(tokens * (1 - self.ratio)))

    def formula(self, tokens: str) -> str:
        return f"max(1, int({tokens} x (1 - {self.ratio:g})))"


@dataclass(frozen=True)
class PyramidKept:
    """kvpress ``PyramidKVPress.get_layer_budget`` for layer ``layer`` of ``layers``."""

    ratio: float
    layer: int
    layers: int
    window: int = PYRAMID_WINDOW
    beta: int = PYRAMID_BETA

    def kept(self, tokens: int) -> int:
        capacity = self.window + tokens * (1 - self.ratio)
        min_num = (capacity - self.window) / self.beta
        max_num = (capacity - self.window) * 2 - min_num
        if max_num >= tokens - self.window:
            max_num = tokens - self.window
            min_num = (capacity - self.window) * 2 - max_num
        if not (tokens >= max_num >= min_num >= self.window):
            return max(1, round(tokens * (1 - self.ratio)))  # kvpress falls back to SnapKV's budget
        steps = (max_num - min_num) / (self.layers - 1) if self.layers > 1 else 0.0
        return round(max_num - self.layer * steps)

    def formula(self, tokens: str) -> str:
        return f"PyramidKV budget of layer {self.layer} for {tokens} prompt tokens (ratio {self.ratio:g})"


def wants_eviction(options: EngineOptions) -> bool:
    return options.evict is not None or options.press is not None or options.compression_ratio is not None


def apply(spec: ModelSpec, layout: CacheLayout, options: EngineOptions) -> CacheLayout:
    """``layout`` with the eviction budget on its full-attention layers, and the notes it owes."""
    if options.kv_cache is not None:
        raise UsageError("kvplan does not combine a quantized cache with eviction here", field="evict")
    if options.evict is not None and (options.press is not None or options.compression_ratio is not None):
        raise UsageError("choose one of --evict and --press", field="press")
    if options.evict is not None:
        return _evict(layout, options.evict)
    return _press(spec, layout, options)


def _evict(layout: CacheLayout, evict: tuple[tuple[str, int], ...]) -> CacheLayout:
    names = tuple(name for name, _ in evict)
    method = EVICT_FORMS.get(names)
    if method is None:
        raise UsageError(f"--evict takes sink=S,window=W (StreamingLLM) or heavy=H,recent=R (H2O), not "
                         f"{','.join(names)}", field="evict")
    (keep_name, keep), (_, recent) = evict
    if keep < 0 or recent <= 0:
        raise UsageError(f"--evict {keep_name}={keep},{names[1]}={recent}: the window must be positive",
                         field="evict")
    rule = SinkWindow(keep, recent, "heavy" if method == "H2O" else "sink")
    groups = tuple(replace(g, tokens=rule) if g.layer.attends_all else g for g in layout.groups)
    if method == "StreamingLLM":
        notes = [f"eviction changes the model's answers: StreamingLLM (arXiv:2309.17453) keeps {keep} attention "
                 f"sink tokens and the last {recent} tokens of every full-attention layer; sliding layers keep "
                 "their own window",
                 "transformers' SinkCache (4.36-4.5x; in 5.x the Hub's transformers-community/sink_cache) holds "
                 "a longer prompt whole until the first decode step"]
    else:
        notes = [f"eviction changes the model's answers: H2O (arXiv:2306.14048) keeps {keep} heavy-hitter and "
                 f"{recent} recent tokens per full-attention layer (FMInference/H2O H2OKVCache_LayerWise)",
                 "H2O also keeps an accumulated attention score per head and held token (hh_score), not counted"]
    return replace(layout, groups=groups, assumptions=(*layout.assumptions, *notes))


def _press(spec: ModelSpec, layout: CacheLayout, options: EngineOptions) -> CacheLayout:
    press, ratio = options.press, options.compression_ratio
    if press is None:
        raise UsageError("--compression-ratio needs --press (snapkv, knorm, pyramidkv, ...)", field="press")
    key = press.strip().lower().replace("-", "_")
    key = key[:-5] if key.endswith("press") else key
    key = key.rstrip("_")
    if key not in PRESSES:
        raise UsageError(f"kvplan knows no kvpress press '{press}' (it knows: {', '.join(PRESSES)})", field="press")
    if ratio is None:
        raise UsageError(f"--press {key} needs --compression-ratio (kvpress's default 0 removes nothing)",
                         field="compression_ratio")
    if not 0 <= ratio < 1:
        raise UsageError(f"--compression-ratio {ratio:g} must be in [0, 1) (ScorerPress asserts it)",
                         field="compression_ratio")
    other_kinds = {type(layer) for layer in spec.layers} - {FullAttention}
    others = sorted({layer.kind for layer in spec.layers if type(layer) in other_kinds})
    # kvpress 0.5.5 BasePress.__call__ hooks every decoder layer but skips the sliding-window ones of
    # Gemma3ForConditionalGeneration (model_type gemma3) only; transformers' sliding cache keeps its window
    gemma3 = other_kinds == {SlidingWindow} and spec.model_type == "gemma3"
    if other_kinds == {SlidingWindow} and not gemma3:
        raise UsageError(f"kvpress skips sliding-window layers on Gemma 3 (Gemma3ForConditionalGeneration) only "
                         f"(BasePress.__call__); on {spec.model_type} it hooks them too and compresses what "
                         "transformers' sliding cache holds after prefill, which kvplan does not model",
                         field="press")
    if others and not gemma3:
        raise UsageError(f"kvplan models kvpress on full-attention models (and Gemma 3) only; {spec.id} has "
                         f"{', '.join(others)} layers", field="press")
    cited = f"NVIDIA kvpress {PRESSES[key]}, compression_ratio {ratio:g}"
    if key in MASKING_PRESSES:
        note = (f"eviction changes the model's answers: {cited} masks the pruned tokens per head during attention "
                "but keeps every key and value, so the cache is not smaller")
        return replace(layout, assumptions=(*layout.assumptions, note))
    groups: list[GroupRule] = []
    for g in layout.groups:
        if not isinstance(g.layer, FullAttention):  # Gemma 3's sliding layers: not hooked
            groups.append(g)
        elif key in PER_LAYER_PRESSES:
            for offset in range(g.count):
                index = g.first_layer + offset
                rule = PrefillKept(PyramidKept(ratio, index, spec.num_layers), options.prompt_len)
                groups.append(replace(g, layer=replace(g.layer, count=1), first_layer=index, tokens=rule))
        else:
            groups.append(replace(g, tokens=PrefillKept(RatioKept(ratio), options.prompt_len)))
    where = "the whole context as the prompt" if options.prompt_len is None else \
        f"a prompt of {options.prompt_len:,} tokens"
    notes = [f"eviction changes the model's answers: {cited} keeps the prompt tokens it scores highest at "
             f"prefill ({where}); decoded tokens are all kept"]
    if gemma3:
        notes.append("kvpress skips Gemma 3's sliding-window layers (BasePress.__call__): they keep their window"
                     + ("; PyramidKV's budgets still step over every layer's index" if key in PER_LAYER_PRESSES
                        else ""))
    return replace(layout, groups=tuple(groups), assumptions=(*layout.assumptions, *notes))
