"""Real file-system faults for the SQLite tests: a size-limited tmpfs, a frozen ext4 loop device.

Each context manager mounts under a fresh temporary directory and always
unmounts (and thaws) on the way out. Where the machine forbids it (not root,
no loop devices, no fsfreeze), the test is skipped with the specific reason:
never silently passed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"SKIPPED LOUDLY: {tool!r} is not installed; this fault cannot be made")
    if os.geteuid() != 0:
        pytest.skip(f"SKIPPED LOUDLY: mounting file systems needs root (running as {os.geteuid()})")


def _unmount(directory: Path) -> None:
    result = _run("umount", str(directory))
    if result.returncode != 0:
        _run("umount", "-l", str(directory))


@contextmanager
def small_tmpfs(size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` bytes (``mount -t tmpfs -o size=...``), empty, yielded as a directory."""
    _need("mount")
    directory = Path(tempfile.mkdtemp(prefix="agui-tmpfs-"))
    result = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    if result.returncode != 0:
        directory.rmdir()
        pytest.skip(f"SKIPPED LOUDLY: cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield directory
    finally:
        _unmount(directory)
        directory.rmdir()


def remount(directory: Path, mode: str) -> str | None:
    """Remount ``directory``'s file system ``ro`` or ``rw``: None, or why it was refused."""
    result = _run("mount", "-o", f"remount,{mode}", str(directory))
    return None if result.returncode == 0 else result.stderr.strip()


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; the filler file's path."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        block = b"\0" * 4096
        while True:
            os.write(fd, block)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


class FrozenDisk:
    """An ext4 file system on a loop device, to freeze and thaw (``fsfreeze``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.frozen = False

    def freeze(self) -> None:
        result = _run("fsfreeze", "--freeze", str(self.directory))
        if result.returncode != 0:
            pytest.skip(f"SKIPPED LOUDLY: fsfreeze is refused here: {result.stderr.strip()}")
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            _run("fsfreeze", "--unfreeze", str(self.directory))
            self.frozen = False


@contextmanager
def loop_ext4(size_mb: int = 16) -> Iterator[FrozenDisk]:
    """An empty ext4 file system on a loop device (an image in /tmp), thawed and unmounted after."""
    for tool in ("mkfs.ext4", "fsfreeze", "mount"):
        _need(tool)
    work = Path(tempfile.mkdtemp(prefix="agui-loop-"))
    image, directory = work / "disk.img", work / "mnt"
    directory.mkdir()
    with image.open("wb") as file:
        file.truncate(size_mb * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        shutil.rmtree(work)
        pytest.skip(f"SKIPPED LOUDLY: mkfs.ext4 failed: {made.stderr.strip()}")
    mounted = _run("mount", "-o", "loop", str(image), str(directory))
    if mounted.returncode != 0:
        shutil.rmtree(work)
        pytest.skip(f"SKIPPED LOUDLY: cannot mount a loop device here: {mounted.stderr.strip()}")
    disk = FrozenDisk(directory)
    try:
        yield disk
    finally:
        disk.thaw()  # always: a frozen mount would hang everything that touches it
        _unmount(directory)
        shutil.rmtree(work, ignore_errors=True)
