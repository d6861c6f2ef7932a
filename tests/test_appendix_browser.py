"""A real browser reads the appendix: headless Chromium through the DevTools protocol.

Each page (``index.html`` and every notebook page) is opened from disk; the test
asserts that the page is not blank (text, height, screenshot pixel spread), that
every ``<img>`` decoded, that no request left the machine (only ``file:``/``data:``
URLs), and that the index's links lead to the pages in order. Screenshots are
kept next to the build in ``screenshots/``.

Skipped (with the reason) when Debian's ``chromium`` is not installed;
``scripts/setup.sh`` installs it when run as root.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed "
                                                          "(apt-get install chromium; scripts/setup.sh does it as root)")

websocket = pytest.importorskip("websocket", reason="websocket-client (a jupyter_server dependency) is missing")
Image = pytest.importorskip("PIL.Image")
ImageStat = pytest.importorskip("PIL.ImageStat")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--window-size=1280,1000", "--remote-debugging-port=0"]

PAGE_CHECK = """
(async () => {
  const imgs = Array.from(document.images);
  const decoded = await Promise.all(imgs.map(i => i.decode().then(() => i.naturalWidth > 0, () => false)));
  return {
    images: imgs.length,
    undecoded: imgs.filter((_, k) => !decoded[k]).map(i => (i.getAttribute('src') || '').slice(0, 60)),
    text: document.body ? document.body.innerText.trim().length : 0,
    math: document.querySelectorAll('math').length,
    firstImage: imgs.length ? (() => { const r = imgs[0].getBoundingClientRect();
      return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height}; })() : null,
    links: Array.from(document.querySelectorAll('a[href$=".html"]')).map(a => a.getAttribute('href')),
  };
})()
"""


class Chromium:
    """Minimal DevTools-protocol client (one page target, bounded waits)."""

    def __init__(self, profile: Path):
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = []
        while not targets and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = [t for t in json.load(r) if t.get("type") == "page"]
            time.sleep(0.1)
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        self.call("Page.enable")
        self.call("Network.enable")

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(method)

    def wait_event(self, name: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for k, ev in enumerate(self.events):
                if ev["method"] == name:
                    return self.events.pop(k)
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(name)

    def open(self, url: str) -> list[str]:
        """Navigate and wait for the load event; return the URLs the page requested."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"]["value"]

    def screenshot(self, path: Path, clip: dict | None = None) -> Path:
        params = {"format": "png"}
        if clip:
            params.update(clip=dict(clip, scale=1), captureBeyondViewport=True)
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def _ink(png: Path) -> float:
    """Fraction of pixels that differ clearly from the most common (background) grey level."""
    img = Image.open(io.BytesIO(png.read_bytes())).convert("L")
    hist = img.histogram()
    background = max(range(256), key=hist.__getitem__)
    if ImageStat.Stat(img).stddev[0] <= 5:
        return 0.0
    return sum(n for v, n in enumerate(hist) if abs(v - background) > 40) / (img.width * img.height)


def _check_build(browser: Chromium, build: Path, expected_pages: list[str]) -> dict[str, dict]:
    shots = build / "screenshots"
    shots.mkdir(exist_ok=True)
    seen: dict[str, dict] = {}
    for name in ["index.html", *expected_pages]:
        page = build / name
        assert page.exists(), name
        requested = browser.open(page.resolve().as_uri())
        remote = [u for u in requested if not u.startswith(("file:", "data:"))]
        assert not remote, f"{name} requested {remote[:3]} (the appendix must work offline)"
        info = browser.evaluate(PAGE_CHECK)
        assert info["text"] > 50, f"{name} looks blank: {info}"
        assert not info["undecoded"], f"{name}: images that did not decode: {info['undecoded']}"
        ink = _ink(browser.screenshot(shots / (Path(name).stem + ".png")))
        assert ink > 0.003, f"{name}: the screenshot is (nearly) uniform (ink fraction {ink:.4f})"
        box = info["firstImage"]
        if box and box["width"] >= 20 and box["height"] >= 20:  # the first figure, as drawn on the page
            ink = _ink(browser.screenshot(shots / (Path(name).stem + "_figure1.png"), clip=box))
            assert ink > 0.003, f"{name}: its first image is drawn blank"
        seen[name] = info
    return seen


def test_tiny_appendix_in_browser(browser, tiny_run):
    pages = ["01_plot.html", "02_params.html", "03_bad.html"]
    seen = _check_build(browser, tiny_run.build, pages)
    assert seen["index.html"]["links"][:3] == pages  # the index links the pages in order
    assert seen["01_plot.html"]["images"] >= 1  # the embedded figure decoded
    try:
        import latex2mathml  # noqa: F401
    except ImportError:
        return
    assert seen["01_plot.html"]["math"] >= 3  # MathML rendered natively, no MathJax


def test_project_appendix_in_browser(browser, quick_run):
    pages = [r.html.name for r in quick_run.runs if r.html is not None]
    assert pages, "the quick run rendered no page"
    seen = _check_build(browser, quick_run.out_dir, pages)
    linked = [h for h in seen["index.html"]["links"] if h in pages]
    assert linked == pages
    with_figures = [r.html.name for r in quick_run.runs if r.html is not None and r.figures]
    for name in with_figures:
        assert seen[name]["images"] >= 1, f"{name} wrote figures but shows no image"
