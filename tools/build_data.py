"""Write the JSON twins of kvplan's bundled YAML data: ``python tools/build_data.py`` (``--check`` only compares).

``kvplan/data/gpus.yaml`` (the GPU catalog) and ``kvplan/data/links.yaml`` (offload links) stay the files
people edit, with their comments and citations. Every command that plans reads the catalog, and importing
yaml plus parsing it costs ~20 ms of start-up; the same data as JSON parses in well under a millisecond.
Each ``.json`` holds exactly what the YAML loads as (comments dropped); tests/test_data_json.py fails when
one differs from its YAML, naming this script.

It also writes ``model_specs/models.json``, the rows of ``kvplan models`` (kvplan/cli/models.py): listing the
bundled models then reads one file instead of loading and estimating every spec. Rebuild it after a change to
the bundled specs or to what the rows show (tests/test_data_json.py compares it with the rows computed afresh).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kvplan.cli import models  # noqa: E402
from kvplan.data_files import JSON_TWINS, json_twin_path, render_json  # noqa: E402
from kvplan.safe_io import read_yaml  # noqa: E402
from kvplan.sources.bundled import spec_file  # noqa: E402

MODEL_INDEX: Path | None = Path(spec_file(models.INDEX))
"""Where the rows of ``kvplan models`` go (None: not written)."""


def expected(yaml_path: Path) -> str:
    return render_json(read_yaml(yaml_path))


def models_index() -> str:
    return render_json({"models": models.compute_rows()})


def targets() -> list[tuple[Path, str]]:
    """(each file this script writes, its text)."""
    out = [(Path(json_twin_path(p)), expected(Path(p))) for p in JSON_TWINS]
    if MODEL_INDEX is not None:
        out.append((MODEL_INDEX, models_index()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a JSON file is stale")
    args = parser.parse_args(argv)
    stale = []
    for out, text in targets():
        if out.exists() and out.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(out)
        else:
            out.write_text(text, encoding="utf-8")
            print(f"wrote {out.relative_to(REPO)}")
    for out in stale:
        print(f"{out.relative_to(REPO)} differs from its source: run python tools/build_data.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
