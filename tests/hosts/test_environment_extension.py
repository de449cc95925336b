"""Interception extends the user's proxy and CA variables instead of replacing them:
``NO_PROXY`` keeps the user's entries (a host reached directly stays so), and each CA
variable names a bundle of the test CA and what the user's variable named, so that a
local HTTPS service trusted through ``REQUESTS_CA_BUNDLE`` or ``SSL_CERT_FILE`` stays
trusted. Before, the bundle held the test CA and the system's certificates only, and
``NO_PROXY`` was the loopback entries only."""

from __future__ import annotations

import os
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import trustme
from pytest_httpserver import HTTPServer

from pytest_mgmtauth import MgmtServer

pytestmark = pytest.mark.mgmtauth(intercept=True)


@pytest.fixture
def own_ca(tmp_path: Path) -> tuple[trustme.CA, Path]:
    """The user's own CA (a local service's), and its certificate's file."""
    ca = trustme.CA(organization_name="the user's own CA")
    pem = tmp_path / "own-ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return ca, pem


@pytest.fixture
def local_service(own_ca: tuple[trustme.CA, Path]) -> Iterator[str]:
    """A local HTTPS service whose certificate is from the user's own CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    own_ca[0].issue_cert("localhost").configure_cert(context)
    server = HTTPServer(host="localhost", port=0, ssl_context=context)
    server.expect_request("/status").respond_with_data("local")
    server.start()
    try:
        yield f"https://localhost:{server.port}/status"
    finally:
        server.stop()


def _certificates(path: str) -> int:
    return Path(path).read_text().count("BEGIN CERTIFICATE")


@pytest.fixture
def trusted_through_requests_ca_bundle(
    own_ca: tuple[trustme.CA, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user trusts the own CA through REQUESTS_CA_BUNDLE only (set before the
    fake's: list this fixture before mgmt_server)."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(own_ca[1]))


def test_a_ca_trusted_through_requests_ca_bundle_stays_trusted(
    local_service: str, trusted_through_requests_ca_bundle: None, mgmt_server: MgmtServer
) -> None:
    assert requests.get(local_service, timeout=10).text == "local"
    assert _certificates(os.environ["REQUESTS_CA_BUNDLE"]) == 2  # the test CA and the own
    # The other variables kept what they named: the system's certificates, with the
    # test CA.
    assert _certificates(os.environ["SSL_CERT_FILE"]) > 2
    assert mgmt_server.env["REQUESTS_CA_BUNDLE"] == os.environ["REQUESTS_CA_BUNDLE"]


@pytest.fixture
def trusted_through_every_ca_variable(
    own_ca: tuple[trustme.CA, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        monkeypatch.setenv(name, str(own_ca[1]))


def test_a_ca_trusted_through_ssl_cert_file_stays_trusted(
    local_service: str, trusted_through_every_ca_variable: None, mgmt_server: MgmtServer
) -> None:
    # httpx and Python's ssl (urllib) read SSL_CERT_FILE.
    with httpx.Client(timeout=10) as client:
        assert client.get(local_service).text == "local"
    with urllib.request.urlopen(local_service, timeout=10) as answer:
        assert answer.read() == b"local"
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert _certificates(os.environ[name]) == 2


def test_a_ca_directory_is_read_file_by_file(
    own_ca: tuple[trustme.CA, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests takes a directory in REQUESTS_CA_BUNDLE; the bundle holds its certificates.
    from pytest_mgmtauth._http.server import TestCA

    (tmp_path / "notes.txt").write_text("not a certificate")
    ca = TestCA()
    try:
        bundle = ca.bundle_with(str(tmp_path))
        assert _certificates(bundle) == 2
        assert ca.bundle_with(str(tmp_path)) == bundle  # made once
        assert ca.bundle_with(bundle) == bundle  # one of its own already
        assert _certificates(ca.bundle_with(str(tmp_path / "missing.pem"))) > 2  # the system's
    finally:
        ca.close()


@pytest.fixture
def users_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's NO_PROXY (set before the fake's: list this fixture first)."""
    monkeypatch.setenv("NO_PROXY", "internal.example, .corp.example,.tealiumiq.com:443")
    monkeypatch.setenv("no_proxy", "localhost,other.example,*,*.tealiumapis.com")


def test_no_proxy_keeps_the_users_entries_and_adds_loopback(
    users_no_proxy: None, mgmt_server: MgmtServer
) -> None:
    # no_proxy first (Python's urllib reads it first), each entry once.
    expected = "localhost,other.example,internal.example,.corp.example,127.0.0.1,::1"
    assert os.environ["NO_PROXY"] == os.environ["no_proxy"] == expected
    assert mgmt_server.env["NO_PROXY"] == expected
    # The entries that would send a service host around the proxy, to the real service,
    # are left out: `*`, `.tealiumiq.com:443`, `*.tealiumapis.com`.
    assert requests.utils.should_bypass_proxies("https://internal.example/x", None)
    assert not requests.utils.should_bypass_proxies("https://api.tealiumiq.com/x", None)


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def test_a_fixture_torn_down_after_the_fake_cannot_leave_its_values_behind(
    pytester: pytest.Pytester,
) -> None:
    # monkeypatch, listed before mgmt_server, is torn down after it: its undo wrote the
    # fake's proxy and CA values back after the plugin restored the user's, and every
    # later test sent its HTTPS to a proxy no test was using.
    pytester.makepyfile(
        test_a_function_fixture="""
        import os

        import pytest

        NAMES = ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
        BEFORE = {name: os.environ.get(name) for name in NAMES}


        @pytest.mark.mgmtauth(intercept=True)
        def test_changes_the_variables(monkeypatch, mgmt_server):
            monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
            monkeypatch.setenv("NO_PROXY", "elsewhere.example")
            monkeypatch.delenv("SSL_CERT_FILE")
            monkeypatch.delenv("https_proxy")


        def test_later_tests_see_the_users_values():
            assert {name: os.environ.get(name) for name in NAMES} == BEFORE
        """,
        test_b_module_fixture="""
        import os

        import pytest


        @pytest.fixture(scope="module")
        def module_patch():
            with pytest.MonkeyPatch.context() as patch:
                yield patch


        @pytest.mark.mgmtauth(intercept=True)
        def test_a_module_fixture_changes_them(module_patch, mgmt_server):
            module_patch.setenv("REQUESTS_CA_BUNDLE", "/nowhere.pem")
            module_patch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        """,
        test_c_later="""
        import os

        from test_a_function_fixture import BEFORE, NAMES


        def test_later_modules_see_the_users_values():
            assert {name: os.environ.get(name) for name in NAMES} == BEFORE
        """,
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
