#!/usr/bin/python3
"""scripts/lab_report.py and the labs' hint and planted files (tests/chapters.cmake).

  * the grouped report: one group per rung and output with its count of checks, cases and bad
    elements, the student's own rungs first, capped, the rest counted;
  * the hints: a hint fires on its own signature whatever fails outside its scope; a "passes"
    selector stops it; the best is ranked first; a second is shown only when it explains other
    failures; a failure without a tag gets no hint;
  * every lab.json: hint ids unique, known fields, regexes that compile, no "planted" entry (the
    planted mistakes quote the reference: they live in tests/labs/, outside the student's folder);
    every tests/labs/<stage>.json entry names a hint of its lab, or none.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lab_report import Failure, grouped_report, ranked_hints  # noqa: E402

HINT_KEYS = {"id", "hint", "rung", "output", "fails", "passes", "rules"}
SELECTOR_KEYS = {"rung", "output", "case", "case_not"}


def F(rung, output, case, bad=1):
    return Failure(where="t: f.cpp:1", headline=f"rung {rung} (float32), output {output}, case {case}: first bad element "
                   f"at [0] of [9]: expected 1, got 2; {bad} of 9 elements bad", rung=rung, precision="float32",
                   output=output, case=case, test_case="tc")


def expect(cond, what, problems):
    if not cond:
        problems.append(what)


def test_report(problems):
    fs = [F("tiled", "O", "a", 3), F("tiled", "O", "b", 4), F("tiled", "L", "a")]
    lines = grouped_report(fs)
    head = [l for l in lines if l.startswith("FAIL")]
    expect(len(head) == 2, f"two groups (tiled O, tiled L) expected, got {head}", problems)
    expect("2 checks in 2 cases (a, b), 7 bad elements" in head[0], f"the count of the first group: {head[0]}", problems)
    lead = [l for l in grouped_report(fs + [F("mine", "y", "a")], first=["mine"]) if l.startswith("FAIL")]
    expect(lead[0].startswith("FAIL rung mine,"), f"the student's own rung leads: {lead[0]}", problems)
    many = [F(f"r{i}", "y", "c") for i in range(12)]
    lines = grouped_report(many, cap=8)
    expect(sum(l.startswith("FAIL") for l in lines) == 8, "the report is capped at 8 groups", problems)
    expect("4 more groups (4 checks)" in lines[-1], f"the groups left out are counted: {lines[-1]}", problems)


def test_hints(problems):
    hints = [
        {"id": "broad", "rung": ["online", "online_vec"], "hint": "b"},
        {"id": "rescale", "rung": ["online"], "fails": ["^len_97$"], "passes": [{"case": "^len_1$"}], "hint": "r"},
        {"id": "dk", "output": ["dK"], "passes": [{"output": ["dQ"]}], "hint": "k"},
    ]
    # the mistake's own signature, plus failures from shared code outside its scope (online_vec)
    fs = [F("online", "y", "len_97"), F("online", "y", "len_1023"), F("online_vec", "y", "len_97")]
    shown = [h["id"] for h in ranked_hints(fs, hints)]
    expect(shown[:1] == ["rescale"], f"the specific hint first, whatever else fails: {shown}", problems)
    expect(shown == ["rescale", "broad"], f"the broad hint second (it explains online_vec's failure): {shown}", problems)
    # a passes selector stops the hint: len_1 fails in its own rung
    shown = [h["id"] for h in ranked_hints(fs + [F("online", "y", "len_1")], hints)]
    expect("rescale" not in shown, f"a failing len_1 rules out 'rescale': {shown}", problems)
    # ... but not a len_1 failure outside its scope
    shown = [h["id"] for h in ranked_hints(fs + [F("safe", "y", "len_1")], hints)]
    expect(shown[:1] == ["rescale"], f"len_1 of another rung does not rule out 'rescale': {shown}", problems)
    # an output selector applies to every rung
    shown = [h["id"] for h in ranked_hints([F("bwd", "dK", "x"), F("other", "dQ", "x")], hints)]
    expect("dk" not in shown, f"dQ failing in any rung rules out 'dk': {shown}", problems)
    shown = [h["id"] for h in ranked_hints([F("bwd", "dK", "x"), F("bwd", "dK", "y")], hints)]
    expect(shown == ["dk"], f"dK alone: {shown}", problems)
    # no second hint that explains nothing new, never more than two
    shown = [h["id"] for h in ranked_hints([F("online", "y", "len_97")], hints)]
    expect(shown == ["rescale"], f"'broad' explains nothing 'rescale' leaves open: {shown}", problems)
    untagged = Failure(where="t", headline="CHECK( x )", test_case="tc")
    expect(ranked_hints([untagged], hints) == [], "no hint without a tagged failure", problems)


def test_labs(problems):
    chapters = os.path.join(ROOT, "chapters")
    for st in sorted(os.listdir(chapters)):
        path = os.path.join(chapters, st, "lab", "lab.json")
        if not os.path.exists(path):
            continue
        lab = json.load(open(path, encoding="utf-8"))
        expect("planted" not in lab, f"{st}: lab.json holds planted mistakes (they belong in tests/labs/)", problems)
        ids = [h.get("id") for h in lab.get("hints", [])]
        expect(len(set(ids)) == len(ids) and None not in ids, f"{st}: hint ids missing or not unique: {ids}", problems)
        for h in lab.get("hints", []):
            expect(set(h) <= HINT_KEYS, f"{st}: hint '{h.get('id')}' has unknown fields {set(h) - HINT_KEYS}", problems)
            for rx in h.get("fails", []) + [s.get(k) for s in h.get("passes", []) for k in ("case", "case_not") if k in s]:
                try:
                    re.compile(rx)
                except re.error as e:
                    problems.append(f"{st}: hint '{h.get('id')}': bad regex {rx!r}: {e}")
            for sel in h.get("passes", []):
                expect(set(sel) <= SELECTOR_KEYS, f"{st}: hint '{h.get('id')}': unknown selector fields {sel}", problems)
        planted = os.path.join(ROOT, "tests", "labs", st + ".json")
        expect(os.path.exists(planted), f"{st}: no tests/labs/{st}.json (its planted mistakes)", problems)
        if os.path.exists(planted):
            for p in json.load(open(planted, encoding="utf-8"))["planted"]:
                for hid in [p.get("hint")] + p.get("hint_also", []):
                    expect(hid is None or hid in ids, f"{st}: planted '{p['name']}' names an unknown hint {hid}", problems)
                expect("hint" not in p or "expect" in p, f"{st}: a correct variant names a hint: {p['name']}", problems)


def main():
    problems = []
    test_report(problems)
    test_hints(problems)
    test_labs(problems)
    for p in problems:
        print(p)
    print(f"lab_report: {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
