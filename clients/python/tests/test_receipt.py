import copy
import datetime
import hashlib

import pytest

from conftest import AUDIT_TESTDATA, load_json
from lethe_client import VerificationError, canonical, chain_mac, record_hash, verify_chain, verify_record
from lethe_client.receipt import canonical_time, encode, hash_format, read_chain_key

GOLDEN = ["receipt_v1", "receipt_v2", "receipt_v3", "receipt_v4", "receipt_keyed"]


@pytest.fixture(scope="module")
def chain_key():
    return {"chain1": read_chain_key(str(AUDIT_TESTDATA / "chain1.key"))}


@pytest.fixture(scope="module")
def golden_chain():
    return load_json(AUDIT_TESTDATA / "chain_acme.json")["records"]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_receipt_hash(name):
    r = load_json(AUDIT_TESTDATA / (name + ".json"))
    assert record_hash(r) == r["hash"]
    assert verify_record(r) == r["hash"]


def test_golden_receipts_cover_every_format():
    formats = {name: hash_format(load_json(AUDIT_TESTDATA / (name + ".json"))) for name in GOLDEN[:4]}
    assert formats == {"receipt_v1": 1, "receipt_v2": 2, "receipt_v3": 3, "receipt_v4": 4}


def test_golden_receipt_canonical_form_is_the_hashed_bytes():
    r = load_json(AUDIT_TESTDATA / "receipt_v2.json")
    b = encode(canonical(r))
    assert hashlib.sha256(b).hexdigest() == r["hash"]
    # Go's encoding/json escapes, which the golden location exercises, and no whitespace.
    assert b"\\u003cacme\\u003e \\u0026 caf\xc3\xa9\\u2028" in b
    assert b": " not in b and b", " not in b


@pytest.mark.parametrize("name", GOLDEN)
def test_every_member_of_the_canonical_form_is_covered(name):
    r = load_json(AUDIT_TESTDATA / (name + ".json"))
    for field in ("receipt_id", "request_id", "tenant_id", "subject_hash", "key_id", "scope", "regulation",
                  "inventory_version", "status", "prev_hash"):
        t = dict(r, **{field: r[field] + "x"})
        with pytest.raises(VerificationError):
            verify_record(t)
    for field in ("elapsed_ms", "seq"):
        with pytest.raises(VerificationError):
            verify_record(dict(r, **{field: r[field] + 1}))
    with pytest.raises(VerificationError):
        verify_record(dict(r, audit_log_pii=not r.get("audit_log_pii", False)))
    with pytest.raises(VerificationError):
        verify_record(dict(r, completed_at="2031-01-01T00:00:00Z"))
    t = copy.deepcopy(r)
    t["stores"][0]["deleted"] += 1
    with pytest.raises(VerificationError):
        verify_record(t)
    t = copy.deepcopy(r)
    t["stores"][0]["verification"]["remaining"] = 1
    with pytest.raises(VerificationError):
        verify_record(t)


def test_members_outside_the_canonical_form_do_not_change_the_hash():
    r = load_json(AUDIT_TESTDATA / "receipt_keyed.json")
    assert record_hash(dict(r, chain_mac="0" * 64, chain_key_id="other", hash="")) == r["hash"]


def test_times_truncate_to_milliseconds_in_utc():
    assert canonical_time("2025-03-04T05:06:09.120456Z") == "2025-03-04T05:06:09.12Z"
    assert canonical_time("2025-03-04T05:06:09.999999999Z") == "2025-03-04T05:06:09.999Z"
    assert canonical_time("2025-03-04T05:06:07.000Z") == "2025-03-04T05:06:07Z"
    assert canonical_time("2025-03-04T01:36:07.5-03:30") == "2025-03-04T05:06:07.5Z"
    assert canonical_time("2025-01-01T00:30:00+01:00") == "2024-12-31T23:30:00Z"
    with pytest.raises(VerificationError):
        canonical_time("2025-03-04 05:06:07")


def test_the_same_instant_in_another_offset_hashes_alike():
    r = load_json(AUDIT_TESTDATA / "receipt_v1.json")
    assert r["requested_at"] == "2025-03-04T05:06:07Z"
    assert record_hash(dict(r, requested_at="2025-03-04T07:06:07+02:00")) == r["hash"]


def test_a_receipt_decoded_from_avro_with_datetimes_hashes_alike():
    r = load_json(AUDIT_TESTDATA / "receipt_v3.json")
    decoded = copy.deepcopy(r)
    for field in ("requested_at", "completed_at", "due_at", "identifiers_shred_at"):
        decoded[field] = datetime.datetime.fromisoformat(r[field].replace("Z", "+00:00"))
    assert isinstance(decoded["identifiers_shred_at"], datetime.datetime)
    assert r["identifiers_shred_at"].count(".") == 1  # sub-millisecond digits to truncate
    assert record_hash(decoded) == r["hash"]
    tz = datetime.timezone(datetime.timedelta(hours=-3, minutes=-30))
    decoded["requested_at"] = decoded["requested_at"].astimezone(tz)
    assert record_hash(decoded) == r["hash"]


