"""A sweep writes and deletes only real files and folders inside its own folder, never through a
symbolic link, and never appends to or rewrites a file that has a second name (a hard link).

A sweep folder may come from someone else (a shared filesystem, an archive). A link planted in it
(``runs/`` -> a folder of yours, ``attempts.jsonl`` -> a file of yours) would make a resumed
sweep empty or write into what it points to. So:

- :func:`refuse_links` walks the sweep folder before a sweep runs and refuses any link in it
  (the folder itself included) and any file with more than one name, in one line naming it;
- :func:`open_no_follow` opens the files a sweep appends to or rewrites with ``O_NOFOLLOW`` and
  checks the opened file has one name, so a link planted while the sweep runs is refused as well;
- :func:`remove_inside` deletes only paths whose folder resolves inside the sweep folder.

Hand-written because the standard library has no "open below this folder without following
links" (Linux's ``openat2(RESOLVE_BENEATH)`` is not in :mod:`os`), and ``filelock`` opens its lock
file following links.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from grok_lightning.config import ConfigError

__all__ = ["hard_link_error", "is_inside", "link_error", "open_no_follow", "refuse_links", "remove_inside",
           "special_file_error"]


def link_error(path: str | os.PathLike) -> ConfigError:
    return ConfigError(f"{path}: a symbolic link; a sweep reads and writes only real files and folders inside its "
                       "own folder (put the real file or folder there)")


def hard_link_error(path: str | os.PathLike, names: int) -> ConfigError:
    # a hard link is the same file under another name, possibly outside the sweep: writing to it
    # writes there (files the sweep replaces by renaming are safe, appends and rewrites are not)
    return ConfigError(f"{path}: a hard link ({names} names for one file); a sweep writes only files of its own "
                       "(copy the file instead of linking it)")


def special_file_error(path: str | os.PathLike) -> ConfigError:
    return ConfigError(f"{path}: not a regular file (a FIFO, socket or device); a sweep reads and writes only regular "
                       "files and folders (remove it)")


def refuse_links(root: str | os.PathLike) -> None:
    """One ``ConfigError`` line naming the first symbolic link at ``root`` or below it (``root``
    as given: a link there is refused too; the folders above it are the user's own), or the first
    file there with a second name."""
    root = Path(root)
    if root.is_symlink():
        raise link_error(root)
    if not root.is_dir():
        return
    folders = [root]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_symlink():
                    raise link_error(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                elif not entry.is_file(follow_symlinks=False):  # a FIFO would block whoever opens it
                    raise special_file_error(entry.path)
                elif (names := entry.stat(follow_symlinks=False).st_nlink) > 1:
                    raise hard_link_error(entry.path, names)


def open_no_follow(path: str | os.PathLike, mode: str = "a"):
    """``open(path, mode)`` for writing (``"a"`` appends, ``"w"`` rewrites) that refuses a symbolic
    link at ``path``, or a file with a second name, in one line instead of writing into it."""
    if mode not in ("a", "w"):
        raise ValueError(f"mode {mode!r}: 'a' or 'w'")
    # no O_TRUNC: a file with a second name must be refused before anything of it is cut; no
    # blocking: opening a FIFO for writing would wait for a reader forever
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP or Path(path).is_symlink():
            raise link_error(path) from None
        if err.errno == errno.ENXIO:  # a FIFO without a reader
            raise special_file_error(path) from None
        raise
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise special_file_error(path)
    if status.st_nlink > 1:
        os.close(fd)
        raise hard_link_error(path, status.st_nlink)
    os.set_blocking(fd, True)
    if mode == "w":
        os.ftruncate(fd, 0)
    return os.fdopen(fd, mode)


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` (relative paths from the working directory, as Lightning resolves them)
    resolves to ``root`` or below it, every link on the way followed.

    >>> is_inside("/tmp/s/runs/a", "/tmp/s/runs/a/checkpoints"), is_inside("/tmp/s/runs/a", "/tmp/s/runs/a/../b")
    (True, False)
    """
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return real == real_root or os.path.commonpath([real_root, real]) == real_root


def remove_inside(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """Delete ``path`` (a file, a folder with what is in it, or a link itself, never what a link
    points to) when its folder resolves inside ``root``; a ``ConfigError`` line otherwise."""
    path = Path(path)
    real_root = os.path.realpath(root)
    parent = os.path.realpath(path.parent)
    if parent != real_root and os.path.commonpath([real_root, parent]) != real_root:
        raise ConfigError(f"{path}: resolves outside {root}; refusing to delete it")
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)  # the fd-based rmtree: links inside are removed, not followed
