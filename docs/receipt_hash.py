#!/usr/bin/env python3
"""Recompute a Lethe receipt's or addendum's chain hash from its JSON, independently of Lethe's code.

Usage: receipt_hash.py [--chain-key ID=KEYFILE ...] RECORD.json [PREVIOUS.json]

RECORD.json is a receipt as `lethectl receipt ID` prints it, as GET /v1/erasures/{id}/receipt
answers, or as erasure.completed carries it after Avro decoding; or one of its addenda (an
object with "addendum_id", as `lethectl receipt ID --json` lists them under "addenda"). The
script prints the hash it computes and exits 0 when it equals the record's `hash` (and,
given the tenant's previous record of the chain, when `prev_hash` equals that record's
`hash`), 1 otherwise.

Anyone can check the hash, and so anyone who can write the audit table can rebuild a
consistent chain. With the chain key (LETHE_CHAIN_KEY, held by the aggregator and given to
auditors), --chain-key also checks the record's `chain_mac`: the hex HMAC-SHA-256 of its
`hash` under HKDF-SHA-256(key, salt empty, info "lethe receipt chain v1", 32 bytes), made
under the key named by `chain_key_id`. KEYFILE holds the key's bytes as the variable does (a
trailing newline is dropped); repeat --chain-key for the keys of earlier rotations. The
script then exits 1 unless `chain_mac` verifies.

The canonical form is documented in docs/receipt.md ("Recomputing a receipt's hash").
"""
import hashlib
import hmac
import json
import re
import sys

_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$")


def canonical_time(s):
    """UTC, truncated to milliseconds, RFC 3339 with the fraction's trailing zeros removed."""
    m = _TIME.match(s)
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % s)
    base, frac, zone = m.groups()
    if zone != "Z":
        # Lethe writes UTC; converting other offsets is left out on purpose to keep this short.
        raise ValueError("time not in UTC: %r" % s)
    ms = ((frac or "") + "000")[:3].rstrip("0")
    return base + ("." + ms if ms else "") + "Z"


FORMAT2 = ("unexamined", "unexamined_items", "excluded", "attestation", "mentions", "similar",
           "discovery_run_at", "discovery_uncovered")


def hash_format(receipt):
    if receipt.get("review"):
        return 4
    for s in receipt.get("stores") or []:
        if (s.get("verification") or {}).get("outside_inventory"):
            return 4
    if receipt.get("identifiers_shred_at"):
        return 3
    for s in receipt.get("stores") or []:
        if s.get("physical_erasure_due"):
            return 3
    for s in receipt.get("stores") or []:
        v = s.get("verification") or {}
        if any(v.get(k) for k in FORMAT2):
            return 2
    return 1


def canonical(receipt):
    fmt = hash_format(receipt)
    stores = []
    for s in receipt.get("stores") or []:
        v = s.get("verification") or {}
        ver = {"method": v.get("method", ""), "remaining": v.get("remaining", 0)}
        if fmt >= 2:
            ver["unexamined"] = v.get("unexamined", 0)
            ver["unexamined_items"] = v.get("unexamined_items") or []
            ver["excluded"] = v.get("excluded") or []
            ver["attestation"] = v.get("attestation", "")
            ver["mentions"] = v.get("mentions", 0)
            ver["similar"] = v.get("similar") or []
            run_at = v.get("discovery_run_at")
            ver["discovery_run_at"] = canonical_time(run_at) if run_at else ""
            ver["discovery_uncovered"] = v.get("discovery_uncovered", 0)
        if fmt >= 4:
            ver["outside_inventory"] = [{"location": o.get("location", ""), "found": o.get("found", 0),
                                         "unexamined": o.get("unexamined", ""), "suggest": o.get("suggest", "")}
                                        for o in v.get("outside_inventory") or []]
        stores.append({
            "store": s.get("store", ""),
            "kind": s.get("kind", ""),
            "status": s.get("status", ""),
            "deleted": s.get("deleted", 0),
            "locations": [{"location": l.get("location", ""), "deleted": l.get("deleted", 0)}
                          for l in s.get("locations") or []],
            "verification": ver,
            "physical": s.get("physical", ""),
        })
        if fmt >= 3:
            due = s.get("physical_erasure_due")
            stores[-1]["physical_erasure_due"] = canonical_time(due) if due else ""
    c = {  # dicts keep insertion order: this is the canonical field order
        "v": fmt,
        "receipt_id": receipt.get("receipt_id", ""),
        "request_id": receipt.get("request_id", ""),
        "tenant_id": receipt.get("tenant_id", ""),
        "subject_hash": receipt.get("subject_hash", ""),
        "key_id": receipt.get("key_id", ""),
        "scope": receipt.get("scope", ""),
        "regulation": receipt.get("regulation", ""),
        "requested_at": canonical_time(receipt["requested_at"]),
        "completed_at": canonical_time(receipt["completed_at"]),
        "due_at": canonical_time(receipt["due_at"]),
        "elapsed_ms": receipt.get("elapsed_ms", 0),
        "inventory_version": receipt.get("inventory_version", ""),
        "stores": stores,
        "audit_log_pii": bool(receipt.get("audit_log_pii", False)),
        "status": receipt.get("status", ""),
        "seq": receipt.get("seq", 0),
        "prev_hash": receipt.get("prev_hash", ""),
    }
    if fmt >= 3:
        shred = receipt.get("identifiers_shred_at")
        c["identifiers_shred_at"] = canonical_time(shred) if shred else ""
    if fmt >= 4:
        c["review"] = [{"store": i.get("store", ""), "kind": i.get("kind", ""), "item": i.get("item", "")}
                       for i in receipt.get("review") or []]
    return c


