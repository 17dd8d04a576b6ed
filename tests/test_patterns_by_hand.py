"""The check readers' small patterns matched by hand (launch commands, shell scripts, GPU labels, image tags, memory
quantities: no pattern compiled on a check's start where the text is plain): each helper answers as the regular
expression it stands for, on chosen and random text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.deploy import flags

TEXT = st.text(alphabet="aZ_9=/.-pythonPY3 \t\r\n'\"\\#;&|$é", max_size=14)
WORDS = ["A=1", "_x=", "a1=b=c", "1a=2", "=x", "a-b=1", "é=1", "A=1\n", "A\n=1", "python", "python3.11", "/usr/bin/python3",
         "./python", "py", "pythonx", "python3\n", "a\n/python", "x/python3/y", "", "/"]


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_assignment_splits_as_the_pattern(word: str) -> None:
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", word, re.S)
    assert flags._assignment(word) == (m.groups() if m else None)


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_python_is_told_as_the_pattern_tells_it(word: str) -> None:
    assert flags._is_python(word) == bool(re.match(r"^(.*/)?python[0-9.]*$", word))


def test_chosen_words() -> None:
    for word in WORDS:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", word, re.S)
        assert flags._assignment(word) == (m.groups() if m else None), word
        assert flags._is_python(word) == bool(re.match(r"^(.*/)?python[0-9.]*$", word)), word


@settings(max_examples=1500, deadline=None)
@given(TEXT, st.integers(min_value=0, max_value=16))
def test_first_of_finds_what_a_search_finds(line: str, start: int) -> None:
    for chars, pattern in (("'\"\\#", r"['\"\\#]"), ('"\\', r'["\\]')):
        m = re.compile(pattern).search(line, start)
        assert flags._first_of(line, chars, start) == (m.start() if m else -1)


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_plain_lines_split_as_on_shlex_blanks(text: str) -> None:
    words = flags._split_words(text)
    if re.fullmatch(r"[^'\"\\#;&|]*", text):
        assert words == [w for w in re.split(r"[ \t\r\n]+", text) if w]


SHELLISH = st.text(alphabet="shbadz/.-\nİıIiMmGg0129-,x", max_size=12)


@settings(max_examples=1500, deadline=None)
@given(SHELLISH, st.sampled_from(["vllm", "trtllm-serve", "sh", "a/b", "x.y", "mig"]))
def test_command_names_and_shells_as_their_patterns(word: str, command: str) -> None:
    assert flags._is_shell(word) == bool(re.match(r"^(.*/)?(ba|da|z)?sh$", word))
    assert flags._names(word, command) == bool(re.match(rf"^(.*/)?{re.escape(command)}$", word))


@settings(max_examples=1500, deadline=None)
@given(SHELLISH)
def test_mig_slices_and_device_lists_as_their_patterns(text: str) -> None:
    from kvplan.deploy.gpus import _mig_slice
    from kvplan.deploy.shell import _device_list

    assert _mig_slice(text) == bool(re.search(r"-MIG-|mig-[0-9]g", text, re.I))
    assert _device_list(text) == bool(re.fullmatch(r"[0-9]+(,[0-9]+)*", text))


def test_chosen_labels_and_lists() -> None:
    from kvplan.deploy.gpus import _mig_slice
    from kvplan.deploy.shell import _device_list

    for text in ["NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "a100-mig-3g", "A100-MİG-1g", "A100-mıg-1g", "mig-1G", "mig-12g",
                 "H100", "MIG-", "-mig-", "0", "0,1", "0,,1", ",0", "1,2,", "²", "01,3"]:
        assert _mig_slice(text) == bool(re.search(r"-MIG-|mig-[0-9]g", text, re.I)), text
        assert _device_list(text) == bool(re.fullmatch(r"[0-9]+(,[0-9]+)*", text)), text


def test_kvplan_files_engine_flags_are_apart_from_its_own_settings() -> None:
    """A kvplan deployment file whose engine gives only kvplan's own settings reads no engine's table of settings
    (``kvplan_file._engine_flags``): that holds only while no engine's file flag is one of those keys."""
    from kvplan.deploy.kvplan_file import NOT_FLAGS, _file_flags

    assert _file_flags() and not set(_file_flags()) & NOT_FLAGS


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="v:.0123456789a-١", max_size=14))
def test_image_version_tags_as_the_pattern_reads_them(tag: str) -> None:
    from kvplan.deploy.pods import version_tag

    m = re.search(r":v?(\d+\.\d+(?:\.\d+)?)", tag)
    assert version_tag(tag) == (m.group(1) if m else None)


def test_chosen_image_tags() -> None:
    from kvplan.deploy.pods import version_tag

    for tag in ["vllm-openai:v0.10.2", "sglang:v0.5.2-cu126", "release:1.0.0rc4", "x:latest", "x:v1", "x:1.", "x:1.2.",
                "a:b:v2.3", "x:vv1.2", "x:12.34.56.78", "x:v1.2.3.4", ":1.2", "x", "x:v١.2"]:
        m = re.search(r":v?(\d+\.\d+(?:\.\d+)?)", tag)
        assert version_tag(tag) == (m.group(1) if m else None), tag


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="0123456789.eEkKMGTPimn \n١", max_size=12))
def test_kubernetes_quantities_read_as_the_pattern_reads_them(text: str) -> None:
    from kvplan.deploy.host_memory import _quantity, k8s_quantity

    assert k8s_quantity(text) == _quantity(text.strip())


def test_chosen_kubernetes_quantities() -> None:
    from kvplan.deploy.host_memory import _quantity, k8s_quantity

    for text in ["64Gi", "500G", "2048", "0", "1000000000Gi", "123456789Ki", "1.5Gi", "5E", "5e3", "500m", "1Gi\n", " 8Gi ",
                 "Gi", "", "1 Gi", "١Gi", "08Mi"]:
        assert k8s_quantity(text) == _quantity(text.strip()), text
