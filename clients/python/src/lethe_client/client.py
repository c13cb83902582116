"""The intake's HTTP API: submit, status, receipts, chain, suppression checks."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .errors import (ErasureNotCompleted, InvalidInput, LetheError, NotFound, VerificationError,
                     WaitTimeout, api_error)
from .receipt import ChainReport, verify_chain, verify_record
from .validate import MAX_SESSIONS, validate_request, validate_sessions, validate_tenant

# States after which no receipt comes without someone acting (a re-drive, a confirmation).
STOPPED_STATES = frozenset({"FAILED", "INCOMPLETE", "CANCELLED", "REJECTED", "PREVIEWED"})


@dataclass(frozen=True)
class Submission:
    """The intake's 202 answer to a submission."""

    request_id: str
    subject_hash: str
    key_id: str
    due_at: str
    state: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SuppressionResult:
    """One identifier's answer, in the order asked; it never names the identifier."""

    pseudonym: str
    suppressed: bool
    by: str = ""
    request_id: str = ""
    receipt_id: str = ""
    suppressed_at: str = ""
    lifted: bool = False


@dataclass(frozen=True)
class SuppressionAnswer:
    tenant_id: str
    key_id: str
    subjects: Sequence[SuppressionResult]
    sessions: Sequence[SuppressionResult]

    @property
    def any_suppressed(self) -> bool:
        """True when any identifier asked about was erased: do not write the data."""
        return any(r.suppressed for r in self.subjects) or any(r.suppressed for r in self.sessions)


@dataclass(frozen=True)
class ChainVerification:
    """A tenant's chain verified here (``local``) beside the intake's own verdict
    (``server``, GET /v1/tenants/{tenant}/chain)."""

    local: ChainReport
    server: Mapping[str, Any]


def _result(r: Mapping[str, Any]) -> SuppressionResult:
    return SuppressionResult(pseudonym=r.get("pseudonym", ""), suppressed=bool(r.get("suppressed")),
                             by=r.get("by", ""), request_id=r.get("request_id", ""),
                             receipt_id=r.get("receipt_id", ""), suppressed_at=r.get("suppressed_at", ""),
                             lifted=bool(r.get("lifted")))


