"""Recompute and verify the hashes, chain links and chain MACs of Lethe's receipts and addenda.

The canonical form is the one docs/receipt.md documents ("Recomputing a receipt's hash"):
a fixed member order per hash format (1 to 4), times in UTC truncated to milliseconds, and
JSON as Go's encoding/json writes it. This is an implementation of its own, checked against
the golden receipts Lethe's tests pin.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .errors import VerificationError

Record = Mapping[str, Any]

CHAIN_MAC_INFO = b"lethe receipt chain v1"

_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})\Z")

_FORMAT2_FIELDS = ("unexamined", "unexamined_items", "excluded", "attestation", "mentions", "similar",
                   "discovery_run_at", "discovery_uncovered")


def canonical_time(value: Union[str, _dt.datetime]) -> str:
    """An RFC 3339 time as the canonical form writes it: UTC, truncated (not rounded) to
    milliseconds, the fraction's trailing zeros removed, no fraction when it is zero. A
    timezone-aware datetime (as an Avro decoder gives a receipt read from
    erasure.completed) is written likewise."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise VerificationError("a time without a timezone")
        u = value.astimezone(_dt.timezone.utc)
        ms = ("%03d" % (u.microsecond // 1000)).rstrip("0")
        return u.strftime("%Y-%m-%dT%H:%M:%S") + ("." + ms if ms else "") + "Z"
    if not isinstance(value, str):
        raise VerificationError("a time is neither a string nor a datetime")
    m = _TIME.match(value)
    if not m:
        raise VerificationError("not an RFC 3339 time: %r" % value)
    year, month, day, hour, minute, second, frac, zone = m.groups()
    t = _dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        t -= sign * _dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    ms = ((frac or "") + "000")[:3].rstrip("0")
    return "%04d-%02d-%02dT%02d:%02d:%02d%sZ" % (t.year, t.month, t.day, t.hour, t.minute, t.second,
                                                 "." + ms if ms else "")


def _time_or_empty(value: Any) -> str:
    return canonical_time(value) if value else ""


def _list(value: Any) -> List[Any]:
    return list(value) if value else []


def hash_format(receipt: Record) -> int:
    """The hash format a receipt is canonicalised in: 4 with outside_inventory or review,
    3 with identifiers_shred_at or physical_erasure_due, 2 with any of format 2's
    verification fields set, else 1."""
    stores = receipt.get("stores") or []
    if receipt.get("review") or any((s.get("verification") or {}).get("outside_inventory") for s in stores):
        return 4
    if receipt.get("identifiers_shred_at") or any(s.get("physical_erasure_due") for s in stores):
        return 3
    for s in stores:
        v = s.get("verification") or {}
        if any(v.get(f) for f in _FORMAT2_FIELDS):
            return 2
    return 1


def _verification(v: Mapping[str, Any], fmt: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"method": v.get("method") or "", "remaining": v.get("remaining") or 0}
    if fmt >= 2:
        out.update(
            unexamined=v.get("unexamined") or 0,
            unexamined_items=_list(v.get("unexamined_items")),
            excluded=_list(v.get("excluded")),
            attestation=v.get("attestation") or "",
            mentions=v.get("mentions") or 0,
            similar=_list(v.get("similar")),
            discovery_run_at=_time_or_empty(v.get("discovery_run_at")),
            discovery_uncovered=v.get("discovery_uncovered") or 0,
        )
    if fmt >= 4:
        out["outside_inventory"] = [
            {"location": o.get("location") or "", "found": o.get("found") or 0,
             "unexamined": o.get("unexamined") or "", "suggest": o.get("suggest") or ""}
            for o in _list(v.get("outside_inventory"))]
    return out


def _required_time(record: Record, field: str) -> str:
    value = record.get(field)
    if not value:
        raise VerificationError("record has no %s" % field, record.get("seq"))
    return canonical_time(value)


def canonical_receipt(receipt: Record) -> Dict[str, Any]:
    """The receipt's canonical form, members in their canonical order (dicts keep insertion order)."""
    fmt = hash_format(receipt)
    stores = []
    for s in receipt.get("stores") or []:
        store: Dict[str, Any] = {
            "store": s.get("store") or "",
            "kind": s.get("kind") or "",
            "status": s.get("status") or "",
            "deleted": s.get("deleted") or 0,
            "locations": [{"location": loc.get("location") or "", "deleted": loc.get("deleted") or 0}
                          for loc in _list(s.get("locations"))],
            "verification": _verification(s.get("verification") or {}, fmt),
            "physical": s.get("physical") or "",
        }
        if fmt >= 3:
            store["physical_erasure_due"] = _time_or_empty(s.get("physical_erasure_due"))
        stores.append(store)
    c: Dict[str, Any] = {
        "v": fmt,
        "receipt_id": receipt.get("receipt_id") or "",
        "request_id": receipt.get("request_id") or "",
        "tenant_id": receipt.get("tenant_id") or "",
        "subject_hash": receipt.get("subject_hash") or "",
        "key_id": receipt.get("key_id") or "",
        "scope": receipt.get("scope") or "",
        "regulation": receipt.get("regulation") or "",
        "requested_at": _required_time(receipt, "requested_at"),
        "completed_at": _required_time(receipt, "completed_at"),
        "due_at": _required_time(receipt, "due_at"),
        "elapsed_ms": receipt.get("elapsed_ms") or 0,
        "inventory_version": receipt.get("inventory_version") or "",
        "stores": stores,
        "audit_log_pii": bool(receipt.get("audit_log_pii")),
        "status": receipt.get("status") or "",
        "seq": receipt.get("seq") or 0,
        "prev_hash": receipt.get("prev_hash") or "",
    }
    if fmt >= 3:
        c["identifiers_shred_at"] = _time_or_empty(receipt.get("identifiers_shred_at"))
    if fmt >= 4:
        c["review"] = [{"store": i.get("store") or "", "kind": i.get("kind") or "", "item": i.get("item") or ""}
                       for i in _list(receipt.get("review"))]
    return c


def canonical_addendum(addendum: Record) -> Dict[str, Any]:
    """An addendum's canonical form; ``record: "addendum"`` keeps it from ever equalling a
    receipt's. An addendum recording a review decision (one with ``review``) is v 2: the
    decision ``{store, kind, item, decision, reason}`` between ``stores`` and ``seq``."""
    review = addendum.get("review")
    c: Dict[str, Any] = {
        "v": 2 if review else 1,
        "record": "addendum",
        "addendum_id": addendum.get("addendum_id") or "",
        "receipt_id": addendum.get("receipt_id") or "",
        "request_id": addendum.get("request_id") or "",
        "tenant_id": addendum.get("tenant_id") or "",
        "type": addendum.get("type") or "",
        "purpose": addendum.get("purpose") or "",
        "pass": addendum.get("pass") or "",
        "at": _required_time(addendum, "at"),
        "stores": [{"store": s.get("store") or "", "status": s.get("status") or "",
                    "deleted": s.get("deleted") or 0, "remaining": s.get("remaining") or 0,
                    "unexamined": s.get("unexamined") or 0}
                   for s in _list(addendum.get("stores"))],
    }
    if review:
        c["review"] = {k: review.get(k) or "" for k in ("store", "kind", "item", "decision", "reason")}
    c["seq"] = addendum.get("seq") or 0
    c["prev_hash"] = addendum.get("prev_hash") or ""
    return c


def is_addendum(record: Record) -> bool:
    return "addendum_id" in record


def canonical(record: Record) -> Dict[str, Any]:
    """The canonical form of a receipt or an addendum (one with ``addendum_id``)."""
    return canonical_addendum(record) if is_addendum(record) else canonical_receipt(record)


# Go's encoding/json escapes these besides '"', '\\' and control characters.
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029",
               '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _encode_string(s: str, out: List[str]) -> None:
    out.append('"')
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        elif "\ud800" <= ch <= "\udfff":
            out.append("\ufffd")  # invalid UTF-8 becomes U+FFFD, as Go writes it
        else:
            out.append(ch)
    out.append('"')


def _encode(value: Any, out: List[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if not value.is_integer():
            raise VerificationError("a number of the canonical form is not an integer")
        out.append(str(int(value)))
    elif isinstance(value, str):
        _encode_string(value, out)
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            _encode_string(k, out)
            out.append(":")
            _encode(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _encode(v, out)
        out.append("]")
    else:
        raise VerificationError("cannot encode a %s in the canonical form" % type(value).__name__)


def encode(value: Any) -> bytes:
    """JSON bytes as Go's encoding/json writes them: no whitespace, members in the mapping's
    order, UTF-8, and <, >, &, U+2028, U+2029 escaped."""
    out: List[str] = []
    _encode(value, out)
    return "".join(out).encode("utf-8")


def record_hash(record: Record) -> str:
    """The lower-case hex SHA-256 of a receipt's or addendum's canonical form."""
    return hashlib.sha256(encode(canonical(record))).hexdigest()


def chain_mac_key(chain_key: bytes) -> bytes:
    """HKDF-SHA-256 of the chain key (empty salt, info "lethe receipt chain v1", 32 bytes)."""
    prk = hmac.new(b"\x00" * hashlib.sha256().digest_size, chain_key, hashlib.sha256).digest()
    return hmac.new(prk, CHAIN_MAC_INFO + b"\x01", hashlib.sha256).digest()


def chain_mac(chain_key: bytes, hash_hex: str) -> str:
    """The chain MAC of a record whose hash is hash_hex, under the chain key's bytes."""
    return hmac.new(chain_mac_key(chain_key), hash_hex.encode("ascii"), hashlib.sha256).hexdigest()


def read_chain_key(path: str) -> bytes:
    """A chain key file's bytes, as LETHE_CHAIN_KEY would hold them (a trailing newline dropped)."""
    with open(path, "rb") as f:
        return f.read().rstrip(b"\r\n")


def _kind(record: Record) -> str:
    return "addendum" if is_addendum(record) else "receipt"


def verify_record(record: Record, previous: Optional[Record] = None,
                  chain_keys: Optional[Mapping[str, bytes]] = None) -> str:
    """Recompute record's hash and raise VerificationError unless it equals record["hash"];
    with previous, also unless record's prev_hash links to previous's hash and its seq
    follows; with chain_keys (key id → key bytes), also unless its chain_mac verifies under
    the key its chain_key_id names. Returns the hash."""
    seq = record.get("seq")
    got = record_hash(record)
    if not hmac.compare_digest(got, str(record.get("hash") or "")):
        raise VerificationError("%s at seq %s: hash does not match its content" % (_kind(record), seq), seq)
    if previous is not None:
        if record.get("prev_hash") != previous.get("hash"):
            raise VerificationError("%s at seq %s: prev_hash does not link to the record before it" % (_kind(record), seq), seq)
        if seq != (previous.get("seq") or 0) + 1:
            raise VerificationError("%s at seq %s follows seq %s" % (_kind(record), seq, previous.get("seq")), seq)
    if chain_keys is not None:
        kid, mac = record.get("chain_key_id") or "", record.get("chain_mac") or ""
        if not mac:
            raise VerificationError("%s at seq %s carries no chain_mac" % (_kind(record), seq), seq)
        if kid not in chain_keys:
            raise VerificationError("%s at seq %s: chain_mac is under key %r, which was not given" % (_kind(record), seq, kid), seq)
        if not hmac.compare_digest(chain_mac(chain_keys[kid], got), mac):
            raise VerificationError("%s at seq %s: chain_mac does not verify under key %r" % (_kind(record), seq, kid), seq)
    return got


@dataclass(frozen=True)
class ChainReport:
    """What verify_chain checked: the number of receipts and addenda, the head's seq and
    hash, and the seq of the last record without a chain MAC (0: every record has one)."""

    receipts: int
    addenda: int
    head_seq: int
    head_hash: str
    last_unmacced_seq: int


def verify_chain(records: Iterable[Record], chain_keys: Optional[Mapping[str, bytes]] = None,
                 complete: bool = True) -> ChainReport:
    """Verify a tenant's chain of receipts and addenda, in any order: one tenant, every
    hash recomputed, seq consecutive, every prev_hash linking to the record before it.
    With complete (the default) the chain must start at seq 1 with an empty prev_hash.
    With chain_keys, every chain_mac present must verify and the head must carry one
    (records linked before chain keys existed carry none)."""
    ordered: Sequence[Record] = sorted(records, key=lambda r: r.get("seq") or 0)
    if not ordered:
        raise VerificationError("no records to verify")
    tenants = {r.get("tenant_id") for r in ordered}
    if len(tenants) != 1:
        raise VerificationError("records of %d tenants in one chain" % len(tenants))
    first = ordered[0]
    if complete and (first.get("seq") != 1 or first.get("prev_hash")):
        raise VerificationError("the chain does not start at seq 1 with an empty prev_hash", first.get("seq"))
    last_unmacced = 0
    prev: Optional[Record] = None
    for r in ordered:
        verify_record(r, prev)
        if r.get("chain_mac"):
            if chain_keys is not None:
                verify_record(r, None, chain_keys)
        else:
            last_unmacced = r.get("seq") or 0
        prev = r
    head = ordered[-1]
    if chain_keys is not None and not head.get("chain_mac"):
        raise VerificationError("the chain's head carries no chain_mac", head.get("seq"))
    addenda = sum(1 for r in ordered if is_addendum(r))
    return ChainReport(receipts=len(ordered) - addenda, addenda=addenda, head_seq=head.get("seq") or 0,
                       head_hash=str(head.get("hash")), last_unmacced_seq=last_unmacced)
