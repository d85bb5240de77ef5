"""Headless Chromium driven over the DevTools protocol on a pipe, and a static 127.0.0.1 server.

For pages an export writes (`--export_format=tfjs`): every host but 127.0.0.1 is unresolvable,
so a page that reached for a CDN would fail to load.
"""

import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time

CHROMIUM = shutil.which("chromium")


def _above_4(fd):
    """`fd` moved to a number above 4, so the child's dup2 onto 3 and 4 cannot clobber it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    """Headless Chromium with --remote-debugging-pipe: commands on fd 3, replies on fd 4
    (set in the child after fork; close_fds would close them again, so it is off)."""

    def __init__(self, url, profile):
        if CHROMIUM is None:  # a failure, not a skip: the page test is the tfjs export's proof
            raise RuntimeError("chromium is not installed: run `make chromium` (apt-get, as root).")
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

    def wait_until_ready(self, timeout=60.0):
        """Polls until the page sets body[data-state] to "ready"; fails with its status line."""
        deadline = time.time() + timeout
        while self.evaluate("document.body && document.body.dataset.state || ''") != "ready":
            assert time.time() < deadline, self.evaluate(
                "document.getElementById('status') && document.getElementById('status').textContent")
            time.sleep(0.1)

    def close(self):
        self.process.kill()
        self.process.wait()


def serve(directory):
    """A ThreadingHTTPServer for `directory` on a free 127.0.0.1 port, serving in a thread."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
