"""What check reads by hand instead of compiling a pattern on every run (its start-up issue) matches what the
pattern matched: the kubelet's $(VAR) expansion, the engines' image patterns and vLLM's suffixed integers."""

from __future__ import annotations

import re

from conftest import shlex_words
from hypothesis import given
from hypothesis import strategies as st

from kvplan.deploy import flags, shell
from kvplan.engines.serve import serve_flags
from kvplan.engines.serve_format import _image_form, image_search
from kvplan.engines.vllm.flags import vllm_int

ENV = {"A": "x", "MAX_MODEL_LEN": "32768", "_b1": "$(A)", "LWS_GROUP_SIZE": "2"}
TEXT = st.text(alphabet="$()A_b1 xMAX_MODEL_LEN-9é\n", max_size=40)


def _by_pattern(text: str, env: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        return "$" if m.group("name") is None else env.get(m.group("name"), m.group(0))

    return flags._KUBELET.sub(repl, text)


@given(TEXT)
def test_kubelet_expansion_is_the_patterns(text):
    assert flags.kubelet_expand(text, ENV) == _by_pattern(text, ENV)


def test_kubelet_expansion_examples():
    for text in ["$(MAX_MODEL_LEN)", "$$(A)", "$($(A))", "$(1A)", "$(A", "a$", "$()", "--x=$(LWS_GROUP_SIZE);$(B)",
                 "$$$(A)$", "$(_b1)"]:
        assert flags.kubelet_expand(text, ENV) == _by_pattern(text, ENV), text


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


GROUPS = ("arith", "k8s", "brace", "op", "default", "plain")


def _all_groups(m) -> str:
    return "<" + repr([m.group(0), *(m.group(g) for g in GROUPS)]) + ">"


SUBST_TEXTS = ["${CONTEXT_LENGTH:-32768}", "$MODEL", "\"$MAX_LEN\"", "$((A * 2))", "$((A * (2)))", "$(LWS_GROUP_SIZE)",
               "${A:}", "${A:-x${B}y}", "${A-$}", "${A:=b}c${}", "$$(A)", "${A?", "${1A}", "${_a:+x}z", "$1", "$",
               "a$((1)", "${A:-$x}", "$(A$(B))", "$((1))$((2))", "${A}${B:-}$C"]


def test_variable_expansion_by_hand_is_the_patterns():
    for text in SUBST_TEXTS:
        assert flags._expand(_all_groups, text) == flags._SUBST.sub(_all_groups, text), text


@given(st.text(alphabet="$(){}:-=?+*AB_1 x\n", max_size=40))
def test_variable_expansion_any_text(text):
    assert flags._expand(_all_groups, text) == flags._SUBST.sub(_all_groups, text)


WORD_TEXTS = ['exec vllm serve "$MODEL" ', 'a;b', 'x --n=$(A); y', '"";', ';"";', 'a&&b || c', '"a;b"|c', ' ;; ', '|', '--max-model-len "$MAX_LEN"', '""', 'a""b', '"a b" c', '"unclosed', ' "" ',
              'x="1 2"y', '"\t"\n"x"', 'a\x0bb "c"', '"a"b"c d"', '"', '""""', 'a  "" b']


def test_double_quoted_words_are_shlexs():
    for text in WORD_TEXTS:
        assert flags._double_quoted_words(text) == shlex_words(text), repr(text)
        assert flags._split_words(text) == shlex_words(text), repr(text)


@given(st.text(alphabet=' \t\r\n"ab=$-\x0b;&|', max_size=30))
def test_double_quoted_words_any_text(text):
    assert flags._double_quoted_words(text) == shlex_words(text)


def test_substitution_after_the_hand_reads_uses_the_patterns_with_the_same_results(monkeypatch):
    """substitute and kubelet_expand read their first texts by hand (flags.HAND_READS), then use the compiled
    patterns: both give the same text and the same unresolved names."""
    texts = [*SUBST_TEXTS, "--x=$((LWS_GROUP_SIZE * 2)) $(A) $$(A)"]
    cases = [(t, k8s, arith) for t in texts for k8s in (False, True) for arith in (False, True)]
    monkeypatch.setattr(flags, "_hand_left", {"subst": len(cases), "kubelet": len(texts)})
    by_hand = [flags.substitute(t, ENV, k8s=k8s, arithmetic=arith) for t, k8s, arith in cases]
    kubelet_by_hand = [flags.kubelet_expand(t, ENV) for t in texts]
    assert flags._hand_left == {"subst": 0, "kubelet": 0}  # every one read by hand: the next by the patterns
    assert [flags.substitute(t, ENV, k8s=k8s, arithmetic=arith) for t, k8s, arith in cases] == by_hand
    assert [flags.kubelet_expand(t, ENV) for t in texts] == kubelet_by_hand
