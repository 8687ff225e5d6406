"""Safe files: bounded reads of regular files, strict JSON, atomic writes and a lock.

Every problem a user's file system can cause (a FIFO, a device, a directory, a huge file, a
missing directory, no permission, another process saving at the same time) ends as one
StorageError naming the file and what to do, never as a hang or a traceback.

Temporary files are named ``<name>.<random>.tmp`` next to their target, so one ignore
pattern (``*.tmp``) keeps them out of version control; a killed writer's leftovers are
removed by the next save under the lock (``remove_stale_temporaries``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.errors import StorageError

TEMPORARY_SUFFIX = ".tmp"
LOCK_SUFFIX = ".lock"
# Deeper JSON than this is no file of ours; json would raise RecursionError far deeper.
MAX_JSON_DEPTH = 64
# A folder of ours that git never takes (``git add .``), as pytest's cacheprovider writes
# into .pytest_cache.
IGNORE_ALL = "# Created by pytest-gpubench automatically.\n*\n"
# The JSON types that nest.
CONTAINERS = frozenset((dict, list))
# Plain data (extra_info) nested deeper than this is no annotation of a measurement.
MAX_PLAIN_DEPTH = 32


def read_text(path: Path, what: str, max_bytes: int) -> str | None:
    """The UTF-8 text of the regular file at ``path``, or None when there is no file.

    Checks the file before opening it, so a FIFO cannot block and a link to ``/dev/zero``
    cannot fill the memory; ``what`` names the file in errors ("baseline file")."""
    try:
        info = os.stat(path)  # follows links: the file a read would open
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise StorageError(
            f"cannot read {what} {path}: {_first_non_directory(path)} is a file, not a directory"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    _check_regular(path, what, info)
    if info.st_size > max_bytes:
        raise StorageError(
            f"{what} {path} is {info.st_size} bytes, over the limit of {max_bytes} bytes for a "
            f"{what}: it is not one; move it away"
        )
    try:
        # O_NONBLOCK: should a FIFO replace the file after the check, opening it cannot hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            _check_regular(path, what, os.fstat(handle.fileno()))
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise StorageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StorageError(f"{what} {path} grew past {max_bytes} bytes while it was read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{what} {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None


def parse_json(text: str, where: str) -> Any:
    """Strict JSON (no NaN or Infinity, no duplicate keys, bounded nesting); errors name
    ``where``. Unpaired surrogates are kept: undecodable bytes of a file name make them."""
    try:
        data = json.loads(text, parse_constant=_refuse, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise StorageError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:
        raise StorageError(f"{where} is not valid JSON ({exc})") from None
    except RecursionError:
        raise StorageError(f"{where} is nested too deeply to be read as JSON") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise StorageError(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two values for one key: the reader would keep one and drop the other unsaid.
    found = dict(pairs)
    if len(found) < len(pairs):
        keys: set[str] = set()
        for key, _ in pairs:
            if key in keys:
                raise ValueError(f"the key {key[:80]!r} appears twice in one object")
            keys.add(key)
    return found


def _depth(value: Any) -> int:
    """Nesting depth, level by level (the data may be deep), counted up to one past
    MAX_JSON_DEPTH: deeper is refused anyway."""
    depth, level = 0, [value]
    while level and depth <= MAX_JSON_DEPTH:
        depth += 1
        nested: list[Any] = []
        for item in level:
            if type(item) in CONTAINERS:
                children = item.values() if type(item) is dict else item
                nested.extend(c for c in children if type(c) in CONTAINERS)
        level = nested
    return depth


def plain_data_problem(value: Any, where: str, depth: int = 0) -> str:
    """'' if ``value`` is plain JSON data (a string, a finite number, a bool, None, and lists,
    tuples and string-keyed dicts of those), else one line naming where it is not."""
    if value is None or isinstance(value, str | bool | int):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{where} is {value!r}, not a finite number"
    if depth >= MAX_PLAIN_DEPTH:
        return f"{where} is nested deeper than {MAX_PLAIN_DEPTH} levels"
    if isinstance(value, list | tuple):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"{where} has the key {_repr(key)}, not a string"
        items = [(f"{where}[{key!r:.60}]", item) for key, item in value.items()]
    else:
        return (
            f"{where} is of type {type(value).__name__}, not a string, finite number, bool, "
            "None, list or dict"
        )
    for place, item in items:
        problem = plain_data_problem(item, place, depth + 1)
        if problem:
            return problem
    return ""


def _repr(value: Any) -> str:
    """A short repr that cannot raise (a user's object may have a broken __repr__)."""
    try:
        return f"{value!r:.60}"
    except Exception:
        return f"<{type(value).__name__}>"


def _check_dangling(path: Path, what: str) -> None:
    """Refuse a link whose target does not exist: writing it, or its lock, would create a
    file (and the lock library its directories) wherever the link points."""
    if os.path.islink(path) and not os.path.exists(path):
        raise StorageError(
            f"cannot write {what} {path}: it is a link to {os.readlink(path)}, which does not "
            "exist; remove the link or create its target"
        )


def check_target(path: Path, what: str) -> None:
    """Refuse a path that ``write_atomic`` could not write: a directory, something that is not
    a regular file, a link to nothing, or a file in a directory that does not exist."""
    _check_dangling(path, what)
    target = Path(os.path.realpath(path))  # writing through a link writes its target
    try:
        info = os.stat(target)
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise StorageError(
                f"cannot write {what} {path}: directory {target.parent} does not exist; "
                "create it or choose another path"
            ) from None
        return
    except OSError as exc:
        raise StorageError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StorageError(f"cannot write {what} {path}: it is a directory; name a file in it")
    _check_regular(path, what, info)


def gitignore(directory: Path, text: str = IGNORE_ALL) -> None:
    """Give a folder of ours a ``.gitignore`` of ``text`` (everything by default) unless it
    has one. A convenience: failing to write it fails nothing."""
    ignore = directory / ".gitignore"
    with contextlib.suppress(OSError, StorageError):
        if not os.path.lexists(ignore):
            write_atomic(ignore, text, "ignore file")


def write_atomic(path: Path, text: str, what: str) -> None:
    """Replace the file at ``path`` by ``text`` all at once: a temporary file in the same
    directory, flushed to disk, then renamed over it. Readers see the old or the new file,
    never a part. A link stays a link: its target is replaced. Missing directories are not
    created (the caller creates the ones it owns)."""
    check_target(path, what)
    target = Path(os.path.realpath(path))
    temporary = ""
    try:
        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f"{target.name}.", suffix=TEMPORARY_SUFFIX
        )
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from others
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        raise StorageError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        if temporary:
            Path(temporary).unlink(missing_ok=True)  # gone after the rename; else ours to remove


