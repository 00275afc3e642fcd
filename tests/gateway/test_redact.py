"""Backend URLs shown with their secrets masked: every form a backend reads credentials from,
checked against the backends' own URL parsers (what they would log in with is what is masked).
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.backends.iggy.backend import parse_url as iggy_url
from gateway.backends.rabbitmq_stream.backend import parse_url as rabbit_url
from gateway.redact import MASK, mask_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("embedded:./data", "embedded:./data"),
        ("embedded:///var/lib/streamgate", "embedded:///var/lib/streamgate"),
        (
            "kafka://127.0.0.1:9092,b2:9093?broker=tansu",
            "kafka://127.0.0.1:9092,b2:9093?broker=tansu",
        ),
        ("kafka://app:s3cret@b1:9092,b2:9092", f"kafka://app:{MASK}@b1:9092,b2:9092"),
        (
            "rabbitmq-stream://guest:guest@localhost:5552/%2F?heartbeat=10",
            f"rabbitmq-stream://guest:{MASK}@localhost:5552/%2F?heartbeat=10",
        ),
        ("iggy://iggy:iggy@10.0.0.7:8090", f"iggy://iggy:{MASK}@10.0.0.7:8090"),
        # A user info without a password is an Iggy personal access token: masked whole.
        ("iggy://pat-4f1c9e@10.0.0.7:8090", f"iggy://{MASK}@10.0.0.7:8090"),
        ("iggy://u:@h:1", f"iggy://u:{MASK}@h:1"),
        # Options whose name says secret, whatever the backend.
        (
            "kafka://b1:9092?sasl_password=p%40ss&client_id=me&api_key=k1",
            f"kafka://b1:9092?sasl_password={MASK}&client_id=me&api_key={MASK}",
        ),
        # A raw /, ? or # in a password (a URL the backends refuse): still masked whole.
        ("iggy://u:pa/ss?#x@h:1", f"iggy://u:{MASK}@h:1"),
        ("kafka://b1:9092#frag", f"kafka://b1:9092#{MASK}"),
        ("[::1", "[::1"),  # no scheme: no authority, nothing to mask
    ],
)
def test_masked_forms(url: str, shown: str) -> None:
    assert mask_url(url).shown == shown


def test_percent_encoded_secret_is_redacted_in_both_forms() -> None:
    masked = mask_url("rabbitmq-stream://app:p%40ss%2Fw0rd@rabbit:5552/")
    assert masked.shown == f"rabbitmq-stream://app:{MASK}@rabbit:5552/"
    assert set(masked.secrets) == {"p%40ss%2Fw0rd", "p@ss/w0rd"}
    text = "login refused for app with p@ss/w0rd (url app:p%40ss%2Fw0rd@rabbit)"
    assert masked.redact(text) == f"login refused for app with {MASK} (url app:{MASK}@rabbit)"


def test_a_url_without_secrets_redacts_nothing() -> None:
    masked = mask_url("kafka://b1:9092")
    assert masked.secrets == ()
    assert masked.redact("kafka b1:9092 down") == "kafka b1:9092 down"


# Passwords that cannot be read inside the rest of the URL or the mask: the property is "the
# secret is not in what is shown", which a password such as "b" or "*" would make meaningless.
_SECRET_CHARS = st.characters(
    codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="*"
).filter(lambda c: not c.islower() and not c.isdigit() and c not in ".:/-[]")
PASSWORDS = st.text(_SECRET_CHARS, min_size=3, max_size=24)
USERS = st.text("abcdefghij", min_size=1, max_size=8)


@given(user=USERS, password=PASSWORDS)
def test_rabbitmq_password_never_shown(user: str, password: str) -> None:
    url = f"rabbitmq-stream://{user}:{quote(password, safe='')}@rabbit.local:5552/vh"
    assert rabbit_url(url).password == password  # what the backend logs in with
    masked = mask_url(url)
    assert masked.shown == f"rabbitmq-stream://{user}:{MASK}@rabbit.local:5552/vh"
    assert password not in masked.shown
    assert password not in masked.redact(f"server said: bad password {password} for {user}")


@given(user=USERS, password=PASSWORDS)
def test_iggy_password_and_token_never_shown(user: str, password: str) -> None:
    encoded = quote(password, safe="")
    with_password = f"iggy://{user}:{encoded}@iggy.local:8090"
    assert iggy_url(with_password).password == password
    assert password not in mask_url(with_password).shown
    with_token = f"iggy://{encoded}@iggy.local:8090"
    assert iggy_url(with_token).token == password
    masked = mask_url(with_token)
    assert masked.shown == f"iggy://{MASK}@iggy.local:8090"
    assert password not in masked.redact(f"token {password} refused")
