"""lethe-client: a Python client of Lethe, the right-to-erasure service for RAG applications.

- LetheClient: submit erasures over HTTP, wait for and verify receipts, verify a tenant's
  receipt chain, ask the suppression list before writing.
- KafkaSubmitter: submit erasures on erasure.intake (JSON, or Avro through a Schema Registry).
- Stamper: stamp LangChain documents, LlamaIndex nodes and Qdrant payloads with the
  fields the inventory's Qdrant store erases by.
- receipt: the canonical form, hash and chain MAC of receipts and addenda.
"""

from .client import (ChainVerification, LetheClient, Submission, SuppressionAnswer, SuppressionResult,
                     STOPPED_STATES)
from .errors import (APIError, BadRequest, Conflict, ErasureNotCompleted, Forbidden, InvalidInput,
                     LetheError, LineageError, NotFound, PayloadTooLarge, ProduceError, RateLimited,
                     Unauthorized, Unavailable, VerificationError, WaitTimeout)
from .kafka import KafkaSubmitter
from .lineage import QdrantLocators, Stamper, load_inventory, qdrant_locators
from .pseudonym import PseudonymKey
from .receipt import ChainReport, canonical, chain_mac, record_hash, verify_chain, verify_record
from .validate import validate_id, validate_tenant

__version__ = "0.1.0"

__all__ = [
    "APIError", "BadRequest", "ChainReport", "ChainVerification", "Conflict", "ErasureNotCompleted",
    "Forbidden", "InvalidInput", "KafkaSubmitter", "LetheClient", "LetheError", "LineageError", "NotFound",
    "PayloadTooLarge", "ProduceError", "PseudonymKey", "QdrantLocators", "RateLimited", "STOPPED_STATES",
    "Stamper", "Submission", "SuppressionAnswer", "SuppressionResult", "Unauthorized", "Unavailable",
    "VerificationError", "WaitTimeout", "canonical", "chain_mac", "load_inventory", "qdrant_locators",
    "record_hash", "validate_id", "validate_tenant", "verify_chain", "verify_record",
]
