"""Fixtures of the console tests: a real cluster, console processes on free ports, and a
headless Chromium driven by Selenium (skipped, with the reason, when it is not installed).

A failed browser test saves a screenshot and the page's HTML under
``$STROM_SCREENSHOT_DIR`` (default: the pytest temporary directory) and prints where.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import LocalCluster, cluster
from strom_testkit import free_port, wait_until

__all__ = [
    "ConsoleProcess",
    "Consoles",
    "HttpSession",
    "browser",
    "cluster",
    "console",
    "consoles",
    "start_console",
]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


@dataclass
class ConsoleProcess:
    url: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    health: str = "/healthz"

    def wait_ready(self) -> None:
        try:
            wait_until(
                lambda: _healthy(self.url + self.health) or self.popen.poll() is not None,
                timeout_s=60,
                what=f"{self.url} to answer",
            )
            if self.popen.poll() is not None:
                raise AssertionError(f"the process exited: {self.log_path.read_text()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def launch(module: str, log_dir: Path, *flags: str, health: str = "/healthz") -> ConsoleProcess:
    """Start ``python -m module --listen 127.0.0.1:PORT flags...`` on a free port (an HTTP
    service answering 200 on ``health`` once ready); ``wait_ready`` waits for it."""
    port = free_port()
    log_path = log_dir / f"{module}-{port}.log"
    argv = [sys.executable, "-m", module, "--listen", f"127.0.0.1:{port}", *flags]
    with log_path.open("wb") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    return ConsoleProcess(f"http://127.0.0.1:{port}", popen, log_path, health)


def launch_console(cluster: LocalCluster, log_dir: Path, *flags: str) -> ConsoleProcess:
    return launch(
        "strom_console", log_dir,
        "--bootstrap-servers", cluster.gateway,
        "--sample-interval-s", "0.5",
        "--metadata-cache-s", "0",
        "--log-format", "console",
        *flags,
    )  # fmt: skip


def start_console(cluster: LocalCluster, log_dir: Path, *flags: str) -> ConsoleProcess:
    """A console process for ``cluster`` on a free port, started and healthy."""
    process = launch_console(cluster, log_dir, *flags)
    process.wait_ready()
    return process


@dataclass
class Consoles:
    """The module's processes: the schema registry, a console that knows it, a read-only
    console and one that needs a login (user ``ops``, password ``s3cret``)."""

    registry: ConsoleProcess
    main: ConsoleProcess
    read_only: ConsoleProcess
    login: ConsoleProcess


@pytest.fixture(scope="module")
def consoles(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Consoles]:
    """Started together (each takes seconds to import and bind), stopped even on failure."""
    logs = tmp_path_factory.mktemp("console")
    secret = logs / "password"
    secret.write_text("s3cret\n")
    started: list[ConsoleProcess] = []
    try:
        registry = launch(
            "strom_registry", logs,
            "--bootstrap-servers", cluster.gateway,
            "--etcd-endpoints", cluster.spec.etcd_endpoint.removeprefix("http://"),
            health="/",
        )  # fmt: skip
        started.append(registry)
        main = launch_console(cluster, logs, "--schema-registry-url", registry.url)
        started.append(main)
        read_only = launch_console(cluster, logs, "--read-only")
        started.append(read_only)
        login = launch_console(cluster, logs, "--user", "ops", "--password-file", str(secret))
        started.append(login)
        for process in started:
            process.wait_ready()
        yield Consoles(registry, main, read_only, login)
    finally:
        for process in started:
            process.stop()


@pytest.fixture(scope="module")
def console(consoles: Consoles) -> ConsoleProcess:
    return consoles.main


class HttpSession:
    """A cookie-keeping HTTP client that reads the CSRF token off a page, as a browser would
    (used to forge requests the UI would not send)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()
        )
        self.token = ""

    def get(self, path: str) -> tuple[int, str]:
        status, body = self._open(urllib.request.Request(self.base + path))
        found = re.search(r'name="csrf-token" content="([^"]+)"', body)
        if found:
            self.token = found.group(1)
        return status, body

    def post(self, path: str, fields: dict[str, str], *, token: bool = True) -> tuple[int, str]:
        data = dict(fields)
        if token:
            data["csrf_token"] = self.token
        request = urllib.request.Request(
            self.base + path,
            data=urllib.parse.urlencode(data).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            method="POST",
        )
        return self._open(request)

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


def _chromium() -> tuple[str, str] | None:
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if browser_path and driver_path:
        return browser_path, driver_path
    return None


@dataclass
class Browser:
    driver: Any
    screenshots: Path
    taken: list[Path] = field(default_factory=list)

    def snap(self, name: str) -> Path:
        self.screenshots.mkdir(parents=True, exist_ok=True)
        path = self.screenshots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        (self.screenshots / f"{name}.html").write_text(self.driver.page_source)
        self.taken.append(path)
        return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="module")
def _driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    found = _chromium()
    if found is None:
        pytest.skip(
            "chromium and chromedriver are not installed (Debian: apt-get install chromium "
            "chromium-driver; .ci/run installs them)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (make test installs it)")
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download drivers
    options = Options()
    options.binary_location = found[0]
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path_factory.getbasetemp())
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=found[1]), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(
    _driver: Any, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browser]:
    where = Path(
        os.environ.get("STROM_SCREENSHOT_DIR") or tmp_path_factory.getbasetemp() / "screenshots"
    )
    session = Browser(_driver, where)
    yield session
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        path = session.snap(request.node.name)
        print(f"\nscreenshot of the failed page: {path} (HTML beside it)")


def text_of(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def eventually(condition: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    """Poll a condition that may raise while the page changes (stale or missing elements)."""

    def attempt() -> Any:
        try:
            return condition()
        except Exception:  # the element is being replaced by a live refresh: try again
            return None

    return wait_until(attempt, timeout_s=timeout_s, what=what, interval_s=0.2)
