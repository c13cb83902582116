import pytest

from lethe_client import InvalidInput, validate_id, validate_tenant
from lethe_client.validate import validate_request, validate_sessions


@pytest.mark.parametrize("value", ["", " ", "\t", "\u00a0", "\u3000", "\u200b", " \u200b\u00a0 ", "\u2028"])
def test_blank_ids_are_refused(value):
    with pytest.raises(InvalidInput) as e:
        validate_id("subject_id", value)
    assert "subject_id" in str(e.value)


@pytest.mark.parametrize("value", ["cust\x00-1", "cust\n1", "cust\x7f", "cust\x85"])
def test_control_characters_are_refused(value):
    with pytest.raises(InvalidInput, match="control character"):
        validate_id("subject_id", value)


def test_ids_are_bounded_in_bytes_and_never_trimmed():
    assert validate_id("subject_id", "é" * 128) == "é" * 128  # 256 bytes
    with pytest.raises(InvalidInput, match="256 bytes"):
        validate_id("subject_id", "é" * 128 + "x")
    assert validate_id("subject_id", " alice") == " alice"
    with pytest.raises(InvalidInput, match="UTF-8"):
        validate_id("subject_id", "a\ud800")
    with pytest.raises(InvalidInput):
        validate_id("subject_id", None)


def test_errors_never_echo_the_id():
    secret_id = "anna.schmidt@example.de\n"
    with pytest.raises(InvalidInput) as e:
        validate_id("subject_id", secret_id)
    assert "anna" not in str(e.value)


@pytest.mark.parametrize("tenant", ["", "Acme", "-acme", "acme!", "a" * 64, "acme tenant"])
def test_bad_tenants(tenant):
    with pytest.raises(InvalidInput, match="tenant_id"):
        validate_tenant(tenant)


@pytest.mark.parametrize("tenant", ["a", "acme", "0acme", "acme_eu-1", "a" * 63])
def test_good_tenants(tenant):
    assert validate_tenant(tenant) == tenant


def test_requests():
    assert validate_request("acme", "cust-1", ("s-1", "s-2"), "SUBJECT", "GDPR") == ["s-1", "s-2"]
    assert validate_request("acme", "", (), "TENANT", "GDPR") == []
    with pytest.raises(InvalidInput, match="TENANT"):
        validate_request("acme", "cust-1", (), "TENANT", "GDPR")
    with pytest.raises(InvalidInput, match="scope"):
        validate_request("acme", "cust-1", (), "EVERYTHING", "GDPR")
    with pytest.raises(InvalidInput, match="session_ids"):
        validate_request("acme", "cust-1", ["s-1", " "], "SUBJECT", "GDPR")
    with pytest.raises(InvalidInput, match="regulation"):
        validate_request("acme", "cust-1", (), "SUBJECT", " ")
    with pytest.raises(InvalidInput, match="idempotency_key"):
        validate_request("acme", "cust-1", (), "SUBJECT", "GDPR", "k" * 201)
    with pytest.raises(InvalidInput, match="not one string"):
        validate_sessions("s-1")
    with pytest.raises(InvalidInput, match="more than 1000"):
        validate_sessions(["s-%d" % i for i in range(1001)])
