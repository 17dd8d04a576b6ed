"""Big sweeps a block at a time (issue 26): the lazy rows of a plain sweep are computed a block of contexts at a
time (``TokenRule.held_many``, ``GroupRule.layer_bytes_many``, vLLM's admission over a list) and written from
templates. Every figure and every byte of output must be what the point-by-point path (``estimate`` without
``lazy``, the reference) gives, on every kind of layout kvplan supports and every engine."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan.estimate as estimate_module
from kvplan.engines import ENGINE_NAMES
from kvplan.engines.layout import GroupRule
from kvplan.engines.rules import (
    AllTokens,
    ChunkBlocks,
    KeepLast,
    SinkWindow,
    SlidingCells,
    TokenRule,
    UnifiedCells,
    WholePages,
    WindowBlocks,
)
from kvplan.errors import UsageError
from kvplan.estimate import EstimateResult, RowSweep, estimate
from kvplan.render.formats import write
from kvplan.units import format_bytes, format_bytes_many

MODELS = (
    "gpt2",  # dense, every head its own
    "meta-llama/Llama-3.1-8B",  # GQA
    "google/gemma-3-27b-it",  # sliding window interleaved with full attention
    "openai/gpt-oss-20b",  # sliding + full, attention sinks
    "deepseek-ai/DeepSeek-V2-Lite",  # MLA
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",  # chunked local attention
    "mistralai/Mamba-Codestral-7B-v0.1",  # recurrent only
    "ai21labs/AI21-Jamba-1.5-Mini",  # attention + Mamba
    "Qwen/Qwen3-Next-80B-A3B-Thinking",  # linear attention + full
    "google/gemma-4-E2B-it",  # layers that share another's cache
)
FORMATS = ("json", "csv", "markdown", "table")
# irregular: not sorted, page and window edges either side, a repeat dropped, past the model's limit
CONTEXTS = [4097, 1, 2, 3, 15, 16, 17, 31, 33, 127, 128, 129, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 8191,
            8192, 8193, 8193, 300, 16383, 16385, 32768, 65535, 65537, 131071, 131073, 200000, 7]

OTHER_DTYPE = {"llamacpp": "q8_0", "hf": "float32", "hf-static": "float32"}
"""A second KV dtype each engine takes where the quantized cache (computed whole) is not what it means."""


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of a few rows, so that every sweep here spans several (and a block ends mid-batch-list)."""
    monkeypatch.setattr(estimate_module, "_BLOCK_ROWS", 7)


def _text(results: list[EstimateResult], fmt: str) -> str:
    out = io.StringIO()  # not a terminal: the table is the plain writer's
    write(results, fmt, out)
    return out.getvalue()


def _same(lazy: EstimateResult, reference: EstimateResult) -> None:
    assert isinstance(lazy.rows, RowSweep) and lazy.rows.blocks() is not None, "the block path was not taken"
    assert isinstance(reference.rows, tuple)
    got, want = list(lazy.rows), list(reference.rows)
    assert [repr(r) for r in got] == [repr(r) for r in want]  # the values and their types (1 is not 1.0)
    assert [vars(r) for r in got] == [vars(r) for r in want]
    for fmt in FORMATS:
        assert _text([lazy], fmt) == _text([reference], fmt), fmt


@pytest.mark.parametrize("model", MODELS)
def test_block_rows_and_outputs_are_the_point_by_point_ones(model):
    for engine in ENGINE_NAMES:
        for batches in ([1], [3], [1, 2, 64]):
            kwargs = dict(contexts=CONTEXTS, batches=batches, kv_dtypes=f"auto,{OTHER_DTYPE.get(engine, 'fp8')}",
                          engine=engine)
            _same(estimate(model, lazy=True, **kwargs), estimate(model, **kwargs))


