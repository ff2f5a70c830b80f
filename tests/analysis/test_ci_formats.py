"""kvtrace check --format junit / sarif validate against the schemas shipped beside this
test (tests/analysis/schemas/: a minimal JUnit XSD modeled on Jenkins' and a SARIF 2.1.0
subset schema written from the spec -- not the official OASIS file), a buggy trace fails
the right check and its clean twin passes every one, and a baseline turns known findings
into accepted ones so only new ones fail."""
import json
import os
import subprocess
import sys

import pytest

jsonschema = pytest.importorskip("jsonschema")
xmlschema = pytest.importorskip("xmlschema")

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCHEMAS = os.path.join(os.path.dirname(__file__), "schemas")
BUGGY = os.path.join(ROOT, "traces", "engine-early-src-free.kvtrace")
CLEAN = os.path.join(ROOT, "traces", "engine-clean.kvtrace")


def check(*args):
    r = subprocess.run([sys.executable, "-m", "kvtrace", "check", *args], capture_output=True, text=True, timeout=240)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="module")
def schemas():
    with open(os.path.join(SCHEMAS, "sarif-2.1.0-subset.schema.json")) as f:
        sarif = json.load(f)
    jsonschema.Draft7Validator.check_schema(sarif)
    return xmlschema.XMLSchema(os.path.join(SCHEMAS, "junit.xsd")), jsonschema.Draft7Validator(sarif)


@pytest.mark.parametrize("trace,fails", [(BUGGY, True), (CLEAN, False)], ids=["buggy", "clean"])
def test_junit_validates_and_fails_the_right_check(schemas, trace, fails):
    import xml.etree.ElementTree as ET
    rc, out, err = check(trace, "--format", "junit")
    assert rc == (1 if fails else 0), err
    schemas[0].validate(out)
    failed = {c.get("name") for c in ET.fromstring(out).iter("testcase") if c.find("failure") is not None}
    assert failed == ({"src_free_before_done"} if fails else set())


@pytest.mark.parametrize("trace,fails", [(BUGGY, True), (CLEAN, False)], ids=["buggy", "clean"])
def test_sarif_validates_and_names_the_check(schemas, trace, fails):
    rc, out, err = check(trace, "--format", "sarif")
    assert rc == (1 if fails else 0), err
    log = json.loads(out)
    errors = sorted(schemas[1].iter_errors(log), key=str)
    assert not errors, errors[0]
    results = log["runs"][0]["results"]
    rules = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in results)
    assert {r["ruleId"] for r in results if r["level"] == "error"} == ({"src_free_before_done"} if fails else set())


def test_a_broken_document_does_not_validate(schemas):
    """The validators are not vacuous: a result without a message, a testcase without a name fail."""
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "kvtrace"}}, "results": [{"ruleId": "x"}]}]}
    assert list(schemas[1].iter_errors(bad))
    assert not schemas[0].is_valid('<testsuites><testsuite name="a" tests="1"><testcase classname="c"/>'
                                   '</testsuite></testsuites>')


def test_baseline_accepts_known_findings_and_new_ones_still_fail(tmp_path, schemas):
    base = str(tmp_path / "baseline.json")
    rc, out, _ = check(BUGGY, "--write-baseline", base)
    assert rc == 0 and "wrote" in out
    rc, out, _ = check(BUGGY, "--baseline", base)
    assert rc == 0 and "accepted by the baseline" in out
    rc, out, _ = check(BUGGY, "--baseline", base, "--format", "sarif")
    assert rc == 0
    log = json.loads(out)
    assert not list(schemas[1].iter_errors(log))
    assert log["runs"][0]["results"] and all(r["baselineState"] == "unchanged" and r["suppressions"]
                                             for r in log["runs"][0]["results"])
    data = json.loads(open(base).read())                 # drop one accepted entry: it is new again
    data["accepted"] = [e for e in data["accepted"] if e["check"] != "src_free_before_done"]
    open(base, "w").write(json.dumps(data))
    rc, out, _ = check(BUGGY, "--baseline", base, "--format", "junit")
    assert rc == 1 and 'name="src_free_before_done"' in out
    for bad in ("{", '{"kvtrace_baseline": 9, "accepted": []}'):
        open(base, "w").write(bad)
        rc, _, err = check(BUGGY, "--baseline", base)
        assert rc == 2 and len(err.strip().splitlines()) == 1
