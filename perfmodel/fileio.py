"""Writing output files so that nothing is lost: a temporary file in the target's folder, renamed over
the target only when complete. An interrupted or failed run leaves the previous file as it was and no
partial file at the target. A target that cannot be written (a missing folder, a folder, no
permission, a full disk) is one SpecError line naming the option."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import SpecError


def user_path(text, opt: str) -> Path:
    """A path as a user typed it, ~ expanded, as one SpecError line naming the option when it cannot name a file:
    a ~user that does not exist, a name over the file system's 255 bytes, a loop of links. A missing file is
    left to the caller, which says what it needed."""
    shown = f"{str(text)[:80]}..." if len(str(text)) > 80 else str(text)
    said = "" if str(opt) in (str(text), str(text)[:80]) else f"{shown}: "  # the option is the path itself
    try:
        p = Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser/x
        raise SpecError(opt, None, f"{said}no such user's home folder") from None
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:  # ENAMETOOLONG, ELOOP, ...
        raise SpecError(opt, None, f"{said}{_why(e)}") from None
    return p


def read_capped(path, opt: str, limit: int, what: str = "file") -> str:
    """The text of a regular file of at most `limit` bytes, or one SpecError line naming the option: a missing file,
    a folder, a device or FIFO (reading one may never end), a file over the limit, bytes that are not UTF-8."""
    data, it = _capped(path, opt, limit, what)
    return _utf8(data, opt, it)


def _utf8(data: bytes, opt: str, it: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(opt, None, f"{it} is not UTF-8 text (byte {e.start})") from None


def _capped(path, opt: str, limit: int, what: str) -> tuple[bytes, str]:
    """(bytes, how errors name the file) of a regular file of at most `limit` bytes: read_capped's checks but UTF-8."""
    import stat

    p = user_path(path, opt)
    it = "it" if str(opt) == str(path) else str(path)  # the option is the path itself (a spec file's name)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise SpecError(opt, None, f"no such {what}" if it == "it" else f"{path}: no such {what}") from None
    except OSError as e:
        raise SpecError(opt, None, _why(e) if it == "it" else f"{path}: {_why(e)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpecError(opt, None, f"{it} is a folder; give a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(opt, None, f"{it} is not a regular file (a device, FIFO or socket: reading one may not end); "
                                   f"give a {what}")
    if st.st_size > limit:
        raise SpecError(opt, None, f"{it} is {st.st_size:,} bytes, over the {limit:,}-byte limit of a {what}")
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise SpecError(opt, None, f"cannot read {it}: {_why(e)}") from None
    if len(data) > limit:
        raise SpecError(opt, None, f"{it} grew past the {limit:,}-byte limit of a {what} while it was read")
    return data, it


def read_csv_capped(path, opt: str, limit: int, what: str = "CSV", **read_csv):
    """A CSV of at most `limit` bytes as a DataFrame (read_capped's checks first, so /dev/zero or a FIFO is refused
    before pandas reads without end), or one SpecError line naming the option."""
    import io

    import pandas as pd

    data, it = _capped(path, opt, limit, what)
    _utf8(data, opt, it)  # the check alone: pandas parses the bytes
    try:
        return pd.read_csv(io.BytesIO(data), **read_csv)  # bytes: pandas' C parser reads them twice as fast as text
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise SpecError(opt, None, f"is not a readable CSV ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def check_writable(target, opt: str = "-o") -> Path:
    """Refuse up front what can be known before writing: a missing folder, a folder, no permission, a name the
    file system cannot hold (over 255 bytes), a ~user that does not exist."""
    p = user_path(target, opt)
    if _special(p):  # a device, FIFO or socket: written in place (atomic_path), so only it must be writable
        if not os.access(p, os.W_OK):
            raise SpecError(opt, None, f"cannot write {target}: permission denied")
        return p
    if p.is_symlink():  # a link to a file: the file it names is the one replaced
        p = Path(os.path.realpath(p))
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise SpecError(opt, None, f"{target} is a folder; give a file name")
    if not folder.is_dir():
        raise SpecError(opt, None, f"cannot write {target}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise SpecError(opt, None, f"cannot write {target}: permission denied")
    return p


def _why(e: OSError) -> str:
    return e.strerror or e.__class__.__name__


WRITTEN: list = []  # paths this process put in place (the CLI says so when a signal arrives after them)


def _special(p: Path) -> bool:
    """True when p names something that exists and is not a regular file or folder: a device (/dev/null,
    /dev/full), a FIFO, a socket, or a link to one (/proc/self/fd/1). Such a target is written in place."""
    import stat

    try:
        st = os.stat(p)  # follows links
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


@contextmanager
def atomic_path(target, opt: str = "-o"):
    """Yields a temporary path beside `target`; renames it over `target` when the block ends without an
    exception, and removes it otherwise (Ctrl-C included). An atomic write is for regular files: a device, FIFO
    or socket (or a link to one) is yielded itself and written in place, never replaced by a file; a link to a
    regular file (or to a new one) has its target replaced, and stays a link."""
    p = user_path(target, opt)
    if _special(p):
        if not os.access(p, os.W_OK):
            raise SpecError(opt, None, f"cannot write {target}: permission denied")
        try:
            yield p
        except OSError as e:  # /dev/full: no space left on device
            raise SpecError(opt, None, f"cannot write {target}: {_why(e)}") from None
        WRITTEN.append(str(target))
        return
    p = check_writable(p, opt)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".part", dir=p.parent)
    except OSError as e:
        raise SpecError(opt, None, f"cannot write {target}: {_why(e)}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        try:
            mode = os.stat(p).st_mode & 0o777 if p.exists() else 0o666 & ~_umask()
            os.chmod(tmp, mode)
            os.replace(tmp, p)
            WRITTEN.append(str(target))
        except OSError as e:
            raise SpecError(opt, None, f"cannot write {target}: {_why(e)}") from None
    except OSError as e:  # a write inside the block failed: a full disk, an I/O error
        raise SpecError(opt, None, f"cannot write {target}: {_why(e)}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(target, text: str, opt: str = "-o") -> Path:
    """`text` to `target`, atomically."""
    with atomic_path(target, opt) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)


@contextmanager
def atomic_group(targets: dict, opt: str = "--out"):
    """Several files that change together: yields {name: temporary path}; all are renamed into place at
    the end (after every one was written), none if the block fails or is interrupted."""
    stack, tmps = [], {}
    try:
        for name, target in targets.items():
            cm = atomic_path(target, opt)
            tmps[name] = cm.__enter__()
            stack.append(cm)
        yield tmps
    except BaseException as e:
        for cm in reversed(stack):
            cm.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)  # each removes its temporary file
        if isinstance(e, OSError):  # a write failed (a full disk): one line, nothing replaced
            raise SpecError(opt, None, f"cannot write {', '.join(str(t) for t in targets.values())}: {_why(e)}") from None
        raise
    else:
        for cm in stack:
            cm.__exit__(None, None, None)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m