@pytest.mark.parametrize("kwargs", [
    dict(engine="vllm", engine_version="0.11"),  # chunked layers held as full attention
    dict(engine="vllm", async_scheduling=False),  # windows freed one step sooner
    dict(engine="vllm", block_size=32),
    dict(engine="vllm", tp=4),
    dict(engine="sglang", block_size=64),
    dict(engine="llamacpp", swa_full=True),
    dict(engine="hf", engine_options={"evict": (("sink", 4), ("window", 1020))}),
    dict(engine="hf", speculative_method="ngram", num_speculative_tokens=5, batches=[1]),  # contexts less the slots
    dict(engine="vllm", speculative_method="ngram", num_speculative_tokens=3),
])
def test_engine_settings_take_the_block_path_exactly(kwargs):
    kwargs = {"batches": [1, 4], **kwargs}
    ran = 0
    for model in ("meta-llama/Llama-3.1-8B", "google/gemma-3-27b-it", "meta-llama/Llama-4-Scout-17B-16E-Instruct"):
        try:
            reference = estimate(model, contexts=CONTEXTS, **kwargs)
        except UsageError:  # a setting this model cannot take (transformers speculates for dense models only)
            continue
        _same(estimate(model, contexts=CONTEXTS, lazy=True, **kwargs), reference)
        ran += 1
    assert ran


def test_by_layer_and_shared_rows_stay_point_by_point():
    for result in (estimate("gpt2", contexts=[1024], by_layer=True, lazy=True),
                   estimate("gpt2", contexts=[1024], shared_prefix=512, lazy=True)):
        assert isinstance(result.rows, RowSweep) and result.rows.blocks() is None


def test_text_cells_are_quoted_as_the_csv_writer_quotes_them():
    for model_id in ('org/a,b', 'org/"quoted"', "org/100%d", "org/line\nbreak", "org/ spaced "):
        lazy = estimate("gpt2", contexts=[1, 4096, 5000], lazy=True)
        lazy = replace(lazy, model=replace(lazy.model, id=model_id))
        reference = replace(lazy, rows=tuple(estimate("gpt2", contexts=[1, 4096, 5000]).rows))
        for fmt in FORMATS:
            assert _text([lazy], fmt) == _text([reference], fmt), (model_id, fmt)


def test_several_engines_in_one_output():
    kwargs = dict(contexts=CONTEXTS, batches=[1, 8])
    lazy = [estimate("google/gemma-3-27b-it", engine=e, lazy=True, **kwargs) for e in ("vllm", "sglang", "hf")]
    reference = [estimate("google/gemma-3-27b-it", engine=e, **kwargs) for e in ("vllm", "sglang", "hf")]
    for fmt in FORMATS:
        assert _text(lazy, fmt) == _text(reference, fmt), fmt


@settings(max_examples=60, deadline=None)
@given(contexts=st.lists(st.integers(1, 1 << 21), min_size=1, max_size=40),
       batches=st.lists(st.integers(1, 512), min_size=1, max_size=3, unique=True),
       model=st.sampled_from(("meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V2-Lite",
                              "meta-llama/Llama-4-Scout-17B-16E-Instruct", "ai21labs/AI21-Jamba-1.5-Mini")),
       engine=st.sampled_from(ENGINE_NAMES))
def test_any_contexts(contexts, batches, model, engine):
    kwargs = dict(contexts=contexts, batches=batches, engine=engine)
    _same(estimate(model, lazy=True, **kwargs), estimate(model, **kwargs))


RULES: tuple[TokenRule, ...] = (
    TokenRule(), AllTokens(), KeepLast(4096), KeepLast(4096, 1), KeepLast(1), WholePages(AllTokens(), 16),
    WholePages(AllTokens(), 1), WholePages(KeepLast(1024), 64), WholePages(WholePages(AllTokens(), 3), 16),
    *(WindowBlocks(block, window, lag) for block in (1, 16, 32) for window in (1, 2, 16, 17, 4096) for lag in (0, 1, 2)),
    WindowBlocks(16, 0, 1), WindowBlocks(16, -20, 2),  # no window at all: what ``held`` does, even there
    *(ChunkBlocks(block, chunk, lag) for block in (1, 16) for chunk in (1, 16, 8192) for lag in (0, 1, 2)),
    UnifiedCells(256), UnifiedCells(1), SlidingCells(4096, 512, 256), SlidingCells(16, 0, 1), SinkWindow(4, 1020),
    SinkWindow(0, 1),
)


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_each_rule_over_a_list_is_the_rule_at_each_point(rule):
    contexts = [*range(300), *range(4000, 4200), *range(8180, 8200), 1 << 20, 1 << 40]
    assert rule.held_many(contexts) == [rule.held(c) for c in contexts]
    for batch in (1, 2, 7):
        assert rule.batch_tokens_many(contexts, batch) == [rule.batch_tokens(c, batch) for c in contexts]


