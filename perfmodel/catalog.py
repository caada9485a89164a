"""The catalogs as files: where catalog specs live, finding a name or a path (with did-you-mean), strict YAML
reading, `base:` inheritance (a file over its base, recursively) and `--set` overrides of the raw mapping.
perfmodel.specs turns what these return into Hardware, Model and Impl objects."""
from __future__ import annotations

import copy
import os
from pathlib import Path

import yaml

from . import yamlio
from .yamlio import safe_yaml
from .errors import SpecError

PKG = Path(__file__).resolve().parent

_SUBDIR = {"hardware": "hardware", "models": "models", "impl": "hardware/impl"}


def catalog_dir(kind: str) -> Path:
    """hardware/, models/ or hardware/impl/ (implementation profiles): inside the installed package
    (wheel) or at the repo root (checkout)."""
    sub = _SUBDIR[kind]
    for d in (PKG / "catalog" / sub, PKG.parent / sub):
        if d.is_dir():
            return d
    raise SpecError(kind, None, "catalog folder not found (broken install?)")


def catalog_names(kind: str) -> list[str]:
    return sorted(p.stem for p in catalog_dir(kind).glob("*.yaml"))


def _near(ref: str, names: list[str], n: int = 4) -> list[str]:
    """Catalog names close to a mistyped one: the same letters and digits up to case and punctuation
    (llama2-13b, Llama-2-13B), a name it contains or that contains it, then difflib's closest spellings."""
    import difflib

    key = lambda x: "".join(ch for ch in x.lower() if ch.isalnum())  # noqa: E731
    k = key(ref)
    same = [x for x in names if key(x) == k]
    part = [x for x in names if x not in same and k and (k in key(x) or key(x) in k)]
    close = difflib.get_close_matches(ref.lower(), names, n=n, cutoff=0.75)
    return list(dict.fromkeys(same + sorted(part, key=len) + close))[:n]


def _resolve(ref: str, kind: str, rel_to: Path | None = None) -> Path:
    ref = str(ref)
    if ref.endswith((".yaml", ".yml")) or os.sep in ref or "/" in ref:
        from .fileio import user_path

        p = user_path(ref, ref[:80])
        if not p.is_absolute() and rel_to is not None and not p.exists():
            p = rel_to / p
        if not p.is_file():
            raise SpecError(ref, None, "no such file")
        return p
    p = catalog_dir(kind) / f"{ref}.yaml"
    if not p.is_file():
        hint = f"; did you mean {', '.join(near)}?" if (near := _near(ref, catalog_names(kind))) else \
            f"; run `perfmodel list {kind}`"
        noun = {"models": "model"}.get(kind, kind)
        article = "an" if noun[:1] in "aeiou" else "a"
        raise SpecError(ref, None, f"not {article} {noun} catalog name or YAML file{hint}")
    return p


def _read_yaml(path: Path, shown: str) -> dict:
    """A spec file's mapping, parsed once per process (yamlio: duplicate keys, aliases and deep nesting
    refused; larger than 1 MiB refused before reading)."""
    try:
        if path.stat().st_size > yamlio.MAX_BYTES:
            raise SpecError(shown, None, f"is {path.stat().st_size:,} bytes; a spec file may be at most "
                                         f"{yamlio.MAX_BYTES:,} bytes")
        data = yamlio.read_cached(path, lambda p: _parse(p, shown))
    except OSError as e:
        raise SpecError(shown, None, f"cannot read file ({e.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise SpecError(shown, None, "expected a YAML mapping of field: value")
    return data


def _parse(path: str, shown: str):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(shown, None, f"cannot read file ({e.__class__.__name__})") from None
    try:
        return safe_yaml(text)  # safe constructors only: no code execution from specs
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(shown, None, f"not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None


def _merge(base: dict, over: dict) -> dict:
    """Deep merge; a null in the variant deletes the base's value."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_raw(ref: str, kind: str, _chain: tuple = ()) -> tuple[dict, str]:
    """The merged mapping of a spec and all its bases, and the file it came from."""
    path = _resolve(ref, kind, Path(_chain[-1]).parent if _chain else None)
    key = str(path.resolve())
    if key in _chain:
        cycle = " -> ".join(Path(c).stem for c in (*_chain, key))
        raise SpecError(str(path), "base", f"cycle in base: chain ({cycle})")  # noqa
    shown = f"{kind}/{path.name}" if path.parent.resolve() == catalog_dir(kind).resolve() else str(path)
    data = _read_yaml(path, shown)
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or not base:
            raise SpecError(shown, "base", "must be a catalog name or a YAML path")
        try:
            parent, _ = load_raw(base, kind, (*_chain, key))
        except SpecError as e:
            if e.field is None and e.where == base:
                raise SpecError(shown, "base", f"{base!r}: {e.problem}") from None
            raise
        data = _merge(parent, data)
    return data, shown


# ---------------------------------------------------------------- overrides (--set key=value)
def apply_overrides(data: dict, sets: dict, where: str) -> dict:
    """sets: {"n_kv_heads": 8, "peak_flops.bf16": "1 PFLOP/s"}; dotted keys reach nested fields."""
    data = copy.deepcopy(data)
    for dotted, value in sets.items():
        parts = dotted.split(".")
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        leaf = parts[-1]
        if isinstance(node.get(leaf), dict) and "value" in node[leaf] and not isinstance(value, dict):
            node[leaf] = {"value": value, "source": f"override --set {dotted}"}
        elif value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


