"""``streamgate users --url iggy://...``: the URL taken apart, a malformed one refused with the
client's error (not a traceback)."""

from __future__ import annotations

import argparse

import pytest

from gateway.client.session import ClientError
from gateway.client.user_stores import iggy_target


def test_a_full_url() -> None:
    got = iggy_target("iggy://admin:p%40ss@[::1]:9090", argparse.Namespace())
    assert got == ("::1", 9090, "admin", "p@ss")


@pytest.mark.parametrize(
    "url", ["iggy://[::1", "iggy://a[::1]:8090", "iggy://h:port", "kafka://h:1"]
)
def test_a_malformed_url_is_a_client_error(url: str) -> None:
    with pytest.raises(ClientError, match="--url"):
        iggy_target(url, argparse.Namespace())
