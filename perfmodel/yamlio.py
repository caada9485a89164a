"""Reading spec files: yaml.safe_load semantics, stricter, faster, and cached.

- libyaml's C parser where PyYAML has it (CSafeLoader), else the pure-Python SafeLoader: the same
  safe constructors either way (no tag runs code), so the same documents load to the same values;
- refused, as one YAMLError each: duplicate keys in a mapping (the last would silently win), aliases
  (*name: lists of aliases of lists expand exponentially, "billion laughs"), and nesting deeper
  than MAX_DEPTH;
- files larger than MAX_BYTES are refused before they are read;
- a file is parsed once per process: the result is cached by path, modification time and size,
  and a deep copy is handed out, so callers may change it.
"""
from __future__ import annotations

import copy
import os

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

MAX_BYTES = 1 << 20  # 1 MiB: the largest catalog spec is ~20 kB, a config.json ~5 kB
MAX_DEPTH = 64

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed with PyYAML


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """SafeLoader whose mappings refuse duplicate keys."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:  # an unhashable key: SafeConstructor reports it
                break
            if dup:
                raise ConstructorError(None, None, f"duplicate key {key!r} (each field may appear once)",
                                       key_node.start_mark)
            seen.add(key)
        return SafeConstructor.construct_mapping(self, node, deep)



def _check_graph(node) -> None:
    """Refuse aliases (a node reached twice) and nesting deeper than MAX_DEPTH, without recursion."""
    seen: set = set()
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if id(n) in seen:
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed in specs",
                                              n.start_mark)
        seen.add(id(n))
        if depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", n.start_mark)
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((v, depth + 1) for v in n.value)


def safe_yaml(text: str):
    """The document in `text`, as yaml.safe_load reads it, with the refusals above (YAMLError)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node)
        return loader.construct_document(node)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
    finally:
        loader.dispose()


_PARSED: dict = {}  # resolved path -> (mtime_ns, size, data)
TRACE: list | None = None  # while a spec loads, the (path, mtime_ns, size) of every file it read


def stamp(path) -> tuple:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def read_cached(path, parse):
    """parse(path) once per (path, mtime, size); a deep copy of the result each call."""
    key = os.path.realpath(path)
    mtime, size = stamp(key)
    if TRACE is not None:
        TRACE.append((key, mtime, size))
    hit = _PARSED.get(key)
    if hit is None or hit[0] != mtime or hit[1] != size:
        hit = _PARSED[key] = (mtime, size, parse(key))
    return copy.deepcopy(hit[2])


def unchanged(stamps) -> bool:
    """True when every file of a load is as it was (same modification time and size)."""
    try:
        return all(stamp(p) == (m, s) for p, m, s in stamps)
    except OSError:
        return False
