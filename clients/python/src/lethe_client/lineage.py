"""Lineage at ingest: stamp each chunk with the fields the inventory's Qdrant locators
match on, so that every chunk written is found and erased by a later request.

The inventory's Qdrant store names payload keys: ``subject_fields`` (hold the subject id),
``hash_fields`` (hold the subject's keyed pseudonym), ``session_fields`` (hold a session
id) and ``tenant_field`` (holds the tenant, in collections tenants share). A Stamper writes
exactly those keys into a LangChain ``Document``'s or a LlamaIndex node's ``metadata``, or
into a plain payload mapping. Documents and nodes are duck-typed (anything with a
``metadata`` mapping), so neither framework is needed to import this module.

Where the metadata lands in the Qdrant payload depends on the vector store:
LangChain's ``QdrantVectorStore`` nests it under ``metadata`` (so the inventory names
``metadata.customer_id``, as ``deploy/examples/inventory-langchain.yaml`` does), and
LlamaIndex's ``QdrantVectorStore`` writes a node's metadata at the top of the payload
(``customer_id``). A locator the framework cannot reach is an error, never skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, MutableMapping, Optional, Sequence, Tuple, TypeVar, Union

from .errors import InvalidInput, LineageError
from .pseudonym import PseudonymKey
from .validate import validate_id, validate_tenant

# LangChain's QdrantVectorStore default metadata_payload_key.
LANGCHAIN_METADATA_KEY = "metadata"

_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_PLACEHOLDER = re.compile(r"\{(tenant|subject|subject_hash|session)\}")

T = TypeVar("T")


@dataclass(frozen=True)
class QdrantLocators:
    """The locators of one inventory store of kind qdrant that lineage needs."""

    store: str
    collections: Tuple[str, ...]
    subject_fields: Tuple[str, ...] = ()
    hash_fields: Tuple[str, ...] = ()
    session_fields: Tuple[str, ...] = ()
    tenant_field: str = ""

    def collection_names(self, tenant: str, subject_id: str = "", subject_hash: str = "",
                         session_id: str = "") -> List[str]:
        """The store's collection names for tenant, the templates' placeholders filled in."""
        validate_tenant(tenant)
        values = {"tenant": tenant, "subject": subject_id, "subject_hash": subject_hash, "session": session_id}
        out = []
        for tmpl in self.collections:
            def fill(m: "re.Match[str]") -> str:
                v = values[m.group(1)]
                if not v:
                    raise LineageError("collection template %r of store %r needs {%s}" % (tmpl, self.store, m.group(1)))
                return v
            out.append(_PLACEHOLDER.sub(fill, tmpl))
        return out


def _strings(value: Any, where: str) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise LineageError("%s must be a list of non-empty strings" % where)
    return tuple(value)


def load_inventory(source: Union[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """An inventory from a YAML file's path (needs PyYAML: lethe-client[inventory]) or an
    already parsed mapping."""
    if isinstance(source, Mapping):
        inv = source
    else:
        try:
            import yaml
        except ImportError:
            raise LineageError("reading an inventory file needs PyYAML: pip install 'lethe-client[inventory]'") from None
        with open(source, encoding="utf-8") as f:
            inv = yaml.safe_load(f)
    if not isinstance(inv, Mapping) or not isinstance(inv.get("stores"), list):
        raise LineageError("not an inventory: no list of stores")
    return inv


def qdrant_locators(inventory: Union[str, Mapping[str, Any]], store: Optional[str] = None) -> QdrantLocators:
    """The Qdrant locators of the inventory's store named store, or of its one store of
    kind qdrant when store is None."""
    inv = load_inventory(inventory)
    stores = [s for s in inv["stores"] if isinstance(s, Mapping) and s.get("kind") == "qdrant"]
    if store is not None:
        stores = [s for s in stores if s.get("name") == store]
        if not stores:
            raise LineageError("the inventory has no store of kind qdrant named %r" % store)
    elif len(stores) != 1:
        names = [s.get("name") for s in stores]
        raise LineageError("the inventory has %d stores of kind qdrant %s: name one" % (len(stores), names))
    s = stores[0]
    name = str(s.get("name", ""))
    loc = s.get("locators") or {}
    if not isinstance(loc, Mapping):
        raise LineageError("store %r: locators must be a mapping" % name)
    tenant_field = loc.get("tenant_field") or ""
    if not isinstance(tenant_field, str):
        raise LineageError("store %r: tenant_field must be a string" % name)
    out = QdrantLocators(
        store=name,
        collections=_strings(loc.get("collections"), "store %r: collections" % name),
        subject_fields=_strings(loc.get("subject_fields"), "store %r: subject_fields" % name),
        hash_fields=_strings(loc.get("hash_fields"), "store %r: hash_fields" % name),
        session_fields=_strings(loc.get("session_fields"), "store %r: session_fields" % name),
        tenant_field=tenant_field,
    )
    if not (out.subject_fields or out.hash_fields or out.session_fields):
        raise LineageError("store %r names none of subject_fields, hash_fields, session_fields" % name)
    return out


def _split(path: str, prefix: str) -> List[str]:
    """The metadata keys of payload key path under prefix ("" for the payload's top)."""
    parts = path.split(".")
    if not all(_SEGMENT.match(p) for p in parts):
        raise LineageError("payload key %r is not a plain dotted key this stamper can write" % path)
    if prefix:
        pre = prefix.split(".")
        if parts[:len(pre)] != pre or len(parts) == len(pre):
            raise LineageError("payload key %r is not under %r, where this framework's vector store writes "
                               "the metadata: use an inventory whose fields are under it (%s.<field>)"
                               % (path, prefix, prefix))
        parts = parts[len(pre):]
    return parts


def _check(meta: Mapping[str, Any], keys: Sequence[str], value: str, path: str) -> None:
    """Raise if writing value at keys would overwrite something else."""
    for k in keys[:-1]:
        nxt = meta.get(k)
        if nxt is None:
            return
        if not isinstance(nxt, MutableMapping):
            raise LineageError("payload key %r: %r already holds a value that is not a mapping" % (path, k))
        meta = nxt
    old = meta.get(keys[-1])
    if old is not None and old != value:
        raise LineageError("payload key %r already holds another value; the chunk would be stamped "
                           "with two owners" % path)


def _set(meta: MutableMapping[str, Any], keys: Sequence[str], value: str, path: str) -> None:
    _check(meta, keys, value, path)
    for k in keys[:-1]:
        nxt = meta.get(k)
        if nxt is None:
            nxt = meta[k] = {}
        elif not isinstance(nxt, MutableMapping):
            raise LineageError("payload key %r: %r already holds a value that is not a mapping" % (path, k))
        meta = nxt
    old = meta.get(keys[-1])
    if old is not None and old != value:
        raise LineageError("payload key %r already holds another value; the chunk would be stamped "
                           "with two owners" % path)
    meta[keys[-1]] = value


class Stamper:
    """Stamps the chunks of one tenant with lineage for the inventory's Qdrant store.

    key is the pseudonym key (PseudonymKey.from_env()) the deployment's intake uses; it is
    needed when the store names hash_fields. skip_hash_fields=True writes no hash fields
    (the chunks are then found by their subject fields only), an explicit choice rather
    than a silent one.
    """

    def __init__(self, locators: QdrantLocators, tenant: str, key: Optional[PseudonymKey] = None,
                 skip_hash_fields: bool = False) -> None:
        self.locators = locators
        self.tenant = validate_tenant(tenant)
        self.key = key
        self._hash_fields: Tuple[str, ...] = () if skip_hash_fields else locators.hash_fields
        if self._hash_fields and key is None:
            raise LineageError("store %r keeps the keyed pseudonym in %s: pass the pseudonym key "
                               "(PseudonymKey.from_env()) or skip_hash_fields=True"
                               % (locators.store, list(self._hash_fields)))
        if skip_hash_fields and not (locators.subject_fields or locators.session_fields):
            raise LineageError("store %r finds subjects by hash_fields only; they cannot be skipped" % locators.store)

    @classmethod
    def from_inventory(cls, inventory: Union[str, Mapping[str, Any]], tenant: str, key: Optional[PseudonymKey] = None,
                       store: Optional[str] = None, skip_hash_fields: bool = False) -> "Stamper":
        return cls(qdrant_locators(inventory, store), tenant, key, skip_hash_fields)

    def collections(self, subject_id: str = "", session_id: str = "") -> List[str]:
        """The collections the tenant's chunks go to."""
        h = self.key.pseudonym(self.tenant, subject_id) if self.key is not None and subject_id else ""
        return self.locators.collection_names(self.tenant, subject_id, h, session_id)

    def fields(self, subject_id: Optional[str] = None, session_id: Optional[str] = None) -> Dict[str, str]:
        """The payload keys and values that make a chunk of subject_id (and/or of the
        session session_id) erasable: every subject, hash, session and tenant field."""
        if subject_id is None and session_id is None:
            raise InvalidInput("a chunk needs a subject_id or a session_id")
        loc = self.locators
        out: Dict[str, str] = {}
        if subject_id is not None:
            validate_id("subject_id", subject_id)
            if not (loc.subject_fields or self._hash_fields):
                raise LineageError("store %r holds no subject field: a chunk cannot name its subject" % loc.store)
            for f in loc.subject_fields:
                out[f] = subject_id
            if self._hash_fields:
                assert self.key is not None
                h = self.key.pseudonym(self.tenant, subject_id)
                for f in self._hash_fields:
                    out[f] = h
        if session_id is not None:
            validate_id("session_id", session_id)
            if not loc.session_fields:
                raise LineageError("store %r holds no session field: a chunk cannot name its session" % loc.store)
            for f in loc.session_fields:
                out[f] = session_id
        if loc.tenant_field:
            out[loc.tenant_field] = self.tenant
        return out

    def stamp_payload(self, payload: MutableMapping[str, Any], subject_id: Optional[str] = None,
                      session_id: Optional[str] = None, prefix: str = "") -> MutableMapping[str, Any]:
        """Write the fields into payload, read as the part of a Qdrant payload under prefix
        ("" for the whole payload). A field already holding another value is an error."""
        fields = self.fields(subject_id, session_id)
        planned = [(path, _split(path, prefix), value) for path, value in fields.items()]
        for path, keys, value in planned:  # nothing is written unless everything can be
            _check(payload, keys, value, path)
        for path, keys, value in planned:
            _set(payload, keys, value, path)
        return payload

    def _metadata(self, obj: Any) -> MutableMapping[str, Any]:
        if not hasattr(obj, "metadata"):
            raise LineageError("a %s has no metadata to stamp" % type(obj).__name__)
        meta = obj.metadata
        if meta is None:
            obj.metadata = {}
            meta = obj.metadata
        if not isinstance(meta, MutableMapping):
            raise LineageError("a %s's metadata is not a mutable mapping" % type(obj).__name__)
        return meta

    def stamp_document(self, doc: T, subject_id: Optional[str] = None, session_id: Optional[str] = None,
                       metadata_key: str = LANGCHAIN_METADATA_KEY) -> T:
        """Stamp a LangChain Document (or anything with a metadata mapping) for a vector
        store that writes metadata under metadata_key ("metadata" for LangChain's
        QdrantVectorStore; "" where metadata lands at the top of the payload)."""
        self.stamp_payload(self._metadata(doc), subject_id, session_id, metadata_key)
        return doc

    def stamp_node(self, node: T, subject_id: Optional[str] = None, session_id: Optional[str] = None,
                   metadata_key: str = "") -> T:
        """Stamp a LlamaIndex node (TextNode, Document, ...): LlamaIndex's QdrantVectorStore
        writes node metadata at the top of the payload. The stamped keys are also excluded
        from the text the node gives its embedding model and LLM, so identifiers are not
        embedded or sent in prompts."""
        meta = self._metadata(node)
        self.stamp_payload(meta, subject_id, session_id, metadata_key)
        top = {(_split(p, metadata_key)[0]) for p in self.fields(subject_id, session_id)}
        for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
            keys = getattr(node, attr, None)
            if isinstance(keys, list):
                keys.extend(sorted(k for k in top if k not in keys))
        return node

    def stamp_documents(self, docs: Iterable[T], subject_id: Optional[str] = None,
                        session_id: Optional[str] = None, metadata_key: str = LANGCHAIN_METADATA_KEY) -> List[T]:
        return [self.stamp_document(d, subject_id, session_id, metadata_key) for d in docs]

    def stamp_nodes(self, nodes: Iterable[T], subject_id: Optional[str] = None,
                    session_id: Optional[str] = None, metadata_key: str = "") -> List[T]:
        return [self.stamp_node(n, subject_id, session_id, metadata_key) for n in nodes]
