import json
import os
import pathlib
from dataclasses import dataclass
from typing import Dict

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
AUDIT_TESTDATA = REPO / "pkg" / "auditlog" / "testdata"
SUBJECT_TESTDATA = REPO / "pkg" / "subject" / "testdata"


def load_json(path: pathlib.Path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@dataclass(frozen=True)
class Stack:
    """A running Lethe, named by LETHE_TEST_* variables (pkg/embedded TestPythonClientPackage
    starts one and sets them)."""

    url: str
    token: str
    tenant: str
    other_tenant: str
    brokers: str
    registry: str
    qdrant: str
    hmac_key: str
    hmac_key_id: str
    inventory: str
    chain_keys: Dict[str, bytes]


_VARS = ("URL", "TOKEN", "TENANT", "OTHER_TENANT", "BROKERS", "REGISTRY", "QDRANT", "HMAC_KEY", "HMAC_KEY_ID",
         "INVENTORY", "CHAIN_KEY", "CHAIN_KEY_ID")


@pytest.fixture(scope="session")
def stack() -> Stack:
    env = {v: os.environ.get("LETHE_TEST_" + v, "") for v in _VARS}
    missing = [v for v, val in env.items() if not val]
    if missing:
        msg = "no running Lethe: LETHE_TEST_%s unset" % ", LETHE_TEST_".join(missing)
        if os.environ.get("LETHE_TEST_REQUIRE_STACK") == "1":
            pytest.fail(msg)
        pytest.skip(msg + " (go test ./embedded -run TestPythonClientPackage in pkg runs these)")
    return Stack(url=env["URL"], token=env["TOKEN"], tenant=env["TENANT"], other_tenant=env["OTHER_TENANT"],
                 brokers=env["BROKERS"], registry=env["REGISTRY"], qdrant=env["QDRANT"],
                 hmac_key=env["HMAC_KEY"], hmac_key_id=env["HMAC_KEY_ID"], inventory=env["INVENTORY"],
                 chain_keys={env["CHAIN_KEY_ID"]: env["CHAIN_KEY"].encode()})
