"""Whether a YAML document is Helm values of llm-d's modelservice, a SkyPilot task or a Ray Serve LLM config, told
from its top-level keys without importing those readers: ``kvplan check`` asks this of every manifest and compose
file, and a fleet of them holds none (each reader costs its imports and patterns at start-up)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any


LLMD_ROLES = ("decode", "prefill")
#: Top-level keys of a SkyPilot task (sky/utils/schemas.py ``get_task_schema``)
SKYPILOT_TASK_KEYS = frozenset({"name", "workdir", "event_callback", "num_nodes", "resources", "envs", "secrets",
                                "file_mounts", "setup", "run", "service", "config", "inputs", "outputs", "volumes",
                                "pool", "_user_specified_yaml"})
RAY_SERVE_BUILDERS = ("ray.serve.llm:", "ray.llm.")


def llmd(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("modelArtifacts"), dict)
            and any(isinstance(data.get(role), dict) for role in LLMD_ROLES) and "kind" not in data)


def skypilot(data: Any) -> bool:
    if not isinstance(data, dict) or not data or not {str(k) for k in data} <= SKYPILOT_TASK_KEYS:
        return False
    return isinstance(data.get("run"), str) or isinstance(data.get("resources"), dict)


def ray_serve(data: Any) -> bool:
    if not isinstance(data, dict) or "kind" in data:
        return False
    if isinstance(data.get("model_loading_config"), dict):
        return True
    apps = data.get("applications")
    return isinstance(apps, list) and any(
        isinstance(a, dict) and str(a.get("import_path", "")).startswith(RAY_SERVE_BUILDERS) for a in apps)
