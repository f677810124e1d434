"""Driving the console in headless Chromium: the `s3skills console` process and a browser.

`ConsoleProcess` starts `python -m s3skills.cli ... console --port 0` (the real command, its
own process) and reads the address it prints. `browser()` launches Debian's chromium through
Playwright (`executable_path`, nothing downloaded), and `watch()` records every dialog a page
opens: a payload that runs shows up there or as a global it set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAYLOAD_GLOBALS = ("pwned", "pwned2", "pwned3", "pwned4", "pwned5", "pwned6", "pwned7")
SCREENSHOTS_ENV = "S3SKILLS_CONSOLE_SCREENSHOTS"
"""Set to a folder (docs/console) to keep the screenshots there."""


def need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")


class ConsoleProcess:
    """`s3skills <globals> console --port 0 --tokens FILE` in a process of its own."""

    def __init__(self, globals_: list[str], tokens: Path, env: dict[str, str], *extra: str) -> None:
        command = [sys.executable, "-m", "s3skills.cli", *globals_, "console", "--port", "0", "--tokens", str(tokens)]
        self.proc = subprocess.Popen(
            [*command, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.proc.wait(timeout=30)
            said = self.proc.stderr.read() if self.proc.stderr else ""  # before close() closes it
            self.close()
            raise AssertionError(f"the console did not start: {line}{said}")
        self.url = line.split("http://", 1)[1].split("/", 1)[0]
        self.url = f"http://{self.url}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def watch(page: Any) -> list[str]:
    """Every dialog `page` opens from now on (each is dismissed)."""
    seen: list[str] = []

    def on_dialog(dialog: Any) -> None:
        seen.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return seen


def payload_globals(page: Any) -> list[str]:
    """The payloads' globals the page has (none, unless a payload ran)."""
    found: list[str] = page.evaluate(f"() => {list(PAYLOAD_GLOBALS)!r}.filter((n) => n in window)")
    return found


def log_in(page: Any, url: str, token: str) -> None:
    page.goto(f"{url}/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def shoot(page: Any, folder: Path, name: str) -> None:
    """A full-page screenshot, into $S3SKILLS_CONSOLE_SCREENSHOTS when set, else `folder`."""
    where = Path(os.environ.get(SCREENSHOTS_ENV) or folder)
    where.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.screenshot(path=str(where / f"{name}.png"), full_page=False)
