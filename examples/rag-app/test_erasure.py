"""End to end: one user of the RAG app is erased through the Python client, and the app's
own libraries find nothing of that user afterwards while every other user is unchanged.

Run by pkg/embedded TestRAGAppErasedEndToEnd, which starts Lethe and the stores, has the
app serve its users (ragapp.py converse) and sets RAGAPP_* and LETHE_URL; it reads the
figures this test writes to RAGAPP_RESULT. Without that environment the test fails.
"""

import json
import os

import ragapp

TENANT = os.environ.get("RAGAPP_TENANT", "helpdesk")
ERASED = os.environ.get("RAGAPP_ERASED", "user-ana")
# A session written before lineage existed, which no store ties to the user: the user names it.
NAMED_SESSIONS = ["ana-s0"]
# An older version of the evaluation set that held the erased user's rows is deleted
# whole, the other users' rows in it too; theirs live on in the current object.
WHOLE_VERSIONS = "ragas older S3 versions' samples"


def test_erased_user_is_gone_and_others_are_kept():
    assert os.environ.get("LETHE_URL"), "LETHE_URL is not set: run through TestRAGAppErasedEndToEnd"
    before = ragapp.footprint(TENANT)
    assert len(before) == 3
    for lib, n in before[ERASED].items():
        assert n > 0, f"before the erasure {lib} returns nothing of the user: the read-back would prove nothing"

    erasure = ragapp.erase(TENANT, ERASED, NAMED_SESSIONS)
    receipt = erasure["receipt"]
    assert receipt["status"] == "COMPLETE"
    assert receipt["hash"] == erasure["receipt_hash_recomputed"], "the client's recomputed hash differs"
    assert all(s["verification"]["remaining"] == 0 for s in receipt["stores"])
    assert ERASED not in json.dumps(receipt), "the receipt names the user"

    after = ragapp.footprint(TENANT)
    table = [f"{'library read-back':44} {'erased before':>14} {'erased after':>14}"]
    for lib in sorted(before[ERASED]):
        table.append(f"{lib:44} {before[ERASED][lib]:14d} {after[ERASED][lib]:14d}")
    print("\n".join(table))
    print(f"receipt {receipt['receipt_id']}: hash {erasure['receipt_hash_recomputed']} recomputed by the Python client")
    with open(os.environ["RAGAPP_RESULT"], "w") as f:
        json.dump({"before": before, "after": after, "erasure": erasure}, f)

    for lib, n in after[ERASED].items():
        assert n == 0, f"after the erasure {lib} still returns {n} items of the user"
    for user, counts in before.items():
        if user == ERASED:
            continue
        for lib, n in counts.items():
            if lib != WHOLE_VERSIONS:
                assert after[user][lib] == n, f"{lib} of {user}: {n} before, {after[user][lib]} after"
