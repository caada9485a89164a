"""One exception type for bad input: it names the file, the field and what is wrong."""
from __future__ import annotations


class SpecError(ValueError):
    """Bad YAML spec or bad CLI argument. ``str(err)`` is the one-line message the CLI prints."""

    def __init__(self, where: str, field: str | None, problem: str):
        self.where, self.field, self.problem = where, field, problem
        loc = f"{where}: {field}" if field else where
        super().__init__(_one_line(f"{loc}: {problem}"))

    def __reduce__(self):  # the same error back from a worker process or a cluster (perfmodel.workers)
        return (type(self), (self.where, self.field, self.problem))


def _one_line(text: str) -> str:
    """Control characters (a field name with a newline, a multi-line YAML message) are escaped so the
    CLI always prints exactly one line."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in str(text))


class ContextWarning(UserWarning):
    """A context beyond the model's max_context: computed anyway (the formulas hold; the model was
    not trained that long). The CLI prints it as one `perfmodel: warning:` line."""


class DataWarning(UserWarning):
    """A result computed on missing data (a layout that crosses nodes on a spec without network_latency,
    achievable terms a spec lacks): computed anyway, optimistic, and said once per run. The CLI prints
    it as one `perfmodel: warning:` line."""


class LoadWarning(UserWarning):
    """Offered load beyond what a simulated server sustains: its queue grows with the trace, so latency
    percentiles depend on how long the trace is. The CLI prints it as one `perfmodel: warning:` line."""


def checked_init(cls):
    """A public class whose constructor names a missing or unknown argument in one line (with did-you-mean)
    instead of Python's TypeError. Only the binding is checked here; the values are the class's own business."""
    import difflib
    import functools
    import inspect

    init = cls.__init__
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            return init(self, *args, **kwargs)  # no cost on the way in: the binding is examined only on failure
        except TypeError:
            try:
                sig.bind(self, *args, **kwargs)
            except TypeError as e:
                bad = e
            else:
                raise  # a TypeError from inside the constructor, not from its arguments
        names = [p for p in sig.parameters if p != "self"]
        unknown = [k for k in kwargs if k not in sig.parameters]
        if unknown:
            near = difflib.get_close_matches(unknown[0], names, n=1, cutoff=0.75)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise SpecError(f"{cls.__name__}()", None, f"unknown argument {unknown[0]!r}{hint} (it takes "
                                                      f"{', '.join(names)})") from None
        raise SpecError(f"{cls.__name__}()", None, str(bad).replace("__init__() ", "")) from None

    cls.__init__ = __init__
    return cls
