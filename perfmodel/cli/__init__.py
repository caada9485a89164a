"""`perfmodel` command line: each command is one call into perfmodel.api plus formatting.

Bad input (a YAML file, an option) prints one line `perfmodel: error: <where>: <field>: <problem>`
and exits 2; never a traceback.

Layout: common.py (the app, shared options and helpers) and one module per group of commands,
each importing only common.py: queries, whatifs, grids (sweep, plan), plot, serving (serve-sim,
kv-memory), measure (measure, validate), importer (import-config); main.py is the entry point.
"""
from __future__ import annotations

from . import grids, importer, measure, plot, queries, serving, whatifs  # noqa: F401  register the commands
from . import capacity  # noqa: F401  registers `perfmodel capacity`
from .common import app
from .main import main, run

__all__ = ["app", "main", "run"]
