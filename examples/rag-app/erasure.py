"""The one place where the RAG app asks Lethe to erase a person and waits for the receipt.

Standard library only: POST /v1/erasures, then GET /v1/erasures/{id} until the request
settles, then GET /v1/erasures/{id}/receipt. Nothing here logs an identifier.
"""

import json
import time
import urllib.error
import urllib.request
import uuid

SETTLED = {"COMPLETE", "INCOMPLETE", "FAILED"}


class ErasureNotComplete(Exception):
    """The request settled without a COMPLETE receipt; the status names the stores."""

    def __init__(self, request_id, status):
        super().__init__(f"erasure {request_id} ended {status.get('state')}")
        self.request_id = request_id
        self.status = status


def submit_and_wait(base_url, tenant, subject, sessions, token=None, timeout=60.0, regulation="GDPR"):
    """Submits an erasure of subject (and every one of its sessions) in tenant to the Lethe
    intake at base_url and returns its receipt (a dict) once the request is COMPLETE.
    Raises ErasureNotComplete when it settles otherwise, TimeoutError after timeout s."""
    headers = {"Content-Type": "application/json", "Idempotency-Key": "ragapp-" + uuid.uuid4().hex}
    if token:
        headers["Authorization"] = "Bearer " + token

    def call(method, path, body=None):
        req = urllib.request.Request(base_url.rstrip("/") + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)

    accepted = call("POST", "/v1/erasures", {"tenant_id": tenant, "subject_id": subject,
                                             "session_ids": sorted(set(sessions)), "regulation": regulation})
    request_id = accepted["request_id"]
    deadline = time.monotonic() + timeout
    while True:
        status = call("GET", f"/v1/erasures/{request_id}")
        if status.get("state") in SETTLED:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"erasure {request_id} still {status.get('state')} after {timeout}s")
        time.sleep(0.1)
    if status["state"] != "COMPLETE":
        raise ErasureNotComplete(request_id, status)
    while True:  # the receipt follows the COMPLETE state closely
        try:
            return call("GET", f"/v1/erasures/{request_id}/receipt")
        except urllib.error.HTTPError as e:
            if e.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)
