"""The exceptions of lethe_client. None of their messages holds a subject or session id."""

from __future__ import annotations

from typing import Any, Dict, Optional


class LetheError(Exception):
    """Every error this package raises derives from it."""


class InvalidInput(LetheError, ValueError):
    """An argument Lethe would refuse, caught before anything is sent. The message names the
    field and the rule, never the value."""


class APIError(LetheError):
    """The intake refused a call: ``status`` is the HTTP status, ``reason`` the ``error``
    member of the intake's JSON body (empty when the body had none)."""

    def __init__(self, status: int, reason: str, method: str, path: str,
                 retry_after: Optional[float] = None) -> None:
        self.status = status
        self.reason = reason
        self.method = method
        self.path = path
        self.retry_after = retry_after
        msg = "%s %s: %d" % (method, path, status)
        if reason:
            msg += " " + reason
        super().__init__(msg)


class BadRequest(APIError):
    """400: the request is invalid; ``reason`` says why."""


class Unauthorized(APIError):
    """401: no credential, or one the intake does not accept."""


class Forbidden(APIError):
    """403: the credential may not act for the tenant (or lacks a role)."""


class NotFound(APIError):
    """404: no such request or receipt (yet)."""


class Conflict(APIError):
    """409: the idempotency key was used with another subject, scope or regulation."""


class PayloadTooLarge(APIError):
    """413: the body is over the intake's limit."""


class RateLimited(APIError):
    """429: the tenant is over its rate; ``retry_after`` is the server's Retry-After in seconds."""


class Unavailable(APIError):
    """503: a component Lethe needs is down; ``reason`` names it. Nothing was accepted."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
              413: PayloadTooLarge, 429: RateLimited, 503: Unavailable}


def api_error(status: int, reason: str, method: str, path: str,
              retry_after: Optional[float] = None) -> APIError:
    """The APIError subclass for status."""
    cls = _BY_STATUS.get(status, APIError)
    return cls(status, reason, method, path, retry_after)


class ErasureNotCompleted(LetheError):
    """The request reached a state that issues no receipt without someone acting
    (FAILED, INCOMPLETE, CANCELLED, REJECTED, PREVIEWED). ``status`` is its last status;
    ``reason`` is, for an erasure.intake record the intake refused (REJECTED), why (the
    field at fault and what was expected, never a value), else empty."""

    def __init__(self, request_id: str, state: str, status: Dict[str, Any]) -> None:
        self.request_id = request_id
        self.state = state
        self.status = status
        rejection = status.get("rejection")
        self.reason = str(rejection.get("reason") or "") if isinstance(rejection, dict) else ""
        msg = "request %s ended %s without a receipt" % (request_id, state)
        if self.reason:
            msg += ": " + self.reason
        super().__init__(msg)


class WaitTimeout(LetheError, TimeoutError):
    """No receipt within the timeout. ``state`` is the last state seen (empty when the
    request was never found, as when a Kafka record was dead-lettered)."""

    def __init__(self, what: str, state: str, timeout: float) -> None:
        self.what = what
        self.state = state
        self.timeout = timeout
        seen = ("last state %s" % state) if state else "the request was never found"
        super().__init__("no receipt for %s within %.1fs (%s)" % (what, timeout, seen))


class VerificationError(LetheError):
    """A receipt, addendum or chain failed verification. ``seq`` is the record's position in
    its tenant's chain where known."""

    def __init__(self, message: str, seq: Optional[int] = None) -> None:
        self.seq = seq
        super().__init__(message)


class ProduceError(LetheError):
    """The broker did not acknowledge an erasure.intake record."""


class LineageError(LetheError, ValueError):
    """A document or node cannot be stamped with what the inventory's locators need."""
