"""Open a data file the user named, and say what it is when it is not a readable UTF-8 file.

``Path.is_file()`` answers False for a folder, a FIFO, a symlink loop and a 300-character name alike, and
"no such file" then misleads; here each is named as what it is. A FIFO is never opened (that would block
until a writer comes), so the kind of file is decided from ``stat`` first. A UTF-16 file (Windows
"Unicode") is one problem, not one per line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import MAX_LINES_BYTES, UnreadableFile, file_kind, read_bounded


def check_data_file(path: str | Path, flag: str) -> Path:
    """``path`` if it is a regular file; else a :class:`UserError` naming what it is and the fix."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserError(f"{flag}: {_stat_problem(path, exc)}") from None
    except ValueError:  # an embedded NUL byte
        raise UserError(f"{flag}: {str(path)!r} is not a valid path (it holds a NUL character)") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(
            f"{flag}: {str(path)!r} is a folder, not a file; give the path of a .jsonl file in it"
        )
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        raise UserError(f"{flag}: {str(path)!r} is {kind}; write the data to a regular .jsonl file")
    return path


def _stat_problem(path: Path, exc: OSError) -> str:
    name = repr(str(path))
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(part.encode("utf-8")) for part in path.parts), default=0)
        return (
            f"file name too long ({longest} bytes in one name; the file system allows 255): {name[:80]}…; "
            "rename the file"
        )
    if exc.errno == errno.ELOOP:
        return f"{name} is a symlink loop (it points back to itself); point at the real file"
    if exc.errno == errno.ENOENT and path.is_symlink():
        return f"{name} is a symlink to a missing file ({os.readlink(path)!r}); fix the link or give the file"
    if exc.errno == errno.ENOENT:
        return f"no such file {name}; give the path of a .jsonl file"
    if exc.errno == errno.ENOTDIR:
        return f"{name}: a part of the path is a file, not a folder; check the path"
    if exc.errno == errno.EACCES:
        return f"{name}: permission denied; make the file readable"
    return f"{name}: cannot read it ({exc.strerror}); give the path of a readable .jsonl file"


def read_data_bytes(path: Path, flag: str) -> bytes:
    """The file's bytes, within :data:`MAX_LINES_BYTES` (a sparse file's size is not its content); refuses
    UTF-16/32 (byte-order mark or NUL bytes) in one line."""
    try:
        data = read_bounded(path, MAX_LINES_BYTES, "a data file (split it, or sample it)")
    except OSError as exc:
        raise UserError(f"{flag}: {_stat_problem(path, exc)}") from None
    except UnreadableFile as exc:
        raise UserError(f"{flag}: {exc}") from None
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        looks = "looks like UTF-16" if _utf16_like(head) else "holds NUL bytes: binary?"
        raise UserError(f"{path}:1: encoding: not UTF-8 ({looks}); re-save the file as UTF-8")
    return data


def _utf16_like(head: bytes) -> bool:
    """A BOM, or NULs in every other byte (ASCII text as UTF-16 without a BOM)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    even, odd = head[0::2].count(0), head[1::2].count(0)
    return max(even, odd) >= len(head) // 4
