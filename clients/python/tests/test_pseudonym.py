import pytest

from conftest import SUBJECT_TESTDATA, load_json
from lethe_client import InvalidInput, PseudonymKey

GOLDEN = load_json(SUBJECT_TESTDATA / "pseudonyms.json")


@pytest.mark.parametrize("case", GOLDEN, ids=[str(i) for i in range(len(GOLDEN))])
def test_pseudonyms_equal_go(case):
    k = PseudonymKey(case["key_id"], case["secret"].encode())
    assert k.pseudonym(case["tenant"], case["id"]) == case["pseudonym"]
    assert k.session_pseudonym(case["tenant"], case["id"]) == case["session_pseudonym"]


def test_golden_cases_exercise_long_and_multibyte_ids():
    sizes = [len(c["id"].encode()) for c in GOLDEN]
    assert max(sizes) > 127  # a two-byte length prefix
    assert any(len(c["id"]) != len(c["id"].encode()) for c in GOLDEN)  # lengths are in bytes


def test_key_from_env(tmp_path):
    case = GOLDEN[0]
    k = PseudonymKey.from_env({"LETHE_HMAC_KEY": case["secret"]})
    assert k.key_id == "k1"
    assert k.pseudonym(case["tenant"], case["id"]) == case["pseudonym"]
    f = tmp_path / "key"
    f.write_text(case["secret"] + "\n")
    k = PseudonymKey.from_env({"LETHE_HMAC_KEY_FILE": str(f), "LETHE_HMAC_KEY_ID": "k9"})
    assert k.key_id == "k9"
    assert k.pseudonym(case["tenant"], case["id"]) == case["pseudonym"]
    with pytest.raises(InvalidInput):
        PseudonymKey.from_env({})


def test_key_is_never_shown_and_must_be_long_enough():
    secret = GOLDEN[0]["secret"]
    k = PseudonymKey("k1", secret.encode())
    assert secret not in repr(k) and secret not in str(k)
    with pytest.raises(InvalidInput):
        PseudonymKey("k1", b"short")
    with pytest.raises(InvalidInput):
        PseudonymKey("", secret.encode())


def test_blank_ids_have_no_pseudonym():
    k = PseudonymKey("k1", GOLDEN[0]["secret"].encode())
    with pytest.raises(InvalidInput):
        k.pseudonym("acme", " ")
    with pytest.raises(InvalidInput):
        k.pseudonym("Acme", "cust-42")
