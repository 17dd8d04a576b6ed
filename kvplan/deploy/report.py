"""Findings and the report of ``kvplan check``; ``CheckReport.to_dict`` is the stable JSON form.

Exit status: 2 when any input is invalid (a finding with ``invalid_input``), else 1 when any finding
is an error (or, with ``strict``, a warning), else 0.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any, Literal

from kvplan.engines import DEFAULT_ENGINE
from kvplan.record import dataclass, field

if TYPE_CHECKING:  # an alias for type checkers only (typing is not imported at run time)
    Severity = Literal["error", "warning", "note"]
JSON_VERSION = 1
MAX_MESSAGE = 1000
"""Characters of a finding's message (and of a text ``value``): the readers cut what they repeat of a value to
40 characters; this bound holds for any message, so that no input can flood a report or a CI log."""


@dataclass
class Finding:
    severity: Severity
    code: str
    """Stable identifier: does-not-fit, max-num-seqs-unreachable, min-concurrency, min-context, headroom,
    gpu-count, tp-exceeds-kv-heads, engine-refuses, unknown-value, model-unresolved, unknown-gpu,
    prefix-caching, speculation-not-planned, offload-not-planned, offload-off, host-memory, default-swap,
    simple-offload, lmcache-value, not-read, config-file, kv-token-cap, engine-not-planned, invalid-input,
    malformed-yaml, unknown-kind, no-serving-container, unknown-format, engine-not-read,
    no-files, shared-gpu, shared-gpu-start, shared-gpu-order, shared-gpu-capped."""
    message: str
    file: str
    line: int | None = None
    deployment: str | None = None
    value: Any = None
    """The number that fails (as given)."""
    fits: Any = None
    """The value that would fit / pass, where there is one."""
    suggestion: str | None = None
    invalid_input: bool = False

    def __post_init__(self) -> None:  # one line each, bounded (a finding is one line of a table or a CI annotation)
        self.message = _one_line(self.message)
        if isinstance(self.value, str):
            self.value = _one_line(self.value)
        if self.suggestion is not None:
            self.suggestion = _one_line(self.suggestion)

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "code": self.code, "file": self.file, "line": self.line,
                "deployment": self.deployment, "message": self.message, "value": self.value,
                "fits": self.fits, "suggestion": self.suggestion, "invalid_input": self.invalid_input}

    def text(self) -> str:
        """One line: the message, then the suggestion."""
        return self.message + (f" ({self.suggestion})" if self.suggestion else "")


def _one_line(text: str) -> str:
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


@dataclass
class DeploymentResult:
    name: str
    file: str
    line: int | None
    source: str
    model: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    engine: str = DEFAULT_ENGINE
    engine_version: str | None = None
    tp: int | None = 1
    """As planned; where the deployment was not planned (invalid), as its file gives it: None where the file's value
    is an unresolved substitution."""
    pp: int | None = 1
    dp: int | None = 1
    kv_dtype: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    kv_cache_bytes_per_gpu: int | None = None
    request_kv_bytes: int | None = None
    max_model_len_fit: int | None = None
    max_concurrency: float | None = None
    kv_cache_tokens: int | None = None
    findings: list[Finding] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    offload: dict[str, Any] | None = None
    """The host-memory KV tier the flags ask for (max-batch's ``offload``), or None."""
    weights_bytes_per_gpu: int | None = None
    """Weights one GPU holds (less vLLM's --cpu-offload-gb)."""
    fixes: list[Any] = field(default_factory=list)
    """Where it does not fit: the smallest changes that make it fit, each planned (``deploy/fixes.py``)."""
    tenant: Any = field(default=None, repr=False, compare=False)
    """How to plan it again beside other deployments on its GPUs (a ``kvplan.share.Tenant``; not in the JSON)."""

    @property
    def status(self) -> str:
        """pass, warn, fail or invalid."""
        status = "pass"  # one pass over the findings (read ~8 times a deployment while a report is written)
        for f in self.findings:
            if f.invalid_input:
                return "invalid"
            if f.severity == "error":
                status = "fail"
            elif f.severity == "warning" and status == "pass":
                status = "warn"
        return status

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "line": self.line, "source": self.source,
            "status": self.status, "model": self.model, "engine": self.engine,
            "engine_version": self.engine_version,
            "gpu": {"name": self.gpu, "count": self.gpu_count},
            "parallel": {"tp": self.tp, "pp": self.pp, "dp": self.dp},
            "kv_dtype": self.kv_dtype, "max_model_len": self.max_model_len, "max_num_seqs": self.max_num_seqs,
            "kv_cache_bytes_per_gpu": self.kv_cache_bytes_per_gpu, "request_kv_bytes": self.request_kv_bytes,
            "max_model_len_fit": self.max_model_len_fit,
            "max_concurrency": None if self.max_concurrency is None else round(self.max_concurrency, 4),
            "kv_cache_tokens": self.kv_cache_tokens,
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu, "offload": self.offload,
            "findings": [f.to_dict() for f in self.findings],
            "assumptions": list(self.assumptions),
            "fixes": [f.to_dict() for f in self.fixes],
        }


