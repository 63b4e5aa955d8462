"""Browser-test helpers: the system chromium, and ``agui-pipes inspect`` in a subprocess.

Shared by the inspector's page tests and the CORS test; nothing is downloaded (the
tests drive Debian's chromium through Playwright's ``executable_path``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def find_chromium() -> str | None:
    """``AGUI_PIPES_CHROMIUM``, else the first chromium-like binary on PATH, else None."""
    explicit = os.environ.get("AGUI_PIPES_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Inspector:
    """``agui-pipes inspect`` in a subprocess; ``url`` is the page it printed."""

    def __init__(self, path: Path | None, *extra: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # Run from the file's folder so the page's label is the file name alone.
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agui_pipes",
                "inspect",
                *([] if path is None else [path.name]),
                "--no-open",
                "--port",
                "0",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT if path is None else path.parent,
        )
        found: list[str] = []
        seen: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                seen.append(line)
                urls = re.findall(r"https?://\S+", line)
                if urls:
                    found.append(urls[-1])  # the page's, last (a --target URL comes before)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(60)
        if not found:
            self.close()
            assert self.process.stderr is not None
            raise RuntimeError(
                f"agui-pipes inspect {path.name if path else ''} printed no URL within 60 s; "
                f"stdout {seen!r}, "
                f"stderr {self.process.stderr.read()!r}"
            )
        self.url = found[0]
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        # The URL may be printed just before the socket accepts connections.
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "api/runs", timeout=5) as response:
                    response.read()
                return
            except OSError as error:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(
                        f"the inspector at {self.url} never answered: {error}"
                    ) from error
                time.sleep(0.05)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
