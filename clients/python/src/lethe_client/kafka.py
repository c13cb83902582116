"""Erasure requests on the erasure.intake topic, as JSON or as registry-framed Avro.

Needs confluent-kafka (``pip install lethe-client[kafka]``; Avro also needs its
``avro``/``schemaregistry`` extras: ``lethe-client[avro]``). Every record is keyed by
tenant and carries the ``authorization`` header with the producer's credential, as over
HTTP. The broker's acknowledgement says only that the record is stored: the intake derives
the request id from (tenant, idempotency_key), so LetheClient.wait_receipt_by_key finds
the request. A record the intake refuses is dead-lettered with the reason, never answered,
which is why every request is validated here before it is produced.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from .errors import LetheError, ProduceError
from .validate import validate_request

TOPIC = "erasure.intake"
# A media type the intake reads as Avro in the Schema Registry wire format.
AVRO_CONTENT_TYPE = "application/vnd.confluent.avro"


class KafkaSubmitter:
    """Produces erasure requests to erasure.intake.

    brokers: the bootstrap servers. token: the producer's credential (None: a deployment
    without authentication). registry_url: with it, records are Avro in the Schema
    Registry wire format, written with the latest schema registered under
    ``erasure.intake-value`` (Lethe registers its schemas there at start; nothing is
    registered from here); without it, JSON. producer_config and registry_config are
    merged into the confluent_kafka configurations.
    """

    def __init__(self, brokers: str, token: Optional[str] = None, *, registry_url: Optional[str] = None,
                 producer_config: Optional[Mapping[str, Any]] = None,
                 registry_config: Optional[Mapping[str, Any]] = None, topic: str = TOPIC,
                 source: str = "", flush_timeout: float = 30.0) -> None:
        try:
            from confluent_kafka import Producer
        except ImportError:
            raise LetheError("KafkaSubmitter needs confluent-kafka: pip install 'lethe-client[kafka]'") from None
        conf: Dict[str, Any] = {"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 0}
        conf.update(producer_config or {})
        self._producer = Producer(conf)
        self.topic = topic
        self.token = token
        self.source = source
        self.flush_timeout = flush_timeout
        self._serialize: Optional[Callable[[Dict[str, Any]], bytes]] = None
        if registry_url:
            try:
                from confluent_kafka.schema_registry import SchemaRegistryClient
                from confluent_kafka.schema_registry.avro import AvroSerializer
                from confluent_kafka.serialization import MessageField, SerializationContext
            except ImportError:
                raise LetheError("Avro needs confluent-kafka's Schema Registry support: pip install 'lethe-client[avro]'") from None
            rconf: Dict[str, Any] = {"url": registry_url}
            rconf.update(registry_config or {})
            serializer = AvroSerializer(SchemaRegistryClient(rconf), None,
                                        conf={"auto.register.schemas": False, "use.latest.version": True})
            ctx = SerializationContext(topic, MessageField.VALUE)
            self._serialize = lambda rec: serializer(rec, ctx)

    @property
    def encoding(self) -> str:
        return "avro" if self._serialize else "json"

    def _record(self, req: Dict[str, Any]) -> bytes:
        if self._serialize is None:
            return json.dumps(req, ensure_ascii=False).encode("utf-8")
        avro = dict(req)
        avro["source"] = self.source
        avro["submitted_at"] = int(time.time() * 1000)
        try:
            out: bytes = self._serialize(avro)
            return out
        except Exception as e:  # the registry unreachable, no schema registered, ...
            raise ProduceError("Avro serialisation of the request failed: %s" % type(e).__name__) from e

    def submit(self, tenant: str, subject_id: str, session_ids: Iterable[str] = (), *,
               regulation: str = "GDPR", scope: str = "SUBJECT", idempotency_key: Optional[str] = None) -> str:
        """Produce one request and wait for the broker's acknowledgement; return its
        idempotency key (a new UUID when none is given) for wait_receipt_by_key."""
        key = idempotency_key or str(uuid.uuid4())
        sessions = validate_request(tenant, subject_id, session_ids, scope, regulation, key)
        req = {"tenant_id": tenant, "subject_id": subject_id, "session_ids": sessions,
               "regulation": regulation, "scope": scope, "idempotency_key": key}
        value = self._record(req)
        headers: List[Any] = [("content-type", (AVRO_CONTENT_TYPE if self._serialize else "application/json").encode())]
        if self.token:
            headers.append(("authorization", ("Bearer " + self.token).encode()))
        failures: List[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        self._producer.produce(self.topic, key=tenant.encode(), value=value, headers=headers, on_delivery=delivered)
        remaining = self._producer.flush(self.flush_timeout)
        if remaining:
            raise ProduceError("the broker did not acknowledge the record within %.0fs" % self.flush_timeout)
        if failures:
            raise ProduceError("the broker refused the record: %s" % "; ".join(failures))
        return key

    def close(self) -> None:
        self._producer.flush(self.flush_timeout)

    def __enter__(self) -> "KafkaSubmitter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
