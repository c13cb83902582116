#!/usr/bin/env python3
"""Submit erasure requests to Lethe over Kafka and wait for their receipts.

An upstream Python app produces each request as one JSON record on the topic
erasure.intake (schema: schemas/intake.schema.json), keyed by tenant, with two headers:

    authorization: Bearer <token>       the producer's credential, as over HTTP
    content-type:  application/json

The broker's acknowledgement says only that the record is stored. Lethe derives the
request id from the tenant and the record's idempotency_key, so this script then asks the
intake API for the request by that key (GET /v1/erasures?tenant=&idempotency_key=) until
it is COMPLETE or FAILED, and prints each receipt as one JSON line. Producing the same
idempotency key again is harmless: it names the same request.

Needs confluent-kafka (Debian: python3-confluent-kafka; pip: confluent-kafka).

    produce_erasure.py --brokers 127.0.0.1:9092 --intake http://127.0.0.1:8080 \\
        --token "$LETHE_TOKEN" --tenant vastralaya --subject anna.schmidt@example.de \\
        --session sess-2026-11-a1

Exit status: 0 when every request reached a COMPLETE receipt, 1 otherwise.
"""

import argparse
import json
import os
import sys
import time
import urllib.parse
import urllib.request
import uuid

from confluent_kafka import Producer

TOPIC = "erasure.intake"


def produce(brokers, token, requests):
    """Produce every request and wait until the broker acknowledged all of them."""
    producer = Producer({
        "bootstrap.servers": brokers,
        "enable.idempotence": True,  # acks=all, no duplicates on retry
        "linger.ms": 0,
    })
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(str(err))

    headers = [("content-type", b"application/json")]
    if token:
        headers.append(("authorization", ("Bearer " + token).encode()))
    for req in requests:
        producer.produce(TOPIC, key=req["tenant_id"].encode(), value=json.dumps(req).encode(),
                         headers=headers, on_delivery=delivered)
    remaining = producer.flush(30)
    if remaining or failures:
        raise SystemExit(f"produce failed: {remaining} unacknowledged, errors {failures}")


def get(url, token):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def wait_receipt(intake, token, tenant, key, timeout):
    """Return the receipt of tenant's request with idempotency key, or None on FAILED or timeout."""
    query = urllib.parse.urlencode({"tenant": tenant, "idempotency_key": key})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = get(f"{intake}/v1/erasures?{query}", token)["requests"]
        if found and found[0]["state"] == "COMPLETE":
            return get(f"{intake}/v1/erasures/{found[0]['request_id']}/receipt", token)
        if found and found[0]["state"] == "FAILED":
            print(f"request {found[0]['request_id']} FAILED", file=sys.stderr)
            return None
        time.sleep(0.1)
    print(f"no receipt for idempotency key {key} within {timeout}s", file=sys.stderr)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default=os.environ.get("LETHE_KAFKA_BROKERS", "127.0.0.1:9092"))
    ap.add_argument("--intake", default=os.environ.get("LETHE_URL", "http://127.0.0.1:8080"),
                    help="base URL of Lethe's intake API, to wait for receipts")
    ap.add_argument("--token", default=os.environ.get("LETHE_TOKEN", ""))
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--subject", action="append", required=True,
                    help="a subject to erase (repeat for several requests)")
    ap.add_argument("--session", action="append", default=[],
                    help="a session id of the subject (with one --subject only)")
    ap.add_argument("--regulation", default="GDPR")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    if args.session and len(args.subject) > 1:
        ap.error("--session goes with one --subject")

    requests = [{
        "tenant_id": args.tenant,
        "subject_id": subject,
        "session_ids": args.session,
        "regulation": args.regulation,
        "idempotency_key": str(uuid.uuid4()),
    } for subject in args.subject]
    produce(args.brokers, args.token, requests)
    ok = True
    for req in requests:
        receipt = wait_receipt(args.intake, args.token, req["tenant_id"], req["idempotency_key"], args.timeout)
        if receipt is None or receipt.get("status") != "COMPLETE":
            ok = False
            continue
        print(json.dumps(receipt, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
