import pytest

from conftest import SUBJECT_TESTDATA, load_json
from lethe_client import InvalidInput, validate_id, validate_tenant

VERDICTS = load_json(SUBJECT_TESTDATA / "validation.json")  # Go's subject.ValidateTenant and ValidateID


def test_the_verdicts_cover_both_outcomes():
    assert {(v["kind"], v["valid"]) for v in VERDICTS} == {("tenant", True), ("tenant", False), ("id", True), ("id", False)}


@pytest.mark.parametrize("case", VERDICTS, ids=["%s-%d" % (v["kind"], i) for i, v in enumerate(VERDICTS)])
def test_validation_agrees_with_go(case):
    check = validate_tenant if case["kind"] == "tenant" else (lambda v: validate_id("subject_id", v))
    if case["valid"]:
        assert check(case["value"]) == case["value"]
    else:
        with pytest.raises(InvalidInput):
            check(case["value"])
