"""Numbers typed on the command line, converted by kvplan (not by the parser) so that every mistake
reads the same under any typer version: ``--tp: 'x' is not a whole number``.

The typer options that take numbers are declared as text; the commands call these with the library
parameter's name (``field``), which the command's table of options turns back into its flag.
"""

from __future__ import annotations

from kvplan.engines.settings import engine_int, number, whole
from kvplan.errors import UsageError

__all__ = ["engine_int", "number", "output_count", "per_request_count", "prefix_count", "sharing_args", "whole"]


def per_request_count(text: str | None, field: str) -> int:
    """A per-request count (--n, --beam-width): 1 when not given; 0 or less reaches the library, which
    refuses it by name (never read as 1); more than any engine takes is refused here, before any work."""
    value = whole(text, field)
    if value is None:
        return 1
    from kvplan.plan import MAX_SAMPLES

    if value > MAX_SAMPLES:
        raise UsageError(f"'{text}': at most {MAX_SAMPLES:,} sequences per request (vLLM refuses more: "
                         f"VLLM_MAX_N_SEQUENCES, {MAX_SAMPLES:,} by default)", field=field)
    return value


def prefix_count(text: str | None) -> int:
    """--shared-prefix: a count as --context reads it, or 0 (nothing shared, the same as leaving it out)."""
    from kvplan.units import parse_count

    if text is None or text.strip() == "0":
        return 0
    return parse_count(text, "shared_prefix")


def output_count(text: str | None) -> int | None:
    """--output-len: a count as --context reads it, or 0 (the cache right after the prefill, before any
    decoded token: a state transformers' QuantizedCache prices apart)."""
    from kvplan.units import parse_count

    if text is None:
        return None
    return 0 if text.strip() == "0" else parse_count(text, "output_len")


def sharing_args(prompt_len: str | None, output_len: str | None, shared_prefix: str | None, n: str | None,
                 beam_width: str | None, speculative_method: str | None, num_speculative_tokens: str | None,
                 speculative_model: str | None) -> dict:
    """The sharing and speculation options as the library's keywords (estimate and verify read them alike)."""
    from kvplan.units import parse_count

    # ``is not None``, never truthiness: an empty value ('--prompt-len ""') is a mistake, not "not given"
    return {
        "prompt_len": parse_count(prompt_len, "prompt_len") if prompt_len is not None else None,
        "output_len": output_count(output_len),
        "shared_prefix": prefix_count(shared_prefix),
        "n": per_request_count(n, "n"), "beam_width": per_request_count(beam_width, "beam_width"),
        "speculative_method": speculative_method,
        "num_speculative_tokens": whole(num_speculative_tokens, "num_speculative_tokens"),
        "speculative_model": speculative_model,
    }
