"""The client's handling of the intake's answers, against a local HTTP server that answers
as the intake does (the real intake is in test_stack.py)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lethe_client import (APIError, BadRequest, ErasureNotCompleted, Forbidden, InvalidInput, LetheClient,
                          LetheError, RateLimited, Unavailable, WaitTimeout)


class _Intake(BaseHTTPRequestHandler):
    answers = {}  # (method, path) -> (status, headers, body bytes)
    seen = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append((self.command, self.path, dict(self.headers), body))
        status, headers, out = self.answers.get((self.command, self.path.split("?")[0]), (404, {}, b'{"error":"no such request"}'))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture()
def intake():
    _Intake.answers, _Intake.seen = {}, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Intake)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield _Intake, LetheClient("http://127.0.0.1:%d/" % srv.server_address[1], token="t0k", timeout=5)
    srv.shutdown()
    srv.server_close()


def _json(status, obj, **headers):
    return status, dict({"Content-Type": "application/json"}, **headers), json.dumps(obj).encode()


def test_submit_sends_the_body_token_and_idempotency_key(intake):
    srv, c = intake
    srv.answers[("POST", "/v1/erasures")] = _json(202, {"request_id": "er_1", "subject_hash": "ab", "key_id": "k1",
                                                        "due_at": "2027-01-01T00:00:00Z"})
    s = c.submit("acme", "cust-42", ["s-1"], idempotency_key="idem-1")
    assert (s.request_id, s.key_id, s.due_at) == ("er_1", "k1", "2027-01-01T00:00:00Z")
    method, path, headers, body = srv.seen[0]
    assert (method, path) == ("POST", "/v1/erasures")
    assert headers["Authorization"] == "Bearer t0k" and headers["Idempotency-Key"] == "idem-1"
    assert json.loads(body) == {"tenant_id": "acme", "subject_id": "cust-42", "session_ids": ["s-1"],
                                "regulation": "GDPR", "scope": "SUBJECT"}


@pytest.mark.parametrize("status,cls", [(400, BadRequest), (403, Forbidden), (503, Unavailable), (418, APIError)])
def test_refusals_carry_the_intakes_reason(intake, status, cls):
    srv, c = intake
    srv.answers[("POST", "/v1/erasures")] = _json(status, {"error": "reason %d" % status})
    with pytest.raises(cls) as e:
        c.submit("acme", "cust-42")
    assert (e.value.status, e.value.reason) == (status, "reason %d" % status)
    assert "reason %d" % status in str(e.value) and "cust-42" not in str(e.value)


def test_rate_limit_carries_retry_after(intake):
    srv, c = intake
    srv.answers[("POST", "/v1/suppressions/check")] = _json(429, {"error": "rate limited"}, **{"Retry-After": "3"})
    with pytest.raises(RateLimited) as e:
        c.check_suppressed("acme", ["cust-42"])
    assert e.value.retry_after == 3.0 and e.value.reason == "rate limited"


def test_a_body_without_json_still_raises_with_the_status(intake):
    srv, c = intake
    srv.answers[("GET", "/v1/erasures/er_1")] = (502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>")
    with pytest.raises(APIError) as e:
        c.status("er_1")
    assert (e.value.status, e.value.reason) == (502, "")


def test_invalid_input_is_refused_before_sending(intake):
    srv, c = intake
    for call in (lambda: c.submit("acme", " "), lambda: c.submit("acme", "\u200b"), lambda: c.submit("ACME", "cust-42"),
                 lambda: c.check_suppressed("acme", []), lambda: c.check_suppressed("acme", [""]),
                 lambda: c.status(""), lambda: c.find("acme", "")):
        with pytest.raises(InvalidInput):
            call()
    assert srv.seen == []


def test_a_suppression_answer_must_match_the_question(intake):
    srv, c = intake
    srv.answers[("POST", "/v1/suppressions/check")] = _json(200, {"tenant_id": "acme", "key_id": "k1", "subjects": [
        {"pseudonym": "p1", "suppressed": True, "by": "SUBJECT", "request_id": "er_1"}], "sessions": []})
    a = c.check_suppressed("acme", ["cust-42"])
    assert a.any_suppressed and a.subjects[0].by == "SUBJECT"
    with pytest.raises(LetheError, match="results"):
        c.check_suppressed("acme", ["cust-42", "cust-7"])


def test_wait_stops_at_a_state_that_issues_no_receipt(intake):
    srv, c = intake
    srv.answers[("GET", "/v1/erasures/er_1")] = _json(200, {"request_id": "er_1", "state": "INCOMPLETE"})
    with pytest.raises(ErasureNotCompleted) as e:
        c.wait_receipt("er_1", timeout=5, poll=0.01)
    assert e.value.state == "INCOMPLETE"


def test_a_rejected_kafka_record_raises_with_the_intakes_reason(intake):
    srv, c = intake
    srv.answers[("GET", "/v1/erasures")] = _json(200, {"requests": [{"request_id": "er_2", "state": "REJECTED",
        "rejection": {"reason": "regulation must be one of GDPR", "at": "2026-12-06T10:00:00Z"}}]})
    with pytest.raises(ErasureNotCompleted) as e:
        c.wait_receipt_by_key("acme", "idem-1", timeout=5, poll=0.01)
    assert (e.value.request_id, e.value.state) == ("er_2", "REJECTED")
    assert e.value.reason == "regulation must be one of GDPR" and e.value.reason in str(e.value)


def test_wait_times_out_with_the_last_state(intake):
    srv, c = intake
    srv.answers[("GET", "/v1/erasures/er_1")] = _json(200, {"request_id": "er_1", "state": "IN_PROGRESS"})
    with pytest.raises(WaitTimeout) as e:
        c.wait_receipt("er_1", timeout=0.2, poll=0.05)
    assert e.value.state == "IN_PROGRESS" and isinstance(e.value, TimeoutError)
    srv.answers[("GET", "/v1/erasures")] = _json(200, {"requests": []})
    with pytest.raises(WaitTimeout) as e:
        c.wait_receipt_by_key("acme", "idem-1", timeout=0.2, poll=0.05)
    assert e.value.state == "" and "never found" in str(e.value)


def test_an_unreachable_intake_is_an_error():
    c = LetheClient("http://127.0.0.1:9", timeout=2)
    with pytest.raises(LetheError, match="unreachable"):
        c.status("er_1")
