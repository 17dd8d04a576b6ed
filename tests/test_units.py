import pytest

from kvplan.errors import UsageError
from kvplan.units import format_bytes, format_count, parse_count_list


def test_lists_and_suffixes():
    assert parse_count_list("1,8,32", "batch") == [1, 8, 32]
    assert parse_count_list("4k", "context") == [4096]
    assert parse_count_list("8k,32k,128k", "context") == [8192, 32768, 131072]


def test_doubling_range_ends_on_the_upper_bound():
    assert parse_count_list("1k..8k", "context") == [1024, 2048, 4096, 8192]
    assert parse_count_list("1k..5k", "context") == [1024, 2048, 4096, 5120]


def test_step_range_and_duplicates():
    assert parse_count_list("1..5:2", "batch") == [1, 3, 5]
    assert parse_count_list("4,4,8", "batch") == [4, 8]


@pytest.mark.parametrize("bad", ["", "x", "0", "-4", "1k..", "8k..1k", "1,,2", "1.5", "1e99999"])
def test_bad_lists_are_one_line_errors(bad):
    with pytest.raises(UsageError) as info:
        parse_count_list(bad, "context")
    assert info.value.field == "context" and "--" not in info.value.message and "\n" not in str(info.value)


def test_binary_units_never_bare_gb():
    assert format_bytes(1 << 30) == "1.00 GiB"
    assert format_bytes(1536 << 20) == "1.50 GiB"
    assert format_bytes(512) == "512 B"
    assert format_count(131072) == "128k" and format_count(1000) == "1,000"