class LetheClient:
    """A client of Lethe's intake API at base_url, authenticated with a bearer token (None:
    a deployment running without authentication). Every refusal raises an APIError subclass
    carrying the intake's reason; nothing is dropped silently."""

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 10.0,
                 user_agent: str = "lethe-client-python") -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise InvalidInput("base_url must be an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.user_agent = user_agent

    # --- transport -------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None,
              query: Optional[Mapping[str, str]] = None, headers: Optional[Mapping[str, str]] = None) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", self.user_agent)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise self._refusal(e, method, path) from None
        except urllib.error.URLError as e:
            raise LetheError("%s %s: intake unreachable: %s" % (method, path, e.reason)) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise LetheError("%s %s: the answer is not JSON" % (method, path)) from None

    @staticmethod
    def _refusal(e: urllib.error.HTTPError, method: str, path: str) -> Exception:
        reason = ""
        try:
            raw = e.read()
            answer = json.loads(raw) if raw else None
            if isinstance(answer, dict) and isinstance(answer.get("error"), str):
                reason = answer["error"]
        except (ValueError, OSError):
            pass
        retry_after = None
        ra = e.headers.get("Retry-After") if e.headers else None
        if ra:
            try:
                retry_after = float(ra)
            except ValueError:
                pass
        return api_error(e.code, reason, method, path, retry_after)

    @staticmethod
    def _path_id(request_id: str) -> str:
        if not isinstance(request_id, str) or not request_id.strip():
            raise InvalidInput("request_id is empty")
        return urllib.parse.quote(request_id, safe="")

    # --- erasures --------------------------------------------------------------------

    def submit(self, tenant: str, subject_id: str, session_ids: Iterable[str] = (), *,
               regulation: str = "GDPR", scope: str = "SUBJECT", idempotency_key: Optional[str] = None,
               dry_run: bool = False) -> Submission:
        """POST /v1/erasures. With idempotency_key, submitting again answers the first
        submission's request. A TENANT scope request names no subject (pass "")."""
        sessions = validate_request(tenant, subject_id, session_ids, scope, regulation, idempotency_key or "")
        body: Dict[str, Any] = {"tenant_id": tenant, "subject_id": subject_id, "session_ids": sessions,
                                "regulation": regulation, "scope": scope}
        if dry_run:
            body["dry_run"] = True
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        a = self._call("POST", "/v1/erasures", body, headers=headers)
        return Submission(request_id=a["request_id"], subject_hash=a.get("subject_hash", ""),
                          key_id=a.get("key_id", ""), due_at=a.get("due_at", ""), state=a.get("state", ""), raw=a)

    def status(self, request_id: str) -> Dict[str, Any]:
        """GET /v1/erasures/{id}: state, per-store status, overdue."""
        st: Dict[str, Any] = self._call("GET", "/v1/erasures/" + self._path_id(request_id))
        return st

    def find(self, tenant: str, idempotency_key: str) -> Optional[Dict[str, Any]]:
        """The status of tenant's request submitted with idempotency_key (over HTTP or
        erasure.intake), or None while there is none."""
        validate_tenant(tenant)
        if not idempotency_key:
            raise InvalidInput("idempotency_key is empty")
        found = self._call("GET", "/v1/erasures", query={"tenant": tenant, "idempotency_key": idempotency_key})
        reqs = found.get("requests") or []
        return reqs[0] if reqs else None

    def list(self, tenant: str, state: Optional[str] = None, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """GET /v1/erasures?tenant=: the tenant's requests' statuses."""
        validate_tenant(tenant)
        q = {"tenant": tenant}
        if state:
            q["state"] = state
        if limit is not None:
            q["limit"] = str(limit)
        return list(self._call("GET", "/v1/erasures", query=q).get("requests") or [])

    def receipt(self, request_id: str, verify: bool = True) -> Dict[str, Any]:
        """GET /v1/erasures/{id}/receipt (NotFound until it exists). With verify (the
        default) its hash is recomputed and a mismatch raises VerificationError."""
        r: Dict[str, Any] = self._call("GET", "/v1/erasures/%s/receipt" % self._path_id(request_id))
        if verify:
            verify_record(r)
        return r

    def addenda(self, request_id: str, verify: bool = True) -> List[Dict[str, Any]]:
        """GET /v1/erasures/{id}/addenda, oldest first, each hash recomputed with verify."""
        out = list(self._call("GET", "/v1/erasures/%s/addenda" % self._path_id(request_id)).get("addenda") or [])
        if verify:
            for a in out:
                verify_record(a)
        return out

    def wait_receipt(self, request_id: str, timeout: float = 60.0, poll: float = 0.2) -> Dict[str, Any]:
        """Poll the request's status until it is COMPLETE and return its verified receipt.
        Raises ErasureNotCompleted when it stops in a state that issues no receipt on its
        own (FAILED, INCOMPLETE, CANCELLED, REJECTED, PREVIEWED), WaitTimeout otherwise."""
        deadline = time.monotonic() + timeout
        state = ""
        while True:
            st = self.status(request_id)
            state = st.get("state", "")
            done = self._settled(request_id, st)
            if done is not None:
                return done
            if time.monotonic() >= deadline:
                raise WaitTimeout("request " + request_id, state, timeout)
            time.sleep(poll)

    def wait_receipt_by_key(self, tenant: str, idempotency_key: str, timeout: float = 60.0,
                            poll: float = 0.2) -> Dict[str, Any]:
        """wait_receipt for the request tenant submitted with idempotency_key, as a producer
        on erasure.intake finds it. A record the intake refused answers REJECTED, which
        raises ErasureNotCompleted with the intake's reason; one it cannot attribute to the
        tenant and key (no readable tenant or key, a producer that may not act for the
        tenant) never appears, and the wait ends in WaitTimeout with an empty state
        (dead_letters() lists it with its reason)."""
        deadline = time.monotonic() + timeout
        state = ""
        while True:
            st = self.find(tenant, idempotency_key)
            if st is not None:
                state = st.get("state", "")
                done = self._settled(st["request_id"], st)
                if done is not None:
                    return done
            if time.monotonic() >= deadline:
                raise WaitTimeout("idempotency key " + idempotency_key, state, timeout)
            time.sleep(poll)

    def _settled(self, request_id: str, st: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        state = st.get("state", "")
        if state == "COMPLETE":
            try:
                return self.receipt(request_id)
            except NotFound:
                return None  # the status can run ahead of the receipt's read by a moment
        if state in STOPPED_STATES:
            raise ErasureNotCompleted(request_id, state, dict(st))
        return None

    def dead_letters(self) -> List[Dict[str, Any]]:
        """GET /v1/dead-letters: the dead letters of the caller's tenants, each
        ``{"topic", "entry"}`` with the entry's ``reason``, ``at`` and a summary that never
        holds an identifier. A record the intake refused on erasure.intake is found here."""
        found: Dict[str, Any] = self._call("GET", "/v1/dead-letters")
        return list(found.get("dead_letters") or [])

    # --- the chain -------------------------------------------------------------------

    def chain_state(self, tenant: str) -> Dict[str, Any]:
        """GET /v1/tenants/{tenant}/chain: the intake's verdict on the tenant's chain."""
        validate_tenant(tenant)
        state: Dict[str, Any] = self._call("GET", "/v1/tenants/%s/chain" % tenant)
        return state

    def chain_records(self, tenant: str) -> List[Dict[str, Any]]:
        """Every receipt and addendum of the tenant's requests, ordered by seq."""
        records: List[Dict[str, Any]] = []
        for st in self.list(tenant):
            if not st.get("receipt_id"):
                continue
            records.append(self.receipt(st["request_id"], verify=False))
            records.extend(self.addenda(st["request_id"], verify=False))
        records.sort(key=lambda r: r.get("seq") or 0)
        return records

    def verify_chain(self, tenant: str, chain_keys: Optional[Mapping[str, bytes]] = None) -> ChainVerification:
        """Fetch the tenant's receipts and addenda and verify the chain here: every hash
        recomputed, seq from 1 without gaps, every prev_hash linking, and with chain_keys
        every chain MAC; then require the intake's own verdict to agree (verified, the same
        number of receipts). Raises VerificationError otherwise."""
        records = self.chain_records(tenant)
        if not records:
            raise VerificationError("tenant has no receipts")
        report = verify_chain(records, chain_keys)
        server = self.chain_state(tenant)
        if not server.get("verified"):
            raise VerificationError("the intake does not verify the chain: %s" % server.get("error", ""))
        if server.get("receipts") != report.receipts:
            raise VerificationError("the intake counts %s receipts, %d were fetched" % (server.get("receipts"), report.receipts))
        return ChainVerification(local=report, server=server)

    # --- suppression -----------------------------------------------------------------

    def check_suppressed(self, tenant: str, subject_ids: Iterable[str] = (),
                         session_ids: Iterable[str] = ()) -> SuppressionAnswer:
        """POST /v1/suppressions/check: whether each identifier was erased, in the order
        given (at most 1000 identifiers a call). Call it before writing a subject's data;
        any exception means: do not write."""
        validate_tenant(tenant)
        subjects = validate_sessions(subject_ids, "subject_ids[]")
        sessions = validate_sessions(session_ids, "session_ids[]")
        if not subjects and not sessions:
            raise InvalidInput("no subject_ids or session_ids to check")
        if len(subjects) + len(sessions) > MAX_SESSIONS:
            raise InvalidInput("more than %d identifiers in one check" % MAX_SESSIONS)
        a = self._call("POST", "/v1/suppressions/check",
                       {"tenant_id": tenant, "subject_ids": subjects, "session_ids": sessions})
        out = SuppressionAnswer(tenant_id=a.get("tenant_id", ""), key_id=a.get("key_id", ""),
                                subjects=[_result(r) for r in a.get("subjects") or []],
                                sessions=[_result(r) for r in a.get("sessions") or []])
        if len(out.subjects) != len(subjects) or len(out.sessions) != len(sessions):
            raise LetheError("suppression check answered %d+%d results for %d+%d identifiers"
                             % (len(out.subjects), len(out.sessions), len(subjects), len(sessions)))
        return out
