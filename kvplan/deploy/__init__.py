"""``kvplan check``: deployments read where they are, checked with ``kvplan.max_batch``.

``check(paths_or_globs)`` reads every file (kvplan deployment files, Kubernetes manifests, docker
compose files, vLLM production-stack Helm values, shell scripts), checks each deployment and returns a
:class:`CheckReport` whose ``exit_code`` is 0 (all fit and meet their requirements), 1 (one does not)
or 2 (an input is invalid). A bad file is reported and the others are still checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvplan.deploy.report import CheckReport, DeploymentResult, FileResult, Finding

__all__ = ["check", "CheckReport", "DeploymentResult", "FileResult", "Finding", "expand_paths"]

_SUFFIXES = (".yaml", ".yml", ".sh", ".bash")


def expand_paths(paths_or_globs: Iterable[str | os.PathLike]) -> tuple[list[str], list[Finding]]:
    """Files named by paths, directories (their YAML and shell files, recursively) and globs ('**' too)."""
    files: list[str] = []
    problems: list[Finding] = []
    for item in paths_or_globs:
        text = os.fspath(item)
        if any(ch in text for ch in "*?["):
            matched = _glob_files(text)
            if not matched:
                problems.append(Finding("error", "no-files", f"'{text}' matches no file", text, invalid_input=True))
            files += matched
        elif os.path.isdir(text):
            found = sorted(str(p) for p in Path(text).rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
            if not found:
                problems.append(Finding("error", "no-files", f"{text}: no YAML or shell file in this directory",
                                        text, invalid_input=True))
            files += found
        elif os.path.exists(text):
            files.append(text)
        else:
            problems.append(Finding("error", "no-files", f"{text}: no such file", text, invalid_input=True))
    return list(dict.fromkeys(files)), problems


def _glob_files(pattern: str) -> list[str]:
    """Files matching ``pattern`` ('**' spans directories), as ``glob.glob`` names them, without following
    symlinked directories: glob.glob follows them, and two links to a parent directory make its search
    exponential (``kvplan check 'deploy/**/*.yaml'`` never ended). pathlib's '**' does not follow them."""
    parts = pattern.split(os.sep)
    first = next(i for i, part in enumerate(parts) if any(ch in part for ch in "*?["))
    root = os.sep.join(parts[:first]) or (os.sep if first == 1 else "")
    rest = [part if part == "**" else part.replace("**", "*") for part in parts[first:] if part]
    if rest and rest[-1] == "**":  # glob.glob: every file below; pathlib: only the directories
        rest.append("*")
    hidden = any(part.startswith(".") for part in rest)  # glob.glob's '*' skips dot files unless asked for
    base = Path(root or ".")
    found = []
    for path in base.glob("/".join(rest)):
        relative = path.relative_to(base)
        if not hidden and any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_file():
            found.append(os.path.join(root, str(relative)) if root else str(relative))
    return sorted(found)


def load_specs(directory: str | os.PathLike | None) -> dict[str, Any]:
    """Pinned model specs (``kvplan spec`` output) in a directory, by id and alias (lower case)."""
    if directory is None:
        return {}
    from kvplan.errors import UsageError
    from kvplan.sources.yaml_spec import load_user_spec

    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{directory}: not a directory", field="specs")
    out: dict[str, Any] = {}
    for path in sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")]):
        spec = load_user_spec(path)
        for key in (spec.id, *spec.aliases):
            out.setdefault(key.lower(), spec)
    return out


def check(paths_or_globs: Iterable[str | os.PathLike] | str, *, gpu: str | None = None,
          catalog: str | os.PathLike | None = None, specs: str | os.PathLike | None = None,
          online: bool = False, strict: bool = False, ignore_unrecognized: bool = False,
          calibration: str | os.PathLike | None = None) -> CheckReport:
    """Check every deployment in the given files.

    ``gpu``: the GPU type for deployments that name none. ``catalog``: a user GPU catalog file.
    ``specs``: a directory of pinned model specs. ``online``: allow the Hugging Face Hub for models
    neither bundled nor pinned (off: CI stays offline). ``strict``: warnings fail too.
    ``ignore_unrecognized``: skip files that hold no deployment (for pre-commit, which passes every file).
    ``calibration``: a calibration file (``kvplan log --save``) for the deployments it matches.
    """
    from kvplan import __version__
    from kvplan.deploy.checks import Context

    if isinstance(paths_or_globs, (str, os.PathLike)):
        paths_or_globs = [paths_or_globs]
    files, problems = expand_paths(paths_or_globs)
    ctx = Context(catalog_file=Path(catalog) if catalog else None, gpu=gpu, specs=load_specs(specs), online=online)
    if calibration is not None:
        from kvplan.logs.calibration import load

        ctx.calibration = load(calibration)
    report = CheckReport(strict=strict, kvplan_version=__version__)
    for problem in problems:
        report.files.append(FileResult(path=problem.file, findings=[problem]))
    for path in files:
        report.files.append(check_file(path, ctx, ignore_unrecognized=ignore_unrecognized))
    return report


