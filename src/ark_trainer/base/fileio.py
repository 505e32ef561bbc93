"""Small file helpers: atomic writes (temp file in the same folder, fsync, rename) and JSON(L).

JSON Lines are split at ``"\n"`` only (:func:`jsonl_lines`). ``str.splitlines`` also breaks at U+2028,
U+2029, U+0085, ``\r``, ``\v``, ``\f`` and ``\x1c``-``\x1e``; the first three are legal raw inside a JSON
string, so one such character in a recorded turn cut the line in two and hid every line after it.
Writers (:func:`json_line`) escape those three, and lone surrogates (which UTF-8 cannot encode), so a
reader with any line splitter sees one record per line.

Every file the tool reads goes through :func:`read_bounded` (or the readers built on it): it opens the path
without blocking (a FIFO would wait for a writer), refuses anything but a regular file (``/dev/zero`` grows
without end; its ``st_size`` says 0) and reads at most a byte bound, counted while reading, not trusted from
``st_size``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError

MAX_JSON_BYTES = 64 * 1024 * 1024  # a record, config or state file the tool reads: far below this
MAX_LINES_BYTES = 1 << 30  # a JSON Lines file (data, events): more is split, sampled or rotated first
_CHUNK = 1 << 20
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class UnreadableFile(UserError, ValueError):
    """A path that is not a regular file, or a file over its byte bound (one line naming it and the fix).

    A ValueError too, so the tolerant readers (which read a broken file as absent) take it as they take bad
    JSON."""


def file_kind(mode: int) -> str:
    """What ``stat``'s mode says a path is, in words (``a named pipe (FIFO)``)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_bounded(path: str | Path, limit: int = MAX_JSON_BYTES, what: str = "this file") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; :class:`UnreadableFile` otherwise.

    ``what`` names the file in the refusal (``an MCP server file is at most N bytes``). OSError (missing,
    no permission) is the caller's to word."""
    p = Path(path)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{p}: {file_kind(st.st_mode)}, not a regular file; give the path of a file")
        too_big = f"{what} is at most {limit} bytes here; give a smaller file"
        if st.st_size > limit:
            raise UnreadableFile(f"{p}: {st.st_size} bytes; {too_big}")
        chunks, total = [], 0
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while read
                raise UnreadableFile(f"{p}: over {limit} bytes; {too_big}")
        return b"".join(chunks)
    except MemoryError:
        raise UnreadableFile(f"{p}: too large to read into memory; give a smaller file") from None
    finally:
        os.close(fd)


def read_text_bounded(
    path: str | Path, limit: int = MAX_JSON_BYTES, what: str = "this file", errors: str = "strict"
) -> str:
    """:func:`read_bounded` decoded as UTF-8 (``UnicodeDecodeError`` under ``errors="strict"``)."""
    return read_bounded(path, limit, what).decode("utf-8", errors)


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644, follow_links: bool = False) -> None:
    """Write ``data`` so that readers see the old file or the new one, never half of it.

    ``mode`` is the new file's permission bits (run files are meant to be read by others; a config that
    holds secrets keeps its own, e.g. 0o600). ``follow_links``: when ``path`` is a symlink, its target is
    replaced and the link stays (a user's ``~/.openclaw/openclaw.json`` linked from a dotfiles folder).
    """
    path = Path(os.path.realpath(path)) if follow_links and Path(path).is_symlink() else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644, follow_links: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, follow_links)


def write_json(path: str | Path, data: Any, mode: int = 0o644) -> None:
    """Atomic JSON; ``mode=0o600`` for a file that holds a secret (an API key, a copy of a config)."""
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n", mode)


def read_json(path: str | Path, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON file's value; a file that is not regular or is over ``limit`` bytes is :class:`UnreadableFile`."""
    return json.loads(read_text_bounded(path, limit, "a JSON file"))


# Characters json.dumps(ensure_ascii=False) leaves raw that some line splitters break at (U+2028, U+2029,
# NEL), and lone surrogates, which cannot be encoded as UTF-8: written as \uXXXX escapes instead.
_UNSAFE_IN_LINE = re.compile("[\u2028\u2029\x85\ud800-\udfff]")


def json_line(value: Any, **dumps_kwargs: Any) -> str:
    """``value`` as one JSON Lines record (ending in ``"\n"``) that every line splitter reads as one line."""
    text = json.dumps(value, ensure_ascii=False, **dumps_kwargs)
    return _UNSAFE_IN_LINE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: split at ``"\n"`` only, a ``"\r"`` before it dropped (CRLF files);
    a last line without ``"\n"`` is included."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def jsonl_file_lines(path: str | Path, errors: str = "strict") -> list[str]:
    """:func:`jsonl_lines` of a file, decoded from bytes (``read_text`` would turn a lone ``"\r"`` into a
    line break: universal newlines), within :data:`MAX_LINES_BYTES`."""
    return jsonl_lines(read_text_bounded(path, MAX_LINES_BYTES, "a JSON Lines file", errors))


def jsonl_byte_lines(data: bytes) -> list[bytes]:
    """:func:`jsonl_lines` for bytes (``bytes.splitlines`` also breaks at a lone ``"\r"``)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json_line(r) for r in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    lines = jsonl_file_lines(path)
    return [json.loads(line) for line in lines if line.strip()]


def yaml_error(path: str | Path, exc: Exception) -> str:
    """``path:line: not valid YAML (problem)`` for a ``yaml.YAMLError``: the one wording for every YAML file."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"{path}:{mark.line + 1 if mark else 1}: not valid YAML ({problem})"


def staged_path(path: str | Path) -> Path:
    """Where the next version of ``path`` is written before :func:`replace_together` puts it in place."""
    path = Path(path)
    return path.parent / f".{path.name}.new.partial"


def replace_together(paths: list[Path]) -> None:
    """Put the staged version (:func:`staged_path`) of each of ``paths`` in place, all or none.

    Each file was written in full beside its destination first, so only renames are left, which need no
    disk space. A rename that still fails puts back every destination replaced so far (each old file is
    kept under ``.NAME.old.partial`` until all are in place), and removes the staged files.
    """
    done: list[tuple[Path, Path | None]] = []
    try:
        for path in paths:
            old = path.parent / f".{path.name}.old.partial"
            kept = None
            if path.exists() or path.is_symlink():
                os.replace(path, old)
                kept = old
            done.append((path, kept))
            os.replace(staged_path(path), path)
    except BaseException:
        for path, kept in reversed(done):
            if kept is not None:
                os.replace(kept, path)
            else:
                path.unlink(missing_ok=True)
        for path in paths:
            staged_path(path).unlink(missing_ok=True)
        raise
    for _, kept in done:
        if kept is not None:
            kept.unlink(missing_ok=True)
