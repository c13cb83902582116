"""The one place where the RAG app asks Lethe to erase a person and waits for the receipt,
through the Python client (clients/python, lethe_client). Nothing here logs an identifier.
"""

import uuid

from lethe_client import LetheClient, record_hash


def submit_and_wait(base_url, tenant, subject, sessions, token=None, timeout=60.0, regulation="GDPR"):
    """Submits an erasure of subject (and every one of its sessions) in tenant to the Lethe
    intake at base_url and returns its receipt (a dict) once the request is COMPLETE, its
    hash recomputed by the client, and the tenant's chain verified. The client raises
    ErasureNotCompleted when the request settles otherwise, WaitTimeout after timeout s."""
    client = LetheClient(base_url, token=token)
    sub = client.submit(tenant, subject, sorted(set(sessions)), regulation=regulation,
                        idempotency_key="ragapp-" + uuid.uuid4().hex)
    receipt = client.wait_receipt(sub.request_id, timeout=timeout)  # verified: its hash recomputed
    chain = client.verify_chain(tenant)
    return {"receipt": receipt, "hash_recomputed": record_hash(receipt), "chain_records": chain.local.receipts + chain.local.addenda}