def _subclasses(cls: type) -> list[type]:
    return [cls, *(s for sub in cls.__subclasses__() for s in _subclasses(sub))]


def _owner(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in c.__dict__)


@pytest.mark.parametrize("base,one,many", [(TokenRule, "held", "held_many"),
                                           (TokenRule, "batch_tokens", "batch_tokens_many"),
                                           (GroupRule, "layer_bytes", "layer_bytes_many")])
def test_a_variant_that_changes_a_rule_changes_its_list_form_too(base, one, many):
    """The list form is written beside the point form it repeats: a subclass that overrides the point form
    under a list form of its base would leave the list form computing the base's rule."""
    import kvplan.engines.hf.quantized  # the variants outside rules.py and layout.py
    import kvplan.engines.hf.speculative

    for cls in _subclasses(base):
        point, listed = _owner(cls, one), _owner(cls, many)
        # TokenRule's held_many calls held itself: right under any held
        assert issubclass(listed, point) or (many == "held_many" and listed is TokenRule), cls


def test_vllm_admission_over_a_list_is_admission_at_each_length():
    from kvplan.dtypes import resolve_kv_dtype
    from kvplan.engines import get_engine
    from kvplan.engines.protocol import make_engine_options
    from kvplan.engines.vllm.admission import vllm_pool
    from kvplan.sources.resolve import load_model

    lengths = [1, 2, 15, 16, 17, 1023, 1024, 1025, 8191, 8192, 8193, 16385, 40000, 131072, 5]
    vllm = get_engine("vllm")
    for model in MODELS:
        spec = load_model(model)
        for version in ("0.11", "0.33"):
            dtype = resolve_kv_dtype("auto", vllm.auto_kv_dtype(spec))
            layout = vllm.layout(spec, dtype, vllm.version_of(version)[1], make_engine_options())
            pool = vllm_pool(layout)
            for batched in (0, 1, 8192):
                assert pool.blocks_per_request_many(lengths, batched) == \
                    [pool.blocks_per_request(n, batched) for n in lengths], (model, version)


@given(st.one_of(st.integers(-(1 << 70), 1 << 70), st.integers(0, 1 << 45),
                 st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18)))
def test_format_bytes_many_is_format_bytes(n):
    assert format_bytes_many([n, n]) == [format_bytes(n)] * 2


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_the_csv_template_formats_as_the_f_string(x):
    assert "%.6g" % x == f"{x:.6g}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_writers_hold_a_block_or_two_not_the_sweep(fmt):
    import weakref

    from kvplan.estimate import RowBlock

    result = estimate("meta-llama/Llama-3.1-8B", contexts="1..3000:1", batches=[1, 2], lazy=True)
    sweep = result.rows
    made = [0]

    def watched(admission: bool) -> Iterator[RowBlock]:
        refs: list[weakref.ref[RowBlock]] = []  # a block holds lists: unhashable, so no WeakSet
        for block in sweep.blocks(admission):
            refs = [r for r in refs if r() is not None] + [weakref.ref(block)]
            made[0] += 1
            assert len(refs) <= 2, f"{len(refs)} blocks held at once"
            yield block

    rows = RowSweep(lambda: _block_rows_of(watched(True)), len(sweep), watched)
    assert _text([replace(result, rows=rows)], fmt) == _text([replace(result, rows=tuple(sweep))], fmt)
    assert made[0] >= 6000 // 7  # blocks of 7 rows (the fixture), every one made


def _block_rows_of(blocks):
    for block in blocks:
        yield from block.rows()
