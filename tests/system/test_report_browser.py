"""The confidential report in a real browser: headless Chromium (Debian's ``chromium``)
loads the page, every image decodes, nothing reaches the console; a screenshot is kept
for a person to look at (its path is printed; a copy goes to /tmp/das_report.png)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from das.confidential.page import report_page
from tests.unit.confidential.report_examples import demo_run, metrics

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no `chromium` on PATH: install Debian's chromium package (.ci/run does)",
)
SCREENSHOT_COPY = Path("/tmp/das_report.png")

#: Put in a test copy of the page: after load, the title says how many images there are,
#: how many failed to decode (naturalWidth 0) and how many load or script errors were seen.
PROBE = """<script>
var failures = 0;
window.addEventListener("error", function () { failures += 1; }, true);
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var broken = images.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  document.title = "loaded images=" + images.length + " broken=" + broken.length +
    " errors=" + failures;
});
</script>"""


def _chromium(profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(CHROMIUM),
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox will not start
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def _load(page: Path, profile: Path) -> tuple[str, list[str]]:
    """The probe's verdict on ``page`` (its title once loaded) and the console's messages."""
    probed = page.with_name(f"probed_{page.name}")
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", f"<head>{PROBE}", 1))
    done = _chromium(profile, "--dump-dom", probed.as_uri())
    title = re.search(r"<title>(.*?)</title>", done.stdout, re.DOTALL)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return (title.group(1) if title else ""), console


def _write_page(directory: Path) -> Path:
    page = directory / "report.html"
    page.write_text(report_page(metrics(), demo_run()), encoding="utf-8")
    return page


def test_page_loads_every_image_and_logs_nothing(tmp_path):
    title, console = _load(_write_page(tmp_path), tmp_path / "profile")
    assert title == "loaded images=2 broken=0 errors=0"
    assert console == []  # the page has no script: any console line is an error


def test_page_with_the_audit_section_loads_its_figure_too(tmp_path):
    from tests.unit.confidential.audit.examples import example_audit

    page = tmp_path / "report.html"
    page.write_text(report_page(metrics(), demo_run(), example_audit()), encoding="utf-8")
    title, console = _load(page, tmp_path / "profile")
    assert title == "loaded images=3 broken=0 errors=0"
    assert console == []


def test_probe_sees_a_broken_image_and_a_console_error(tmp_path):
    """The check above can fail: a broken image and a script error are both caught."""
    page = _write_page(tmp_path)
    bad = page.read_text(encoding="utf-8").replace(
        "</body>", '<img src="missing.png" alt="x"><script>console.error("boom")</script></body>'
    )
    page.write_text(bad, encoding="utf-8")
    title, console = _load(page, tmp_path / "profile")
    assert title == "loaded images=3 broken=1 errors=1"
    assert any('"boom"' in line for line in console)


def test_screenshot_shows_the_page(tmp_path):
    from PIL import Image

    page = _write_page(tmp_path)
    shot = tmp_path / "report.png"
    _chromium(
        tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()
    )
    with Image.open(shot) as image:
        assert image.size == (1200, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50  # text, tables and figures, not a blank page
    shutil.copyfile(shot, SCREENSHOT_COPY)
    print(f"screenshot of the report: {shot} (copy: {SCREENSHOT_COPY})")