def canonical_addendum(a):
    review = a.get("review")
    c = {
        "v": 2 if review else 1,
        "record": "addendum",
        "addendum_id": a.get("addendum_id", ""),
        "receipt_id": a.get("receipt_id", ""),
        "request_id": a.get("request_id", ""),
        "tenant_id": a.get("tenant_id", ""),
        "type": a.get("type", ""),
        "purpose": a.get("purpose", ""),
        "pass": a.get("pass", ""),
        "at": canonical_time(a["at"]),
        "stores": [{"store": s.get("store", ""), "status": s.get("status", ""), "deleted": s.get("deleted", 0),
                    "remaining": s.get("remaining", 0), "unexamined": s.get("unexamined", 0)}
                   for s in a.get("stores") or []],
    }
    if review:
        c["review"] = {k: review.get(k, "") for k in ("store", "kind", "item", "decision", "reason")}
    c["seq"] = a.get("seq", 0)
    c["prev_hash"] = a.get("prev_hash", "")
    return c


def encode(obj):
    """JSON as Go's encoding/json writes it: no spaces, UTF-8, <, >, &, U+2028, U+2029 escaped."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s.encode("utf-8")


def receipt_hash(record):
    form = canonical_addendum(record) if "addendum_id" in record else canonical(record)
    return hashlib.sha256(encode(form)).hexdigest()


def chain_mac(key, record_hash):
    """HMAC-SHA-256 of the hash's hex text under HKDF-SHA-256(key, info "lethe receipt chain v1")."""
    prk = hmac.new(b"\x00" * 32, key, hashlib.sha256).digest()  # HKDF-Extract, empty salt
    derived = hmac.new(prk, b"lethe receipt chain v1\x01", hashlib.sha256).digest()  # HKDF-Expand, one block
    return hmac.new(derived, record_hash.encode("ascii"), hashlib.sha256).hexdigest()


def read_key(path):
    with open(path, "rb") as f:
        return f.read().rstrip(b"\r\n")


def main(argv):
    args, keys = [], {}
    rest = argv[1:]
    while rest:
        a = rest.pop(0)
        if a == "--chain-key" and rest:
            kid, sep, path = rest.pop(0).partition("=")
            if not sep:
                print("--chain-key takes ID=KEYFILE", file=sys.stderr)
                return 2
            keys[kid] = read_key(path)
        else:
            args.append(a)
    if len(args) not in (1, 2):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        receipt = json.load(f)
    got = receipt_hash(receipt)
    print(got)
    ok = got == receipt.get("hash")
    if not ok:
        print("hash mismatch: receipt says %s" % receipt.get("hash"), file=sys.stderr)
    if len(args) == 2:
        with open(args[1], encoding="utf-8") as f:
            prev = json.load(f)
        if receipt.get("prev_hash") != prev.get("hash"):
            print("prev_hash does not link to the previous receipt", file=sys.stderr)
            ok = False
    if keys:
        kid, mac = receipt.get("chain_key_id", ""), receipt.get("chain_mac", "")
        if not mac:
            print("no chain_mac: the record was linked without the chain key", file=sys.stderr)
            ok = False
        elif kid not in keys:
            print("chain_mac is under key %r; no --chain-key for it" % kid, file=sys.stderr)
            ok = False
        elif not hmac.compare_digest(chain_mac(keys[kid], receipt.get("hash", "")), mac):
            print("chain_mac does not verify under key %r: the record was not linked by the holder of that key" % kid, file=sys.stderr)
            ok = False
        else:
            print("chain_mac ok (key %s)" % kid)
    elif receipt.get("chain_mac"):
        print("chain_mac not checked (pass --chain-key ID=KEYFILE)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
