"""Lethe's identifier rules, checked before anything leaves the process.

They are the intake's rules (an HTTP submission is checked again there, and its refusal
surfaces as BadRequest with the intake's reason); checking them here matters most for
erasure.intake over Kafka, where a refused record is dead-lettered instead of answered.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable, List

from .errors import InvalidInput

MAX_TENANT_LEN = 63
MAX_ID_BYTES = 256
MAX_SESSIONS = 1000
MAX_IDEMPOTENCY_KEY_BYTES = 200
SCOPES = ("SUBJECT", "TENANT")

_TENANT = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")


def validate_tenant(tenant: object) -> str:
    """Return tenant if it is 1-63 characters of [a-z0-9_-] starting with a letter or
    digit; raise InvalidInput otherwise."""
    if not isinstance(tenant, str):
        raise InvalidInput("tenant_id must be a string")
    if not tenant or len(tenant) > MAX_TENANT_LEN:
        raise InvalidInput("tenant_id must be 1-%d characters" % MAX_TENANT_LEN)
    if not _TENANT.match(tenant):
        raise InvalidInput("tenant_id may hold only a-z, 0-9, '_' and '-', starting with a letter or digit")
    return tenant


def _blank_char(ch: str) -> bool:
    # Go's unicode.IsSpace (White_Space) or format characters (Cf) such as U+200B.
    return ch.isspace() or ch in "\u0085\u00a0" or unicodedata.category(ch) == "Cf"


def validate_id(field: str, value: object) -> str:
    """Return value if it is a usable subject or session id: a non-empty string of valid
    UTF-8, at most 256 bytes, without control characters, and not blank (only white space
    or invisible format characters). Ids are never trimmed: " alice" is not "alice"."""
    if not isinstance(value, str):
        raise InvalidInput("%s must be a string" % field)
    if value == "":
        raise InvalidInput("%s is empty" % field)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput("%s is not valid UTF-8 (it holds a lone surrogate)" % field) from None
    if size > MAX_ID_BYTES:
        raise InvalidInput("%s is longer than %d bytes" % (field, MAX_ID_BYTES))
    blank = True
    for ch in value:
        if unicodedata.category(ch) == "Cc":
            raise InvalidInput("%s holds a control character" % field)
        blank = blank and _blank_char(ch)
    if blank:
        raise InvalidInput("%s is blank (only white space or invisible characters)" % field)
    return value


def validate_sessions(session_ids: Iterable[str], field: str = "session_ids[]") -> List[str]:
    """Return session_ids as a list, each checked with validate_id, at most 1000."""
    if isinstance(session_ids, (str, bytes)):
        raise InvalidInput("session_ids must be a list of strings, not one string")
    out = list(session_ids)
    if len(out) > MAX_SESSIONS:
        raise InvalidInput("more than %d %s" % (MAX_SESSIONS, field.rstrip("[]")))
    for s in out:
        validate_id(field, s)
    return out


def validate_request(tenant: str, subject_id: str, session_ids: Iterable[str], scope: str,
                     regulation: str, idempotency_key: str = "") -> List[str]:
    """Check a submission as the intake does; return its session ids as a list."""
    validate_tenant(tenant)
    if not isinstance(regulation, str) or not regulation.strip():
        raise InvalidInput("regulation is empty")
    sessions = validate_sessions(session_ids)
    if scope == "SUBJECT":
        validate_id("subject_id", subject_id)
    elif scope == "TENANT":
        if subject_id or sessions:
            raise InvalidInput("a TENANT scope request names no subject_id or session_ids")
    else:
        raise InvalidInput("scope must be SUBJECT or TENANT")
    if not isinstance(idempotency_key, str):
        raise InvalidInput("idempotency_key must be a string")
    if len(idempotency_key.encode("utf-8", "surrogatepass")) > MAX_IDEMPOTENCY_KEY_BYTES:
        raise InvalidInput("idempotency_key is longer than %d bytes" % MAX_IDEMPOTENCY_KEY_BYTES)
    return sessions
