"""The one reader for every file that comes from elsewhere: a profile, a baseline, a shard's
results, a fixture, a bundle's files.

Such a file may be hostile or just broken: a FIFO or ``/dev/zero`` where a file should be, a
path under a file, a path too long for the system, gigabytes, JSON nested ten thousand deep, a
number of a million digits, NUL bytes. Each gives one line naming the file, the problem and the
fix (:class:`UntrustedFileError`), in bounded time and memory, never a traceback or a hang: the
file is opened without blocking and must be a regular file, at most ``max_bytes`` are read, the
parse is capped in depth and in number length, and any value quoted in a message is cut
(:func:`short`).

Standard library only (the fake's and the runner's commands both read through it).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError

#: longest path accepted (PATH_MAX on Linux); a longer one is refused before any system call
MAX_PATH = 4096
#: default size cap; callers pass their own (a profile is small, a whole run's results are not)
MAX_BYTES = 64 * 1024 * 1024
#: deepest nesting of arrays and objects accepted (the shipped files use < 12)
MAX_DEPTH = 128
#: longest integer accepted, in digits (a nanosecond timestamp has 19)
MAX_INT_DIGITS = 64
#: how much of a value a message quotes
QUOTE_LIMIT = 80


class UntrustedFileError(UntrustedInputError, ValueError):
    """A file that cannot be read as what it should be; ``str()`` is one line, ``problem`` and
    ``fix`` its parts (for a caller that words its own line)."""

    def __init__(self, message: str, problem: str = "", fix: str = "") -> None:
        super().__init__(message)
        self.problem = problem or message
        self.fix = fix


def short(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` quoted for a one-line message: ``repr`` of a string, cut to ``limit``."""
    text = value if isinstance(value, str) else str(value)
    cut = text if len(text) <= limit else text[:limit] + "..."
    return repr(cut).replace("\n", "\\n")


def _refuse(what: str, path: object, problem: str, fix: str) -> UntrustedFileError:
    return UntrustedFileError(f"{what} {short(str(path), 200)}: {problem}; {fix}", problem, fix)


_ERRNO_PROBLEMS = {
    errno.ENOENT: "no such file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "is a folder, not a file",
    errno.ENAMETOOLONG: "the path is too long",
    errno.ELOOP: "too many symlinks",
    errno.EACCES: "permission denied",
    errno.ENXIO: "is not a regular file (a socket or device?)",
}


def read_bytes(path: str | os.PathLike[str], *, what: str, fix: str,
               max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``."""
    name = os.fspath(path)
    if "\0" in name:
        raise _refuse(what, name.replace("\0", "\\0"), "the path holds a NUL character", fix)
    if len(name) > MAX_PATH:
        raise _refuse(what, name, f"the path is longer than {MAX_PATH} characters", fix)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        problem = _ERRNO_PROBLEMS.get(exc.errno or 0, f"cannot open it ({exc.strerror})")
        raise _refuse(what, name, problem, fix) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO"
                    if stat.S_ISFIFO(info.st_mode) else "a device or other special file")
            raise _refuse(what, name, f"is {kind}, not a regular file", fix)
        if info.st_size > max_bytes:
            raise _refuse(what, name, f"is {info.st_size} bytes, more than the "
                          f"{max_bytes} this reader takes", fix)
        chunks: list[bytes] = []
        total = 0
        while True:  # the size may change under us: the cap holds on what is read
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _refuse(what, name, f"grew past the {max_bytes} bytes this reader "
                              "takes", fix)
        return b"".join(chunks)
    except OSError as exc:
        raise _refuse(what, name, f"cannot read it ({exc.strerror})", fix) from None
    finally:
        os.close(fd)


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"a number of {len(text)} digits")
    return int(text)


def depth_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` is nested too deeply (None when it is not); iterative, no recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


def parse_json(data: bytes | str, *, what: str, path: object, fix: str,
               max_depth: int = MAX_DEPTH) -> Any:
    """``data`` as JSON (UTF-8), depth and number length capped."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise _refuse(what, path, f"is not UTF-8 text (byte {exc.start})", fix) from None
    if "\0" in text:
        raise _refuse(what, path, "holds a NUL character", fix)
    try:
        value = json.loads(text, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise _refuse(what, path, f"is not valid JSON (line {exc.lineno}, column "
                      f"{exc.colno}: {exc.msg})", fix) from None
    except RecursionError:
        raise _refuse(what, path, "is JSON nested too deeply", fix) from None
    except ValueError as exc:
        raise _refuse(what, path, f"is not valid JSON ({short(str(exc))})", fix) from None
    why = depth_problem(value, max_depth)
    if why:
        raise _refuse(what, path, f"is JSON {why}", fix)
    return value


def parse_toml(data: bytes, *, what: str, path: object, fix: str,
               max_depth: int = MAX_DEPTH) -> Any:
    """``data`` as TOML, depth capped."""
    import tomllib

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(what, path, f"is not UTF-8 text (byte {exc.start})", fix) from None
    if "\0" in text:
        raise _refuse(what, path, "holds a NUL character", fix)
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _refuse(what, path, f"is not valid TOML ({short(str(exc), 160)})", fix) from None
    except RecursionError:
        raise _refuse(what, path, "is TOML nested too deeply", fix) from None
    except ValueError as exc:  # a number past int()'s digit limit
        raise _refuse(what, path, f"is not valid TOML ({short(str(exc))})", fix) from None
    why = depth_problem(value, max_depth)
    if why:
        raise _refuse(what, path, f"is TOML {why}", fix)
    return value


def load(path: str | os.PathLike[str], *, what: str, fix: str, max_bytes: int = MAX_BYTES,
         max_depth: int = MAX_DEPTH) -> Any:
    """Read and parse ``path`` (TOML when it ends in ``.toml``, else JSON)."""
    data = read_bytes(path, what=what, fix=fix, max_bytes=max_bytes)
    if Path(os.fspath(path)).suffix.lower() == ".toml":
        return parse_toml(data, what=what, path=path, fix=fix, max_depth=max_depth)
    return parse_json(data, what=what, path=path, fix=fix, max_depth=max_depth)


def named_json(path: str | os.PathLike[str], *, flag: str, what: str, max_bytes: int,
               error: Callable[[str], Exception], unreadable: str,
               unparsable: str) -> tuple[str, Any]:
    """A JSON file a command's ``flag`` named (``--baseline``, ``--from``; empty for a bare
    argument), read and parsed within the bounds above, and where it was named (``FLAG PATH``,
    for the caller's later messages). A failure raises ``error`` of one line ``FLAG PATH: ...``,
    worded by ``unreadable`` (the file could not be read) or ``unparsable`` (not JSON), whose
    ``{problem}`` is the reader's problem and ``{bare}`` the same without a leading "is "."""
    shown = short(os.fspath(path), 200)[1:-1]
    where = f"{flag} {shown}" if flag else shown
    try:
        raw = read_bytes(path, what=what, fix="", max_bytes=max_bytes)
    except UntrustedFileError as exc:
        raise error(f"{where}: " + unreadable.format(problem=exc.problem)) from None
    try:
        return where, parse_json(raw, what=what, path=path, fix="")
    except UntrustedFileError as exc:
        raise error(f"{where}: " + unparsable.format(
            problem=exc.problem, bare=exc.problem.removeprefix("is "))) from None
