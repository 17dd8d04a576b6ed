"""What check reads by hand instead of compiling a pattern on every run (its start-up issue) matches what the
pattern (or shlex) matched: the engines' image patterns, vLLM's suffixed integers, a script's annotation comments and
double-quoted shell words; and the words of ``kvplan fit``'s launch commands are quoted as shlex quotes them."""

from __future__ import annotations

import re
import shlex

from conftest import shlex_words
from hypothesis import given
from hypothesis import strategies as st

from kvplan.deploy import flags, shell
from kvplan.engines.launch import join, quote
from kvplan.engines.serve import serve_flags
from kvplan.engines.serve_format import _image_form, image_search
from kvplan.engines.vllm.flags import vllm_int

PATTERNS = sorted({p for engine in ("vllm", "sglang", "trtllm", "llamacpp")
                   for serve in [serve_flags(engine)] if serve is not None
                   for p in (*serve.images, *serve.tagged_images)}
                  | {r"(^|/)vllm/vllm-openai(:|@|$)"})
IMAGES = ["vllm/vllm-openai:v0.10.2", "vllm/vllm-openai", "docker.io/vllm/vllm-openai@sha256:ab", "vllm-openai",
          "myvllm-openai:1", "x/vllm-openai-rocm:1", "vllm/vllm-openai\n", "vllm/vllm-openai\n\n", "vllm-tpu:nightly",
          "vllm-tpu@x", "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "tensorrt-llm/release", "a/tensorrt_llm@x",
          "tensorrt_llmx", "lmsysorg/sglang:v0.5", "", "/", "vllm/vllm-openaivllm/vllm-openai:1"]


def test_the_engines_image_patterns_are_matched_by_hand_as_re_matches_them():
    assert all(_image_form(p) is not None for p in PATTERNS)  # each of them read by hand
    for pattern in PATTERNS:
        for image in IMAGES:
            assert image_search(pattern, image) == (re.search(pattern, image) is not None), (pattern, image)


@given(st.sampled_from(PATTERNS), st.text(alphabet="vlm/-opnai:@\ntpusr_", max_size=30))
def test_image_patterns_by_hand_any_text(pattern, image):
    assert image_search(pattern, image) == (re.search(pattern, image) is not None)


def test_other_patterns_go_to_re():
    assert _image_form(r"(^|/)vllm.*") is None and _image_form(r"vllm") is None
    assert image_search(r"ll[m]", "vllm") and not image_search(r"^x", "vllm")


def test_vllm_int_with_and_without_a_suffix():
    assert [vllm_int(t) for t in ["32768", " 32k ", "32K", "1.5m", "2G\n"]] == [32768, 32000, 32768, 1500000, 2 << 30]


def _comment_by_pattern(line: str) -> tuple[str, str, str] | None:
    m = shell._COMMENT.match(line)
    return m.groups() if m else None


COMMENT_LINES = ["# kvplan/gpu: NVIDIA-L4", "  #kvplan/min-concurrency = 4@8k", "# kvplan.io/gpu: H100", "#kvplan/a/b-c:x",
                 "# kvplan/: x", "# kvplan/gpu x", "# kvplan/gpu\u00a0: x", "\u2003# kvplan/gpu:", "x # kvplan/gpu: a",
                 "# kvplanx/gpu: a", "# kvplan/a.b/c:d", "# kvplan/a/b/: x", "# kvplan//gpu=1", "# kvplan/GPU: a",
                 "# kvplan/a-/b: c", "#"]


def test_annotation_comments_by_hand_are_the_patterns():
    for line in COMMENT_LINES:
        assert shell.annotation_comment(line) == _comment_by_pattern(line), line


@given(st.text(alphabet=" \t\u00a0#kvplan/.-gu:=xZ", max_size=30))
def test_annotation_comments_any_line(line):
    assert shell.annotation_comment(line) == _comment_by_pattern(line)


WORD_TEXTS = ['exec vllm serve "$MODEL" ', 'a;b', 'x --n=$(A); y', '"";', ';"";', 'a&&b || c', '"a;b"|c', ' ;; ', '|', '--max-model-len "$MAX_LEN"', '""', 'a""b', '"a b" c', '"unclosed', ' "" ',
              'x="1 2"y', '"\t"\n"x"', 'a\x0bb "c"', '"a"b"c d"', '"', '""""', 'a  "" b']


def test_double_quoted_words_are_shlexs():
    for text in WORD_TEXTS:
        assert flags._double_quoted_words(text) == shlex_words(text), repr(text)
        assert flags._split_words(text) == shlex_words(text), repr(text)


@given(st.text(alphabet=' \t\r\n"ab=$-\x0b;&|', max_size=30))
def test_double_quoted_words_any_text(text):
    assert flags._double_quoted_words(text) == shlex_words(text)


LAUNCH_WORDS = ["", "vllm", "meta-llama/Llama-3.1-8B", "/models/my model", "it's", "a'b'c", "--max-model-len", "32768",
                "x=1,y=2:z@h%+", "$HOME", "~/m", "*", "é", "a\nb", "tab\there", "'", '"', "--kv-cache-dtype=fp8_e4m3"]


def test_launch_words_are_quoted_as_shlex_quotes_them():
    for word in LAUNCH_WORDS:
        assert quote(word) == shlex.quote(word), repr(word)
    assert join(LAUNCH_WORDS) == " ".join(shlex.quote(w) for w in LAUNCH_WORDS)


@given(st.text(max_size=20) | st.text(alphabet="aZ09_@%+=:,./-' \"$é\t", max_size=20))
def test_launch_words_any_text(word):
    assert quote(word) == shlex.quote(word)
