import os
import subprocess
import sys

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, TextNode

from conftest import REPO, SUBJECT_TESTDATA, load_json
from lethe_client import InvalidInput, LineageError, PseudonymKey, Stamper, qdrant_locators

REFERENCE = str(REPO / "deploy" / "inventory.yaml")
LANGCHAIN = str(REPO / "deploy" / "examples" / "inventory-langchain.yaml")
CASE = load_json(SUBJECT_TESTDATA / "pseudonyms.json")[0]  # computed by Go's subject.Key
KEY = PseudonymKey(CASE["key_id"], CASE["secret"].encode())
TENANT, SUBJECT = CASE["tenant"], CASE["id"]


def test_locators_read_from_the_inventories():
    ref = qdrant_locators(REFERENCE)
    assert (ref.store, ref.subject_fields, ref.hash_fields, ref.session_fields, ref.tenant_field) == \
        ("qdrant", ("customer_id",), ("customer_hash",), ("session_id",), "")
    assert ref.collection_names(TENANT) == ["shopbot_" + TENANT]
    lc = qdrant_locators(LANGCHAIN)
    assert (lc.subject_fields, lc.hash_fields, lc.session_fields) == (("metadata.customer_id",), (), ("metadata.session_id",))


def test_llamaindex_node_stamped_for_the_reference_inventory():
    node = TextNode(text="Order 1 shipped.", metadata={"source": "faq"})
    Stamper.from_inventory(REFERENCE, TENANT, KEY).stamp_node(node, SUBJECT, "sess-1")
    assert node.metadata == {"source": "faq", "customer_id": SUBJECT, "customer_hash": CASE["pseudonym"],
                             "session_id": "sess-1"}
    # The identifiers are kept out of what the node embeds and what it shows an LLM.
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        text = node.get_content(metadata_mode=mode)
        assert SUBJECT not in text and "sess-1" not in text and "faq" in text


def test_langchain_document_stamped_for_the_langchain_inventory():
    doc = Document(page_content="Order 1 shipped.", metadata={"source": "faq"})
    out = Stamper.from_inventory(LANGCHAIN, TENANT).stamp_document(doc, SUBJECT, "sess-1")
    assert out is doc
    assert doc.metadata == {"source": "faq", "customer_id": SUBJECT, "session_id": "sess-1"}


def test_langchain_document_cannot_reach_top_level_payload_keys():
    doc = Document(page_content="x", metadata={})
    with pytest.raises(LineageError, match="not under 'metadata'"):
        Stamper.from_inventory(REFERENCE, TENANT, KEY).stamp_document(doc, SUBJECT)
    assert doc.metadata == {}
    # A vector store that writes metadata at the top of the payload reaches them.
    Stamper.from_inventory(REFERENCE, TENANT, KEY).stamp_document(doc, SUBJECT, metadata_key="")
    assert doc.metadata["customer_hash"] == CASE["pseudonym"]


def test_hash_fields_need_the_key_or_an_explicit_skip():
    with pytest.raises(LineageError, match="customer_hash"):
        Stamper.from_inventory(REFERENCE, TENANT)
    s = Stamper.from_inventory(REFERENCE, TENANT, skip_hash_fields=True)
    assert s.fields(SUBJECT) == {"customer_id": SUBJECT}
    hash_only = {"version": "1", "stores": [{"name": "q", "kind": "qdrant", "locators": {
        "collections": ["c_{tenant}"], "hash_fields": ["owner_hash"]}}]}
    with pytest.raises(LineageError, match="hash_fields only"):
        Stamper.from_inventory(hash_only, TENANT, skip_hash_fields=True)
    assert Stamper.from_inventory(hash_only, TENANT, KEY).fields(SUBJECT) == {"owner_hash": CASE["pseudonym"]}


def test_legacy_chunk_with_a_session_only():
    p = Stamper.from_inventory(REFERENCE, TENANT, KEY).stamp_payload({"page_content": "hi"}, session_id="sess-9")
    assert p == {"page_content": "hi", "session_id": "sess-9"}


def test_tenant_field_and_nested_keys_of_a_shared_collection():
    inv = {"version": "1", "stores": [{"name": "shared", "kind": "qdrant", "locators": {
        "collections": ["kb"], "tenant_field": "metadata.tenant", "subject_fields": ["metadata.owner.id"]}}]}
    doc = Document(page_content="x", metadata={"owner": {"team": "a"}})
    Stamper.from_inventory(inv, TENANT).stamp_document(doc, SUBJECT)
    assert doc.metadata == {"owner": {"team": "a", "id": SUBJECT}, "tenant": TENANT}


def test_a_chunk_of_another_subject_is_not_restamped():
    doc = Document(page_content="x", metadata={"customer_id": "someone-else"})
    with pytest.raises(LineageError, match="two owners"):
        Stamper.from_inventory(LANGCHAIN, TENANT).stamp_document(doc, SUBJECT, "sess-1")
    assert doc.metadata == {"customer_id": "someone-else"}  # nothing written, not even the session


def test_ids_the_inventory_cannot_hold_are_errors_not_drops():
    no_sessions = {"version": "1", "stores": [{"name": "q", "kind": "qdrant", "locators": {
        "collections": ["c_{tenant}"], "subject_fields": ["customer_id"]}}]}
    with pytest.raises(LineageError, match="no session field"):
        Stamper.from_inventory(no_sessions, TENANT).fields(SUBJECT, "sess-1")
    s = Stamper.from_inventory(LANGCHAIN, TENANT)
    with pytest.raises(InvalidInput):
        s.fields()
    with pytest.raises(InvalidInput):
        s.fields(" ")
    with pytest.raises(InvalidInput):
        s.fields(SUBJECT, "")
    with pytest.raises(InvalidInput):
        Stamper.from_inventory(LANGCHAIN, "Not A Tenant")
    with pytest.raises(LineageError, match="no metadata"):
        s.stamp_document(object(), SUBJECT)


def test_inventories_with_several_qdrant_stores_name_one():
    inv = {"version": "1", "stores": [
        {"name": "a", "kind": "qdrant", "locators": {"collections": ["a_{tenant}"], "subject_fields": ["x"]}},
        {"name": "b", "kind": "qdrant", "locators": {"collections": ["b_{tenant}"], "subject_fields": ["y"]}}]}
    with pytest.raises(LineageError, match="name one"):
        qdrant_locators(inv)
    assert qdrant_locators(inv, "b").subject_fields == ("y",)
    with pytest.raises(LineageError):
        qdrant_locators(inv, "c")


class _Chunk:
    """A stand-in of neither framework: anything with a metadata mapping is stamped."""

    def __init__(self):
        self.metadata = None


def test_duck_typed_chunks():
    stamped = Stamper.from_inventory(REFERENCE, TENANT, KEY).stamp_nodes([_Chunk(), _Chunk()], SUBJECT)
    assert [c.metadata["customer_hash"] for c in stamped] == [CASE["pseudonym"]] * 2


def test_the_package_imports_without_either_framework():
    code = ("import sys\n"
            "sys.modules['langchain_core'] = None\n"
            "sys.modules['llama_index'] = None\n"
            "sys.modules['confluent_kafka'] = None\n"
            "import lethe_client, lethe_client.lineage, lethe_client.kafka\n"
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama', 'confluent')) and sys.modules[m]))\n"
            "try:\n"
            "    lethe_client.KafkaSubmitter('127.0.0.1:1')\n"
            "except lethe_client.LetheError as e:\n"
            "    print('confluent-kafka' in str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=True)
    assert out.stdout.split() == ["[]", "True"]
