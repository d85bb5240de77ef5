"""Decides, in seconds, whether a TFDS download is worth attempting.

Without a network TFDS does not fail fast: its downloader retries with back-off, and a
`tfds.load(..., download=True)` of Fashion-MNIST took 3 min 25 s to give up on a machine without
DNS (with all TFDS dependencies installed; see tensorflow/datasets#11212 for the missing one). So before any download we either obey the environment variable GANTRY_OFFLINE or open one
short TCP connection to the hosts the download would use.

GANTRY_OFFLINE:
  "1"        never download (air-gapped machines, tests);
  "0"        always attempt the download, no probe (e.g. a network the probe misjudges);
  unset/""   probe: attempt only if some host (or the configured HTTP(S) proxy) accepts a TCP
             connection within `timeout_s`.
"""

import os
import socket
import threading
import urllib.parse
import urllib.request

from datasets.errors import DatasetError

OFFLINE_ENV = "GANTRY_OFFLINE"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def download_allowed(urls: tuple[str, ...], *, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Returns (whether to attempt a download from `urls`, a reason fit for an error message)."""
    setting = os.environ.get(OFFLINE_ENV, "")
    if setting == "1":
        return False, f"skipped because {OFFLINE_ENV}=1"
    if setting == "0":
        return True, f"attempted because {OFFLINE_ENV}=0"
    if setting:
        raise DatasetError(
            f"{OFFLINE_ENV}={setting!r} is not understood: set it to 1, 0 or leave it unset."
        )
    endpoints = [_endpoint(url) for url in urls]
    for host, port in endpoints:
        if _accepts_connection(host, port, timeout_s=timeout_s):
            return True, f"attempted because {host}:{port} is reachable"
    tried = ", ".join(f"{host}:{port}" for host, port in endpoints)
    return False, (
        f"skipped because none of {tried} answered within {timeout_s:g} s "
        f"(set {OFFLINE_ENV}=0 to attempt it anyway)"
    )


def _endpoint(url: str) -> tuple[str, int]:
    """The host and port a request for `url` connects to first: the proxy when one is set."""
    parsed = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parsed.scheme)
    if proxy:
        parsed = urllib.parse.urlsplit(proxy if "//" in proxy else f"http://{proxy}")
    return parsed.hostname or "", parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 80)


def _accepts_connection(host: str, port: int, *, timeout_s: float) -> bool:
    """TCP connect with a hard deadline. DNS look-ups ignore socket timeouts, so the attempt runs
    in a daemon thread that is abandoned (and cannot delay interpreter exit) when it overruns."""
    outcome: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                outcome.append(True)
        except OSError:
            outcome.append(False)

    attempt = threading.Thread(target=connect, daemon=True)
    attempt.start()
    attempt.join(timeout_s)
    return outcome == [True]
