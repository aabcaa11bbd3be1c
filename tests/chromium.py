"""Headless Chromium (Debian's package) as the reader of `crawler report`: where each figure lands on the
page, and a screenshot of it. Every launch is bounded in time and kept off the network: a fresh profile,
background networking, reporting and media-device discovery off, every host name unresolvable and every
HTTP request sent to a closed loopback port, so even a report that tried to load something could not
reach past 127.0.0.1.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium")
WIDTH = 1280
LAUNCH_TIMEOUT_S = 90
_PROBE = ("<script>addEventListener('load', () => { document.body.dataset.layout = JSON.stringify({"
          "height: document.documentElement.scrollHeight, images: [...document.images].map(i => {"
          "const r = i.getBoundingClientRect(); return {alt: i.alt, left: r.left + scrollX, top: r.top + scrollY,"
          " width: r.width, height: r.height, natural_width: i.naturalWidth}; })}); });</script>")


def _run(profile: Path, page: Path, height: int, *mode: str) -> str:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--window-size={WIDTH},{height}", f"--user-data-dir={profile}",
               "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
               "--disable-sync", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
               "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--no-pings",
               "--disable-features=MediaRouter,DialMediaRouteProvider,OptimizationHints,Translate",  # no LAN discovery
               "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
               "--virtual-time-budget=5000", *mode, page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def layout(html_file: Path, workdir: Path) -> dict:
    """The page's height and each image's box (CSS pixels) and decoded width, from a copy of the page with
    a script that records them once it has loaded (the page itself is left as written)."""
    probe = workdir / "probe.html"
    probe.write_text(html_file.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _run(workdir / "profile", probe, 800, "--dump-dom")
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(html_file: Path, png_file: Path, height: int, workdir: Path) -> None:
    """The whole page (a window as tall as the page) as a PNG."""
    _run(workdir / "profile", html_file, height, f"--screenshot={png_file}")
