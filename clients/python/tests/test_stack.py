"""Against a running Lethe (pkg/embedded TestPythonClientPackage starts one): every call
of the package on the real intake, broker, Schema Registry and Qdrant."""

import time
import uuid

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import TextNode

from lethe_client import (BadRequest, Conflict, ErasureNotCompleted, Forbidden, InvalidInput, KafkaSubmitter, LetheClient, NotFound,
                          PseudonymKey, Stamper, Unauthorized, WaitTimeout, verify_record)

pytestmark = pytest.mark.stack


def _id(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


@pytest.fixture(scope="module")
def client(stack):
    return LetheClient(stack.url, stack.token)


@pytest.fixture(scope="module")
def key(stack):
    return PseudonymKey(stack.hmac_key_id, stack.hmac_key.encode())


def _check_receipt(stack, key, receipt, subject):
    assert receipt["status"] == "COMPLETE" and receipt["tenant_id"] == stack.tenant
    # The intake computed the pseudonym in Go; the client computes the same.
    assert receipt["subject_hash"] == key.pseudonym(stack.tenant, subject)
    assert subject not in str(receipt)
    assert verify_record(receipt, chain_keys=stack.chain_keys) == receipt["hash"]


def test_http_erasure_and_verified_receipt(stack, client, key):
    subject = _id("py-http")
    sub = client.submit(stack.tenant, subject, [_id("sess")], idempotency_key=_id("idem"))
    assert sub.request_id.startswith("er_") and sub.subject_hash == key.pseudonym(stack.tenant, subject)
    receipt = client.wait_receipt(sub.request_id, timeout=60)
    _check_receipt(stack, key, receipt, subject)
    assert receipt["request_id"] == sub.request_id
    assert {s["store"] for s in receipt["stores"]} >= {"qdrant", "redis", "dataset", "audit_log"}
    assert client.status(sub.request_id)["state"] == "COMPLETE"
    assert client.addenda(sub.request_id) == []


def test_idempotent_resubmission_and_conflict(stack, client):
    subject, idem = _id("py-idem"), _id("idem")
    first = client.submit(stack.tenant, subject, idempotency_key=idem)
    again = client.submit(stack.tenant, subject, idempotency_key=idem)
    assert again.request_id == first.request_id and again.due_at == first.due_at
    assert client.find(stack.tenant, idem)["request_id"] == first.request_id
    with pytest.raises(Conflict) as e:
        client.submit(stack.tenant, _id("py-other"), idempotency_key=idem)
    assert e.value.status == 409 and e.value.reason
    client.wait_receipt(first.request_id, timeout=60)


@pytest.mark.parametrize("encoding", ["json", "avro"])
def test_kafka_erasure(stack, client, key, encoding):
    registry = stack.registry if encoding == "avro" else None
    with KafkaSubmitter(stack.brokers, stack.token, registry_url=registry, source="lethe-client-test") as k:
        assert k.encoding == encoding
        subject = _id("py-kafka-" + encoding)
        idem = k.submit(stack.tenant, subject, [_id("sess")])
    receipt = client.wait_receipt_by_key(stack.tenant, idem, timeout=60)
    _check_receipt(stack, key, receipt, subject)


def _intake_dead_letters(client):
    return {(d["entry"]["partition"], d["entry"]["offset"]): d["entry"]
            for d in client.dead_letters() if d["topic"] == "erasure.intake.dlq"}


def test_kafka_record_the_intake_refuses_is_rejected_with_the_reason(stack, client):
    # Valid ids, a regulation the intake does not know: the record is dead-lettered, and
    # its key finds the refusal with the intake's reason.
    before = _intake_dead_letters(client)
    subject = _id("py-dlq")
    with KafkaSubmitter(stack.brokers, stack.token) as k:
        idem = k.submit(stack.tenant, subject, regulation="NO-SUCH-LAW")
    with pytest.raises(ErasureNotCompleted) as e:
        client.wait_receipt_by_key(stack.tenant, idem, timeout=60)
    assert e.value.state == "REJECTED" and "regulation" in e.value.reason
    assert subject not in str(e.value) and subject not in str(e.value.status)
    # The refusal is recorded as the record is dead-lettered; the dead letter may show a
    # moment later.
    new = {}
    deadline = time.monotonic() + 30
    while not new and time.monotonic() < deadline:
        new = {k: v for k, v in _intake_dead_letters(client).items() if k not in before}
        time.sleep(0.1)
    assert len(new) == 1
    (entry,) = new.values()
    assert "regulation" in entry["reason"] and entry["key"] == stack.tenant
    assert subject not in str(entry)


def test_kafka_record_of_a_tenant_the_producer_may_not_act_for_is_never_found(stack, client):
    # Not attributable to the tenant: the wait times out without a state; the dead
    # letter is not shown to this token either (it is the other tenant's).
    with KafkaSubmitter(stack.brokers, stack.token) as k:
        idem = k.submit(stack.other_tenant, _id("py-dlq"))
    with pytest.raises(WaitTimeout) as e:
        client.wait_receipt_by_key(stack.tenant, idem, timeout=2, poll=0.2)
    assert e.value.state == ""


def test_kafka_refuses_blank_ids_before_producing(stack):
    with KafkaSubmitter(stack.brokers, stack.token) as k:
        for subject in ("", " ", "\u200b"):
            with pytest.raises(InvalidInput):
                k.submit(stack.tenant, subject)


def test_suppression_check_after_erasure(stack, client, key):
    subject, session, fresh = _id("py-supp"), _id("sess"), _id("py-fresh")
    before = client.check_suppressed(stack.tenant, [subject], [session])
    assert not before.any_suppressed
    client.wait_receipt(client.submit(stack.tenant, subject, [session]).request_id, timeout=60)
    # The aggregator stores the entries right after the receipt: a check in between
    # answers not suppressed (docs/suppression.md), so the first answers may lag.
    deadline = time.monotonic() + 10
    a = client.check_suppressed(stack.tenant, [subject, fresh], [session])
    while not a.subjects[0].suppressed and time.monotonic() < deadline:
        time.sleep(0.1)
        a = client.check_suppressed(stack.tenant, [subject, fresh], [session])
    assert [r.suppressed for r in a.subjects] == [True, False] and [r.suppressed for r in a.sessions] == [True]
    assert a.subjects[0].by == "SUBJECT" and a.sessions[0].by == "SESSION" and a.any_suppressed
    assert a.subjects[0].receipt_id
    # The list holds the pseudonyms the client computes too.
    assert a.subjects[0].pseudonym == key.pseudonym(stack.tenant, subject)
    assert a.subjects[1].pseudonym == key.pseudonym(stack.tenant, fresh)
    assert a.sessions[0].pseudonym == key.session_pseudonym(stack.tenant, session)


def test_refusals_carry_the_intakes_reason(stack, client):
    with pytest.raises(BadRequest) as e:
        client.submit(stack.tenant, _id("py-bad"), regulation="NO-SUCH-LAW")
    assert e.value.status == 400 and "regulation" in e.value.reason
    with pytest.raises(Forbidden) as e:
        client.submit(stack.other_tenant, _id("py-bad"))
    assert e.value.status == 403 and e.value.reason
    with pytest.raises(Forbidden):
        client.check_suppressed(stack.other_tenant, [_id("py-bad")])
    with pytest.raises(Unauthorized) as e:
        LetheClient(stack.url, "not-a-token").submit(stack.tenant, _id("py-bad"))
    assert e.value.status == 401
    with pytest.raises(NotFound) as e:
        client.status("er_" + "0" * 32)
    assert e.value.reason
    with pytest.raises(NotFound):
        client.receipt("er_" + "0" * 32)
    with pytest.raises(InvalidInput):
        client.submit(stack.tenant, "\u3000")


def test_stamped_chunks_are_erased(stack, client, key):
    from qdrant_client import QdrantClient, models

    host, port = stack.qdrant.rsplit(":", 1)
    q = QdrantClient(host=host, grpc_port=int(port), prefer_grpc=True, check_compatibility=False, timeout=10)
    nodes_stamper = Stamper.from_inventory(stack.inventory, stack.tenant, key, store="qdrant")
    docs_stamper = Stamper.from_inventory(stack.inventory, stack.tenant, store="langchain_docs")
    (nodes_coll,) = nodes_stamper.collections()
    (docs_coll,) = docs_stamper.collections()
    for coll in (nodes_coll, docs_coll):
        if not q.collection_exists(coll):
            q.create_collection(coll, vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE))

    subject, session, other = _id("py-chunks"), _id("sess"), _id("py-kept")
    nodes = nodes_stamper.stamp_nodes([TextNode(text="her chunk %d" % i) for i in range(2)], subject, session)
    nodes.append(nodes_stamper.stamp_node(TextNode(text="legacy chunk"), session_id=session))
    kept_nodes = nodes_stamper.stamp_nodes([TextNode(text="his chunk %d" % i) for i in range(2)], other)
    docs = docs_stamper.stamp_documents([Document(page_content="her doc %d" % i) for i in range(2)], subject, session)
    kept_docs = docs_stamper.stamp_documents([Document(page_content="his doc")], other)
    # A chunk that names her by the keyed pseudonym alone is found only if the client's
    # pseudonym equals the one the intake computes.
    hashed = {f: v for f, v in nodes_stamper.fields(subject).items() if f in nodes_stamper.locators.hash_fields}
    assert hashed

    def points(payloads):
        return [models.PointStruct(id=str(uuid.uuid4()), vector=[1.0, float(i + 1)], payload=p)
                for i, p in enumerate(payloads)]

    # As LlamaIndex's Qdrant store writes a node (metadata at the top) and LangChain's a
    # document (metadata under "metadata").
    q.upsert(nodes_coll, points([dict(n.metadata, text=n.text) for n in nodes + kept_nodes] + [dict(hashed, text="x")]), wait=True)
    q.upsert(docs_coll, points([{"page_content": d.page_content, "metadata": d.metadata} for d in docs + kept_docs]), wait=True)

    def count(coll, field, value):
        f = models.Filter(must=[models.FieldCondition(key=field, match=models.MatchValue(value=value))])
        return q.count(coll, count_filter=f, exact=True).count

    assert count(nodes_coll, "customer_id", subject) == 2 and count(docs_coll, "metadata.customer_id", subject) == 2

    receipt = client.wait_receipt(client.submit(stack.tenant, subject, [session]).request_id, timeout=60)
    _check_receipt(stack, key, receipt, subject)
    deleted = {s["store"]: s["deleted"] for s in receipt["stores"]}
    assert deleted["qdrant"] == 4 and deleted["langchain_docs"] == 2
    assert count(nodes_coll, "customer_id", subject) == 0 and count(nodes_coll, "session_id", session) == 0
    assert count(nodes_coll, "customer_hash", key.pseudonym(stack.tenant, subject)) == 0
    assert count(docs_coll, "metadata.customer_id", subject) == 0
    assert count(nodes_coll, "customer_id", other) == 2 and count(docs_coll, "metadata.customer_id", other) == 1
    q.close()


def test_tenant_chain_verifies_last(stack, client):
    v = client.verify_chain(stack.tenant, stack.chain_keys)
    assert v.local.receipts >= 6 and v.local.addenda == 0
    assert v.server["verified"] is True and v.server["receipts"] == v.local.receipts
    assert v.local.last_unmacced_seq == 0  # the stack runs with a chain key from the start
    records = client.chain_records(stack.tenant)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    with pytest.raises(Forbidden):
        client.verify_chain(stack.other_tenant)
