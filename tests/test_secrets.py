"""The one redaction: environment keys, registered keys, bearer tokens, URL credentials and key-like query
parameters; URLs stored without credentials; log records and error lines go out redacted."""

from __future__ import annotations

import json
import logging

import pytest

from azr.secrets import RedactingFilter, Secret, public_url, redact, redact_data


def test_keys_from_the_environment_are_redacted_without_being_named(monkeypatch):
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "sk-env-0123456789")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # a setting, not a key: too short to redact
    assert redact("got sk-env-0123456789, false") == "got <redacted>, false"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("http://user:PASS-0123456789@host/v1", "http://<redacted>@host/v1"),
        ("https://h/v1?api-key=QK-0123456789&x=1", "https://h/v1?api-key=<redacted>&x=1"),
        ("https://h/v1?key=QK-0123456789", "https://h/v1?key=<redacted>"),
        ("https://h/v1?token=QK-0123456789#f", "https://h/v1?token=<redacted>#f"),
        ("Authorization: Bearer sk-abc.def", "Authorization: Bearer <redacted>"),
        ("def f(key=3):\n    return key", "def f(key=3):\n    return key"),  # code is not a URL
    ],
)
def test_credentials_in_urls_and_headers(text, kept):
    assert redact(text) == kept


def test_a_url_is_stored_without_credentials_and_they_are_redacted_elsewhere():
    url = "http://u:STORED-0123456789@127.0.0.1:8000/v1?api-key=QUERY-0123456789&v=2"
    assert public_url(url) == "http://127.0.0.1:8000/v1?v=2"
    assert redact("echo STORED-0123456789 QUERY-0123456789") == "echo <redacted> <redacted>"


def test_a_secret_never_shows_and_is_known_once_made():
    secret = Secret("sk-made-0123456789")
    assert repr(secret) == str(secret) == "<redacted>"
    assert redact_data({"a": ["sk-made-0123456789"], "sk-made-0123456789": 1}) == {"a": ["<redacted>"], "<redacted>": 1}


def test_log_records_go_out_redacted(monkeypatch):
    monkeypatch.setenv("AZR_TEST_TOKEN", "tok-0123456789abc")
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "HTTP Request: POST %s", ("http://h/?key=tok-0123456789abc",), None
    )
    assert RedactingFilter().filter(record) and "tok-0123456789abc" not in record.getMessage()


def test_the_cli_error_line_is_redacted(cli, monkeypatch):
    monkeypatch.setenv("AZR_TEST_API_KEY", "sk-cli-0123456789")
    code, _, err = cli("config", "show", "--config", "/nonexistent/sk-cli-0123456789.yaml")
    assert code == 2 and "sk-cli" not in err and "<redacted>" in err


def test_redacting_a_serialized_json_line_keeps_it_json():
    """A key right before an escaped quote (an error body quoted inside a log record) is redacted, not the quote."""
    record = {"error": 'HTTP 503: {"auth": "Bearer sk-echoed-0123456789"} http://u:pw-0123456789@h/v1?api-key=k0123456'}
    line = redact(json.dumps(record))
    assert json.loads(line) == {
        "error": 'HTTP 503: {"auth": "Bearer <redacted>"} http://<redacted>@h/v1?api-key=<redacted>'
    }


# One test per credential parameter name: in any case, with `-` or `_` between words, in the query or the fragment.
CREDENTIAL_NAMES = [
    "subscription-key",
    "Ocp-Apim-Subscription-Key",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
    "X-Goog-Signature",
    "client_secret",
    "private_token",
    "x-api-key",
    "api_key",
    "apikey",
    "API-KEY",
    "access_token",
    "refresh-token",
    "token",
    "key",
    "sig",
    "signature",
    "password",
    "passwd",
    "auth",
    "secret",
]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_each_credential_parameter_is_redacted_and_dropped_from_a_stored_url(name):
    value = "Cred/0123456789+abc"
    url = f"https://h.example/v1?model=m&{name}={value}&v=2"
    assert redact(url) == f"https://h.example/v1?model=m&{name}=<redacted>&v=2"
    assert redact(f"https://h.example/cb#{name}={value}") == f"https://h.example/cb#{name}=<redacted>"
    variant = name.replace("-", "_") if "-" in name else name.replace("_", "-")
    assert redact(f"GET /v1?{variant.lower()}={value} 200") == f"GET /v1?{variant.lower()}=<redacted> 200"
    assert public_url(url) == "https://h.example/v1?model=m&v=2"
    assert redact(f"echo {value}") == "echo <redacted>"  # registered by public_url: redacted wherever it turns up


@pytest.mark.parametrize("name", ["keyboard", "monkey", "tokens_per_s", "signal", "author", "page"])
def test_names_that_only_contain_a_credential_word_are_kept(name):
    assert redact(f"https://h.example/?{name}=visible-0123") == f"https://h.example/?{name}=visible-0123"


def test_user_and_password_in_the_netloc_are_redacted_and_dropped():
    url = "https://alice:Pa55-0123456789@h.example:8443/v1"
    assert redact(f"POST {url} failed") == "POST https://<redacted>@h.example:8443/v1 failed"
    assert public_url(url) == "https://h.example:8443/v1"


def test_stored_settings_and_error_lines_carry_no_credential(cli, tmp_path):
    url = "https://127.0.0.1:9/v1?X-Amz-Signature=sig0123456789abc&subscription-key=sub0123456789"
    code, _, err = cli("eval", "--endpoint", url, "--endpoint-model", "m", "--dataset", tmp_path / "absent.jsonl")
    assert code == 2 and "sig0123456789abc" not in err and "sub0123456789" not in err


def test_a_credential_in_the_fragment_is_not_stored():
    assert public_url("https://h.example/cb#access_token=frag0123456789&state=1") == (
        "https://h.example/cb#access_token=<redacted>&state=1"
    )
