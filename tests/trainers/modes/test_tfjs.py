"""--export_format=tfjs: the page in headless Chromium draws what the SavedModel draws.

One dcgan and one cgan export (tiny synthetic runs), each served from 127.0.0.1 with every
other host unresolvable; the browser is driven over the DevTools protocol on a pipe.
"""

import dataclasses
import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.synthetic_run import write_run
from trainers.config.fields import ConfigError
from trainers.modes import export, tfjs
from trainers.setups import draws

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (make chromium)")


def _above_4(fd):
    """`fd` moved to a number above 4, so the child's dup2 onto 3 and 4 cannot clobber it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    """Headless Chromium with --remote-debugging-pipe: commands on fd 3, replies on fd 4
    (set in the child after fork; close_fds would close them again, so it is off)."""

    def __init__(self, url, profile):
        to_browser_r, self._write = (_above_4(fd) for fd in os.pipe())
        self._read, from_browser_w = (_above_4(fd) for fd in os.pipe())
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             url],
            close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]

    def call(self, method, session=None, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._read, 1 << 20)
                assert chunk, "chromium closed the pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", self.session, expression=expression,
                           awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def close(self):
        self.process.kill()
        self.process.wait()


PIXELS = """(async () => {{
  await window.rendering;
  const canvas = {canvas};
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  return Array.from(data.filter((_, i) => i % 4 === 0));
}})()"""
GRID_IMAGE = PIXELS.format(canvas='document.querySelector("#grid canvas")')
CURRENT_IMAGE = PIXELS.format(canvas='document.getElementById("current")')


def _serve(directory):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module", params=["dcgan", "cgan"])
def page(request, tmp_path_factory):
    """An export opened in the browser, with the page loaded: (browser, version dir, run)."""
    root = tmp_path_factory.mktemp(request.param)
    run = write_run(root / "run", gan=request.param, distinct_classes=True)
    result = export.export(dataclasses.replace(run.config, export_format="tfjs"))
    server = _serve(os.path.join(result.path, tfjs.SUBDIR))
    browser = Browser(f"http://127.0.0.1:{server.server_port}/index.html", root / "profile")
    deadline = time.time() + 60
    while browser.evaluate("document.body && document.body.dataset.state || ''") != "ready":
        assert time.time() < deadline, browser.evaluate("document.getElementById('status').textContent")
        time.sleep(0.2)
    yield browser, result, run
    browser.close()
    server.shutdown()


def _set(browser, element, value, event):
    """Sets a control as a user would and fires the event the page listens to."""
    browser.evaluate(f'(() => {{ const e = document.getElementById("{element}"); e.value = {value};'
                     f'e.dispatchEvent(new Event("{event}")); }})()')


def _served(result, noise, labels=None):
    loaded = tf.saved_model.load(result.path)
    inputs = {"noise": tf.constant(noise)}
    if labels is not None:
        inputs["labels"] = tf.constant(labels, tf.int32)
    return loaded.signatures["serving_default"](**inputs)["images"].numpy()


def test_the_page_draws_the_saved_models_images_for_the_seed(page):
    browser, result, run = page
    _set(browser, "seed", 3, "change")
    pixels = np.array(browser.evaluate(GRID_IMAGE)).reshape(28, 28)
    noise = np.fromfile(os.path.join(result.path, "tfjs", "noise.bin"), "<f4").reshape(16, 16, 8)
    np.testing.assert_array_equal(noise[3], draws.sample_noise(3, 16, (8,)).numpy())
    labels = [0] if run.config.gan == "cgan" else None
    expected = _served(result, noise[3][:1], labels)[0, :, :, 0].astype(int)
    assert pixels.std() > 20
    assert np.abs(pixels - expected).max() <= 3


def test_slider_and_class_selector_change_the_picture(page):
    browser, _, run = page
    _set(browser, "slider", 0, "input")
    start = np.array(browser.evaluate(CURRENT_IMAGE))
    _set(browser, "slider", 1, "input")
    end = np.array(browser.evaluate(CURRENT_IMAGE))
    assert np.abs(start - end).mean() > 1
    if run.config.gan == "cgan":
        before = np.array(browser.evaluate(GRID_IMAGE))
        _set(browser, "class", 1, "change")
        after = np.array(browser.evaluate(GRID_IMAGE))
        assert np.abs(before - after).mean() > 1


def test_missing_converter_is_a_config_error_naming_make_tfjs(tmp_path, monkeypatch):
    monkeypatch.setattr(tfjs, "CONVERTER", str(tmp_path / "absent"))
    run = write_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="make tfjs"):
        export.export(dataclasses.replace(run.config, export_format="tfjs"))
    assert not os.path.exists(os.path.join(run.config.logdir, "export"))
