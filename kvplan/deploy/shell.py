"""Plain shell scripts: every ``vllm serve`` / ``python -m ...`` command in them is a deployment.

Variables assigned in the script (``MODEL=...``, ``export MAX_LEN=${MAX_LEN:-32768}``) are followed;
the GPU type comes from a ``# kvplan/gpu: H100`` comment or ``--gpu``, the GPU count from
``CUDA_VISIBLE_DEVICES=0,1`` when set (else tp x pp x dp).
"""

from __future__ import annotations

from kvplan.deploy.config_files import attach, relative_to
from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.flags import apply_invocation, script_invocations
from kvplan.deploy.pods import apply_annotations
from kvplan.deploy.report import Finding
from kvplan.lazy_re import lazy_pattern
from kvplan.safe_io import path_stem

# the value is stripped in Python: a lazy (.+?)\s*$ retries the trailing-blank scan at every character (quadratic)
_COMMENT = lazy_pattern(r"^\s*#\s*(kvplan[./a-z]*/)([a-z-]+)\s*[:=](.*)$")


_PREFIX_CHARS = frozenset("./abcdefghijklmnopqrstuvwxyz")
_KEY_CHARS = frozenset("-abcdefghijklmnopqrstuvwxyz")


def annotation_comment(line: str) -> tuple[str, str, str] | None:
    """``_COMMENT.match(line)``'s groups (None where it does not match), read by hand: compiling the
    pattern cost every check of a script ~0.4 ms. ``line`` holds no line break (a line of ``splitlines``)."""
    rest = line.lstrip()  # \s* (str.isspace is what \s matches)
    if not rest.startswith("#"):
        return None
    rest = rest[1:].lstrip()
    if not rest.startswith("kvplan"):
        return None
    run = 6  # kvplan[./a-z]*: its longest run, then each '/' in it from the last, as the pattern backtracks
    while run < len(rest) and rest[run] in _PREFIX_CHARS:
        run += 1
    slash = rest.rfind("/", 6, run)
    while slash >= 0:
        end = slash + 1
        while end < len(rest) and rest[end] in _KEY_CHARS:
            end += 1
        after = rest[end:].lstrip()
        if end > slash + 1 and after[:1] in (":", "="):
            return rest[:slash + 1], rest[slash + 1:end], after[1:]
        slash = rest.rfind("/", 6, slash)
    return None


def looks_like(text: str, path: str) -> bool:
    from kvplan.engines.serve import launch_pattern

    return path.endswith((".sh", ".bash")) or text.startswith("#!") or bool(launch_pattern().search(text))


def _device_list(text: str) -> bool:
    """``re.fullmatch(r"[0-9]+(,[0-9]+)*", text)``: device numbers (ASCII digits) separated by commas."""
    return all(part.isascii() and part.isdigit() for part in text.split(","))


def read(text: str, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    from kvplan.deploy.deployment import kvplan_annotations

    notes = {}
    for i, raw in enumerate(text.splitlines(), start=1):
        m = annotation_comment(raw) if "kvplan" in raw else None  # the pattern holds the word: most lines lack it
        if m and m[2].strip():
            found = kvplan_annotations({f"kvplan/{m[1]}": m[2].strip()})
            notes.update({k: (v[0], i, f"# {m[0]}{m[1]}") for k, v in found.items()})
    env: dict[str, str] = {}
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    stem = path_stem(path)
    for command, inv in script_invocations(text, 1, env, path, findings):
        name = stem if not deployments else f"{stem}#{len(deployments) + 1}"
        dep = Deployment(name=name, file=path, line=inv.line, source="shell", base_dir=base_dir)
        apply_invocation(dep, inv)
        attach(dep, relative_to(base_dir))  # --extra_llm_api_options beside the script
        visible = [t for t in command if t.text.startswith("CUDA_VISIBLE_DEVICES=")]
        devices = visible[0].text.partition("=")[2] if visible else env.get("CUDA_VISIBLE_DEVICES")
        if devices and _device_list(devices):
            dep.gpu_count = Value(len(devices.split(",")), visible[0].line if visible else None,
                                  "CUDA_VISIBLE_DEVICES")
        apply_annotations(dep, notes)
        deployments.append(dep)
    return deployments, findings, len(deployments)