def test_strings_encode_as_go_does():
    assert encode({"s": "a\"b\\c\n\t\x01\x7f"}) == b'{"s":"a\\"b\\\\c\\n\\t\\u0001\x7f"}'
    assert encode(["<>&\u2028\u2029"]) == b'["\\u003c\\u003e\\u0026\\u2028\\u2029"]'
    assert encode("\ud800") == '"\ufffd"'.encode("utf-8")


def test_chain_mac_of_the_golden_keyed_receipt(chain_key):
    r = load_json(AUDIT_TESTDATA / "receipt_keyed.json")
    assert chain_mac(chain_key["chain1"], r["hash"]) == r["chain_mac"]
    assert verify_record(r, chain_keys=chain_key) == r["hash"]
    with pytest.raises(VerificationError, match="does not verify"):
        verify_record(r, chain_keys={"chain1": b"another-chain-key-0123456789abcdef"})
    with pytest.raises(VerificationError, match="was not given"):
        verify_record(r, chain_keys={"chain2": chain_key["chain1"]})


def test_golden_chain_verifies(golden_chain, chain_key):
    rep = verify_chain(golden_chain, chain_key)
    assert (rep.receipts, rep.addenda, rep.head_seq) == (4, 2, 6)
    assert rep.head_hash == golden_chain[-1]["hash"]
    assert rep.last_unmacced_seq == 1  # linked before the chain key, as the chain's first record
    assert verify_chain(list(reversed(golden_chain))) == verify_chain(golden_chain)


@pytest.mark.parametrize("name,version", [("addendum_v1", 1), ("addendum_v2", 2)])
def test_golden_addenda(name, version):
    a = load_json(AUDIT_TESTDATA / (name + ".json"))
    assert canonical(a)["v"] == version
    assert verify_record(a) == a["hash"]
    if version == 2:
        # The review decision sits between stores and seq, and every member of it counts.
        assert list(canonical(a))[-4:] == ["stores", "review", "seq", "prev_hash"]
        for field in ("store", "kind", "item", "decision", "reason"):
            with pytest.raises(VerificationError):
                verify_record(dict(a, review=dict(a["review"], **{field: a["review"][field] + "x"})))
        with pytest.raises(VerificationError):
            verify_record({k: v for k, v in a.items() if k != "review"})


def test_golden_addendum_in_the_chain(golden_chain):
    addenda = [r for r in golden_chain if "addendum_id" in r]
    assert [canonical(a)["v"] for a in addenda] == [1, 2]  # a sweep's, then a review decision's
    for a in addenda:
        assert record_hash(a) == a["hash"]
        assert canonical(a)["record"] == "addendum"
    with pytest.raises(VerificationError):
        verify_record(dict(addenda[0], stores=[dict(addenda[0]["stores"][0], remaining=1)]))
    with pytest.raises(VerificationError):
        verify_record(dict(addenda[1], review=dict(addenda[1]["review"], decision="ERASE")))


def test_a_missing_record_breaks_the_chain(golden_chain):
    with pytest.raises(VerificationError) as e:
        verify_chain(golden_chain[:2] + golden_chain[3:])
    assert e.value.seq == 4


def test_a_chain_must_start_at_seq_1(golden_chain):
    with pytest.raises(VerificationError):
        verify_chain(golden_chain[1:])
    assert verify_chain(golden_chain[1:], complete=False).receipts == 3


def _rebuild(records, index, keep_macs):
    """What a writer of the audit table can do: alter one record and recompute every hash
    from there on, relinking the chain."""
    out = copy.deepcopy(records)
    out[index]["stores"][0]["deleted"] += 10
    for i in range(index, len(out)):
        if i > 0:
            out[i]["prev_hash"] = out[i - 1]["hash"]
        out[i]["hash"] = record_hash(out[i])
        if not keep_macs:
            out[i].pop("chain_mac", None)
            out[i].pop("chain_key_id", None)
    return out


@pytest.mark.parametrize("keep_macs", [True, False])
def test_a_rebuilt_chain_fails_only_the_keyed_check(golden_chain, chain_key, keep_macs):
    rebuilt = _rebuild(golden_chain, 1, keep_macs)
    verify_chain(rebuilt)  # the hashes alone cannot tell
    with pytest.raises(VerificationError):
        verify_chain(rebuilt, chain_key)


def test_records_of_two_tenants_are_not_one_chain(golden_chain):
    with pytest.raises(VerificationError, match="tenants"):
        verify_chain(golden_chain[:1] + [dict(golden_chain[1], tenant_id="other")])
