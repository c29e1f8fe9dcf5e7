"""Checks one --json output of pipectl against docs/json.md: it must be one JSON object (strict
UTF-8, one line) whose keys are exactly the fields docs/json.md lists for it, nested objects too.

usage: check_json.py DOC KIND OUTPUT [STATUS [EXIT_CODE]]
KIND: error | check | plan | summary. STATUS/EXIT_CODE: the expected "status" and "exit_code".
"""
import json
import re
import sys


def tables(doc):
    """{section heading: [set of field names per table]} from the '## ' sections of docs/json.md;
    a table's fields are the backticked names of its first column."""
    out, sec, cur = {}, None, None
    for line in open(doc, encoding="utf-8"):
        if line.startswith("## "):
            sec, cur = line[3:].strip(), None
            out[sec] = []
        elif sec and line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            first = cells[0].strip()
            if first in ("Field", "") or set(first) <= set("-"):
                if first == "Field":
                    cur = set()
                    out[sec].append(cur)
                continue
            if cur is not None:
                cur.update(re.findall(r"`([a-z_]+)`", first))
        else:
            cur = None if not line.startswith("|") else cur
    return out


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def same_keys(what, obj, fields):
    if not isinstance(obj, dict):
        fail("%s is not an object: %r" % (what, obj))
    got = list(obj.keys())
    if set(got) != fields:
        fail("%s: keys %s, docs/json.md lists %s (extra %s, missing %s)"
             % (what, sorted(got), sorted(fields), sorted(set(got) - fields),
                sorted(fields - set(got))))


def main():
    doc, kind, path = sys.argv[1:4]
    raw = open(path, "rb").read()
    try:
        text = raw.decode("utf-8")  # strict: invalid UTF-8 is a failure
    except UnicodeDecodeError as e:
        fail("%s: not UTF-8: %s" % (path, e))
    lines = [l for l in text.split("\n") if l]
    if len(lines) != 1:
        fail("%s: expected one line of JSON, got %d" % (path, len(lines)))
    try:
        v = json.loads(lines[0])
    except ValueError as e:
        fail("%s: not JSON: %s" % (path, e))
    t = tables(doc)
    diag = t["A diagnostic"][0]
    if v.get("schema_version") != 1:
        fail("schema_version is %r" % v.get("schema_version"))
    if kind == "error":
        same_keys("error object", v, t["The error object"][0])
        if len(v["diagnostics"]) != 1:
            fail("the error object has %d diagnostics" % len(v["diagnostics"]))
        for d in v["diagnostics"]:
            same_keys("diagnostic", d, diag)
    elif kind == "check":
        top, entry = t["`pipectl check --json FILE...`"][:2]
        same_keys("check", v, top)
        for f in v["files"]:
            same_keys("check file entry", f, entry)
            for d in f["diagnostics"]:
                same_keys("diagnostic", d, diag)
            if f["status"] != "ok" and not f["diagnostics"]:
                fail("%r failed with no diagnostics" % f["file"])
    elif kind == "plan":
        top, plan = t["`pipectl plan --json FILE`"][:2]
        same_keys("plan", v, top)
        same_keys("plan object", v["plan"], plan)
    elif kind == "summary":
        sec = t["`pipectl run --json FILE`: the summary"]
        same_keys("summary", v, sec[0])
        if v["depth_auto"] is not None:
            same_keys("depth_auto", v["depth_auto"], sec[1])
        for d in v["diagnostics"]:
            same_keys("diagnostic", d, diag)
        if (v["status"] == "ok") != (not v["diagnostics"]):
            fail("status %r with %d diagnostics" % (v["status"], len(v["diagnostics"])))
    else:
        fail("unknown kind " + kind)
    if len(sys.argv) > 4 and v["status"] != sys.argv[4]:
        fail("status %r, expected %r" % (v["status"], sys.argv[4]))
    if len(sys.argv) > 5 and v["exit_code"] != int(sys.argv[5]):
        fail("exit_code %r, expected %s" % (v["exit_code"], sys.argv[5]))


main()