@dataclass
class FileResult:
    path: str
    format: str | None = None
    """kvplan, kubernetes, compose, helm, shell, llm-d, vllm-chart, skypilot, ray-serve (and the formats other readers
    add); None when unreadable or unrecognized."""
    findings: list[Finding] = field(default_factory=list)
    """Problems with the file itself (not one deployment's)."""
    deployments: list[DeploymentResult] = field(default_factory=list)
    skipped: bool = False

    def all_findings(self) -> list[Finding]:
        return [*self.findings, *(f for d in self.deployments for f in d.findings)]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "skipped": self.skipped,
                "findings": [f.to_dict() for f in self.findings],
                "deployments": [d.name for d in self.deployments]}


@dataclass
class CheckReport:
    files: list[FileResult] = field(default_factory=list)
    strict: bool = False
    kvplan_version: str = ""

    @property
    def deployments(self) -> list[DeploymentResult]:
        return [d for f in self.files for d in f.deployments]

    @property
    def findings(self) -> list[Finding]:
        return [x for f in self.files for x in f.all_findings()]

    @property
    def exit_code(self) -> int:
        found = self.findings
        if any(f.invalid_input for f in found):
            return 2
        if any(f.severity == "error" or (self.strict and f.severity == "warning") for f in found):
            return 1
        return 0

    def counts(self) -> dict[str, int]:
        """``deployments`` = ``passed`` (pass or warn) + ``failed`` + ``invalid``: each deployment counted once, by its
        status. Files apart: ``files`` = those checked (read, with or without deployments) + ``files_invalid`` (a
        file whose own finding is an invalid input: unreadable, unrecognized, a bad argument) + ``files_skipped``
        (``--ignore-unrecognized``, engine config files)."""
        found = self.findings
        statuses = [d.status for d in self.deployments]
        files_invalid = sum(1 for f in self.files if any(x.invalid_input for x in f.findings))
        files_skipped = sum(1 for f in self.files if f.skipped)
        return {"files": len(self.files), "deployments": len(statuses),
                "passed": statuses.count("pass") + statuses.count("warn"), "failed": statuses.count("fail"),
                "invalid": statuses.count("invalid"),
                "files_checked": len(self.files) - files_invalid - files_skipped, "files_invalid": files_invalid,
                "files_skipped": files_skipped,
                "errors": sum(f.severity == "error" for f in found),
                "warnings": sum(f.severity == "warning" for f in found),
                "notes": sum(f.severity == "note" for f in found)}

    def summary(self) -> str:
        """The one-line summary every format ends with: each count says what it counts, and they add up."""
        c = self.counts()
        verdict = {0: "all deployments fit", 1: "a deployment does not fit or misses a requirement",
                   2: "an input is invalid"}[self.exit_code]
        files = f"{c['files']} file(s)"
        apart = [f"{c[k]} {label}" for k, label in (("files_invalid", "not read"), ("files_skipped", "skipped"))
                 if c[k]]
        if apart:
            files += f" ({c['files_checked']} read, {', '.join(apart)})"
        return (f"{c['deployments']} deployment(s) in {files}: {c['passed']} pass, {c['failed']} fail, "
                f"{c['invalid']} invalid; {c['errors']} error(s), {c['warnings']} warning(s): {verdict}")

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (docs/ci.md): fields are added over time, never renamed."""
        return {
            "kvplan_version": self.kvplan_version, "json_version": JSON_VERSION, "exit_code": self.exit_code,
            "strict": self.strict, "summary": self.counts(),
            "files": [f.to_dict() for f in self.files],
            "deployments": [d.to_dict() for d in self.deployments],
            "findings": [f.to_dict() for f in self.findings],
        }
