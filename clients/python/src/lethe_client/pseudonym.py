"""Lethe's keyed, tenant-scoped pseudonyms, as pkg/subject computes them.

A pseudonym is the lower-case hex HMAC-SHA-256, under the pseudonym key, of the parts
(tenant, subject) each prefixed with its length in bytes as an unsigned varint; a
session's is that of ("session", tenant, session). The same id in two tenants, or as a
subject and as a session, never shares a pseudonym.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Mapping, Optional

from .errors import InvalidInput
from .validate import validate_id, validate_tenant

MIN_KEY_LEN = 32


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _parts(*parts: str) -> bytes:
    b = bytearray()
    for p in parts:
        raw = p.encode("utf-8")
        b += _uvarint(len(raw))
        b += raw
    return bytes(b)


class PseudonymKey:
    """A pseudonym key (LETHE_HMAC_KEY) and its id (LETHE_HMAC_KEY_ID). Its repr never
    shows the secret."""

    __slots__ = ("_id", "_secret")

    def __init__(self, key_id: str, secret: bytes) -> None:
        if not key_id:
            raise InvalidInput("the pseudonym key id is empty")
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if len(secret) < MIN_KEY_LEN:
            raise InvalidInput("pseudonym key %r is %d bytes, need at least %d" % (key_id, len(secret), MIN_KEY_LEN))
        self._id = key_id
        self._secret = bytes(secret)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "PseudonymKey":
        """The key the services read: LETHE_HMAC_KEY, or the file LETHE_HMAC_KEY_FILE names
        (a trailing newline dropped), with id LETHE_HMAC_KEY_ID (default k1)."""
        env = os.environ if environ is None else environ
        secret = env.get("LETHE_HMAC_KEY", "").encode("utf-8")
        path = env.get("LETHE_HMAC_KEY_FILE", "")
        if not secret and path:
            with open(path, "rb") as f:
                secret = f.read().rstrip(b"\r\n")
        if not secret:
            raise InvalidInput("no pseudonym key: set LETHE_HMAC_KEY or LETHE_HMAC_KEY_FILE")
        return cls(env.get("LETHE_HMAC_KEY_ID") or "k1", secret)

    @property
    def key_id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return "PseudonymKey(%r, ****)" % self._id

    __str__ = __repr__

    def _sum(self, *parts: str) -> str:
        return hmac.new(self._secret, _parts(*parts), hashlib.sha256).hexdigest()

    def pseudonym(self, tenant: str, subject_id: str) -> str:
        """The pseudonym of subject_id in tenant (a receipt's subject_hash, an inventory's
        {subject_hash}, the value of a Qdrant store's hash_fields)."""
        validate_tenant(tenant)
        validate_id("subject_id", subject_id)
        return self._sum(tenant, subject_id)

    def session_pseudonym(self, tenant: str, session_id: str) -> str:
        """The pseudonym of a session id in tenant, as the suppression list holds it."""
        validate_tenant(tenant)
        validate_id("session_id", session_id)
        return self._sum("session", tenant, session_id)
