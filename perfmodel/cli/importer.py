"""`perfmodel import-config`: a Hugging Face config.json -> a perfmodel model YAML, offline.

    perfmodel import-config path/to/config.json                  # print the YAML
    perfmodel import-config config.json --name my-model -o models/my-model.yaml

Every other command already takes a config.json path wherever it takes a model name
(`perfmodel decode -m path/to/config.json`); this command writes the YAML so it can be edited,
given a published parameter count, and kept.
"""
from __future__ import annotations

from typing import Optional

import typer

from .common import _out, app
from ..errors import SpecError


@app.command("import-config")
def import_config(path: str = typer.Argument(..., help="A Hugging Face config.json (a local file; no network)."),
                  name: Optional[str] = typer.Option(None, "--name", metavar="<name>",
                                                     help="Model name (default: the folder or file name)."),
                  output: Optional[str] = typer.Option(None, "-o", "--output", metavar="<file>",
                                                       help="Write the YAML here instead of printing it."),
                  force: bool = typer.Option(False, "--force", help="Overwrite an existing --output file.")):
    """Convert a Hugging Face config.json to a model YAML (printed, or written with -o)."""
    from .. import hf_import
    from ..ops import param_count
    from ..specs import model_from_dict

    spec = hf_import.config_to_spec(path)
    if name is not None:
        if not name.strip() or "\n" in name:
            raise SpecError("--name", None, f"must be a non-empty single-line name, got {name!r}")
        spec["name"] = name
    model = model_from_dict(spec, path)  # validate before anything is written
    text = hf_import.to_yaml(spec)
    if output is None:
        _out(text.rstrip("\n"))
        return
    from ..fileio import user_path

    dest = user_path(output, "-o")
    if dest.exists() and not force:
        raise SpecError(output, None, "already exists; pass --force to overwrite it")
    if dest.suffix not in (".yaml", ".yml"):
        raise SpecError(output, None, "must end in .yaml or .yml (commands find model files by that suffix)")
    from ..fileio import write_text

    write_text(dest, text, "-o")
    _out(f"wrote {output}: {model.name}, {param_count(model):,} parameters")