def ends_a_line(path: Path) -> bool:
    """Whether the file at ``path`` is empty or ends with a newline; true as well where it
    cannot be read (absent, or writable only): nothing to end then, or nothing to know."""
    try:
        with open(path, "rb") as handle:
            if handle.seek(0, os.SEEK_END) == 0:
                return True
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return True


def append_text(path: Path, text: str, what: str) -> None:
    """Append ``text`` to a file others append to as well (a CI job's summary), on a line
    of its own: after a newline where the file ends without one (an earlier step's last
    line would otherwise run into our first)."""
    check_target(path, what)
    if not ends_a_line(path):
        text = "\n" + text
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise StorageError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def make_directory(directory: Path, what: str, remedy: str) -> None:
    """Create ``directory`` (and its parents) unless it exists; one line if it cannot be."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create {what} {directory}: {exc.strerror or exc}; {remedy}"
        ) from None


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files ``write_atomic`` made for ``path`` that killed writers left
    (the current pattern, and the hidden ``.<name>.*.tmp`` of version 0.1.0). Call it under
    ``lock(path)``: then no live writer of ``path`` has one."""
    target = Path(os.path.realpath(path))
    for pattern in (f"{target.name}.*", f".{target.name}.*"):
        for leftover in target.parent.glob(pattern + TEMPORARY_SUFFIX):
            with contextlib.suppress(OSError):
                leftover.unlink()


def lock_path(path: Path) -> Path:
    """The lock file of ``path``: next to the file a write replaces."""
    target = Path(os.path.realpath(path))
    return target.with_name(target.name + LOCK_SUFFIX)


@contextlib.contextmanager
def lock(path: Path, what: str, timeout_s: float) -> Iterator[None]:
    """Hold the inter-process lock of ``path`` (a lock file next to it) while the block runs."""
    import filelock  # only a save needs it

    _check_dangling(path, what)
    lock_file = lock_path(path)
    try:
        held = filelock.FileLock(lock_file, timeout=timeout_s)
        held.acquire()
    except filelock.Timeout:
        raise StorageError(
            f"cannot lock {what} {path}: another process has held {lock_file} for over "
            f"{timeout_s:g} s; let the other run finish, then re-run"
        ) from None
    except OSError as exc:
        raise StorageError(
            f"cannot write {what} {path}: cannot create its lock file {lock_file}: "
            f"{exc.strerror or exc}"
        ) from None
    try:
        yield
    finally:
        held.release()


def _check_regular(path: Path, what: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise StorageError(
            f"{what} {path} is {_kind(info.st_mode)}, not a regular file; "
            "move it away or choose another path"
        )


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _first_non_directory(path: Path) -> Path:
    """The ancestor of ``path`` that exists but is not a directory."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