def check_file(path: str, ctx: Any, *, ignore_unrecognized: bool = False) -> FileResult:
    from kvplan.deploy.checks import check_deployment

    result = FileResult(path=path)
    try:
        fmt, deployments, findings = read_file(path)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not hide the other files
        from kvplan.errors import KvplanError

        line = getattr(exc, "line", None)
        code = "malformed-yaml" if "malformed YAML" in str(exc) else "invalid-input"
        message = str(exc) if isinstance(exc, KvplanError) else f"cannot read ({type(exc).__name__}: {exc})"
        result.findings.append(Finding("error", code, message.removeprefix(f"{path}: "), path, line,
                                       invalid_input=True))
        return result
    if fmt == "engine-config":  # an engine's config file: checked through the deployment that names it
        result.skipped = True
        return result
    result.format = fmt
    unrecognized = {"unknown-format", "no-serving-container", "unknown-kind"}
    if ignore_unrecognized:
        if not deployments and all(f.code in unrecognized for f in findings):
            result.skipped = True
            return result
        findings = [f for f in findings if f.code != "unknown-kind"]
    result.findings.extend(findings)
    for dep in deployments:
        result.deployments.extend(check_deployment(dep, ctx))
    return result


def read_file(path: str) -> tuple[str | None, list[Any], list[Finding]]:
    """(format, deployments, findings) of one file."""
    from kvplan.deploy import compose, helm, k8s, kvplan_file, shell
    from kvplan.deploy.yaml_lines import load_all

    from kvplan.safe_io import read_text

    text = read_text(path)  # regular files only, bounded size, UTF-8
    base_dir = Path(path).parent
    if not path.endswith((".yaml", ".yml", ".json")) and shell.looks_like(text, path):
        deployments, findings, _ = shell.read(text, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "shell", 1)]
        return "shell", deployments, findings
    docs = load_all(text, path)
    data = [d for d, _ in docs if d is not None]
    if not data:
        return None, [], [Finding("error", "unknown-format", "empty file: no deployment", path, 1, invalid_input=True)]
    first = data[0]
    if kvplan_file.looks_like(first):
        deployments, findings = kvplan_file.read(first, path, base_dir)
        return "kvplan", deployments, findings
    if helm.looks_like(first):
        deployments, findings, _ = helm.read(first, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "helm", getattr(first, "line", 1))]
        return "helm", deployments, findings
    if compose.looks_like(first):
        deployments, findings, _ = compose.read(first, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "compose", getattr(first, "line", 1))]
        return "compose", deployments, findings
    if _engine_config(first) and len(data) == 1:
        return "engine-config", [], []
    if any(k8s.looks_like(d) for d in data):
        deployments, findings, _ = k8s.read(docs, path, base_dir)
        if not deployments and not any(f.invalid_input for f in findings):
            findings.append(_none(path, "kubernetes", docs[0][1]))
        return "kubernetes", deployments, findings
    return None, [], [Finding("error", "unknown-format", "not a deployment kvplan reads (a kvplan deployment file, "
                              "Kubernetes manifest, docker compose file, production-stack Helm values or shell "
                              "script)", path, getattr(first, "line", 1), invalid_input=True)]


def _engine_config(data: Any) -> bool:
    """Whether a YAML mapping is an engine's own config file (TensorRT-LLM's extra_llm_api_options): read through
    the deployment whose command names it, skipped on its own."""
    from kvplan.engines.serve import serving_engines

    if not isinstance(data, dict) or not data:
        return False
    keys = {str(k) for k in data}
    return any(serve.config_keys and keys <= serve.config_keys for serve in serving_engines())


def _none(path: str, fmt: str, line: int | None) -> Finding:
    what = {"kubernetes": "no container", "compose": "no service", "helm": "no enabled modelSpec",
            "shell": "no command"}[fmt]
    return Finding("error", "no-serving-container", f"{what} runs an engine (vllm serve MODEL, python -m "
                   "vllm.entrypoints.openai.api_server, python -m sglang.launch_server, trtllm-serve MODEL)", path, line,
                   invalid_input=True)
