import socket
import time

import pytest

from datasets import network
from datasets.errors import DatasetError


@pytest.fixture
def no_offline_setting(monkeypatch):
    monkeypatch.delenv(network.OFFLINE_ENV, raising=False)
    for scheme in ("http", "https", "all"):
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)


def test_offline_setting_skips_without_probing(monkeypatch):
    monkeypatch.setenv(network.OFFLINE_ENV, "1")

    assert network.download_allowed(("http://unresolvable.invalid/",)) == (
        False,
        "skipped because GANTRY_OFFLINE=1",
    )


def test_online_setting_allows_without_probing(monkeypatch):
    monkeypatch.setenv(network.OFFLINE_ENV, "0")

    allowed, _ = network.download_allowed(("http://unresolvable.invalid/",))

    assert allowed


def test_unknown_setting_is_rejected(monkeypatch):
    monkeypatch.setenv(network.OFFLINE_ENV, "yes")

    with pytest.raises(DatasetError, match="GANTRY_OFFLINE='yes'"):
        network.download_allowed(("http://example.com/",))


def test_probe_refused_everywhere_says_so_quickly(no_offline_setting, closed_port_url):
    start = time.monotonic()

    urls = (closed_port_url, "http://unresolvable.invalid/")

    allowed, reason = network.download_allowed(urls, timeout_s=2)

    assert not allowed
    assert "127.0.0.1:" in reason and "unresolvable.invalid:80" in reason
    assert time.monotonic() - start < 5


def test_probe_allows_when_one_host_listens(no_offline_setting, closed_port_url):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        allowed, reason = network.download_allowed((closed_port_url, f"https://127.0.0.1:{port}/x"))

    assert allowed
    assert f"127.0.0.1:{port} is reachable" in reason


def test_probe_goes_to_the_proxy_when_one_is_set(no_offline_setting, monkeypatch):
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen()
        port = proxy.getsockname()[1]
        monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{port}")

        allowed, reason = network.download_allowed(("https://unresolvable.invalid/",))

    assert allowed
    assert f"127.0.0.1:{port}" in reason
