"""Figures for reports. Every plot is built from the same queries the CLI and the notebooks use and
returns a matplotlib Figure that a notebook can restyle. matplotlib is imported here only.

Every kind that draws a model on a device takes comma lists (or Python lists) of models and
hardware and the layout arguments tp, pp and ep (each an int or a list); it draws one series per
(model, hardware, layout), named in a legend or a panel title by what varies, with what is common
in the figure title. A combination that cannot be drawn (a tp that does not divide the heads, more
panels than a figure holds) is one SpecError naming the option.

Every figure states what its times are: mode roofline (the ideal bound), achievable (an estimate
of a good implementation, `impl=` a profile) or simple; figures without modelled times say so.

Deterministic: fixed styles, label placement computed from the geometry, and no timestamps in saved
files (see save()): the same input gives the same bytes.
"""
from __future__ import annotations

from .style import (  # noqa: F401  (re-exported: plots.save, plots.KINDS, plots._plt ...)
    KINDS,
    Labeller,
    MAX_CAPACITY,
    MAX_LINES,
    MAX_PANELS,
    MAX_SERVING,
    MODE_LINES,
    Series,
    _Figures,
    _OFFSETS,
    _formats,
    _grid_minor,
    _label_order,
    _linestyle,
    _names_list,
    _num,
    _one,
    _panels,
    _plt,
    _time_tick,
    _whole_list,
    layout_label,
    mode_line,
    readable_log,
    save,
    series,
)
from .steps import roofline, latency_throughput, memory, kv, speculative  # noqa: F401
from .runs import BACKEND_COLOURS, validation, serving, capacity, published, serving_validation, save_validation  # noqa: F401
