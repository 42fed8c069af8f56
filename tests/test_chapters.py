#!/usr/bin/python3
"""The course chapters stand alone (tests/chapters.cmake).

For every chapters/NN-stage/README.md and its lab/README.md:
  * no internal reference a reader cannot follow: the words "seed", "issue", "facts file" and the
    name of the maintainers' design file (RNG seeds are called random streams in the prose);
  * every relative link and image points at a file that exists in the repository;
  * the chapter shows at least one figure, and every figure is a committed file;
  * the chapter is enough for its lab: every "rules" phrase of lab/lab.json (the rules its tests
    enforce, error wording included) and of each of its hints appears in the chapter or the lab's
    README (whitespace aside), and every "chapter NN, section S" a hint cites is a section there.
Run with a chapter folder as the only argument to check one chapter; --selftest plants each fault
in a scratch copy and requires it to be reported.
"""
import json
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNED = re.compile(r"\b(seeds?|issues?|facts file|DESIGN\.md)\b", re.IGNORECASE)
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")


def check_file(path, root, need_figure):
    problems = []
    rel = os.path.relpath(path, root)
    text = open(path, encoding="utf-8").read()
    in_code = False
    figures = 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        for m in BANNED.finditer(line):
            problems.append(f"{rel}:{n}: internal reference '{m.group(1)}': {line.strip()[:100]}")
        if in_code:
            continue
        for m in LINK.finditer(line):
            image, target = m.group(1) == "!", m.group(2)
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: link target '{target}' does not exist")
            elif image:
                figures += 1
    if need_figure and figures == 0:
        problems.append(f"{rel}: the chapter shows no figure (![...](figures/...))")
    return problems


SECTION = re.compile(r"chapter (\d\d), sections? ([\d.]+(?:(?:, | and )[\d.]+)*)")


def _flat(text):
    return " ".join(text.split())


def check_lab_rules(base, root):
    """The lab's rules and hints against the chapter and the lab README (see the module's doc)."""
    problems = []
    path = os.path.join(base, "lab", "lab.json")
    if not os.path.exists(path):
        return problems
    rel = os.path.relpath(path, root)
    lab = json.load(open(path, encoding="utf-8"))
    chapter = open(os.path.join(base, "README.md"), encoding="utf-8").read()
    readme = os.path.join(base, "lab", "README.md")
    text = _flat(chapter + "\n" + (open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""))
    sections = set(re.findall(r"^## (\d+)\.", chapter, re.MULTILINE))
    number = os.path.basename(base)[:2]
    for where, rules in [("rules", lab.get("rules", []))] + [(f"hint '{h.get('id', '?')}'", h.get("rules", []))
                                                             for h in lab.get("hints", [])]:
        for r in rules:
            if _flat(r) not in text:
                problems.append(f"{rel}: {where}: the rule '{r}' is not stated in the chapter or the lab README")
    for h in lab.get("hints", []):
        if not h.get("rules"):
            problems.append(f"{rel}: hint '{h.get('id', '?')}' names no rule (\"rules\": phrases of the chapter)")
        cited = SECTION.findall(h["hint"])
        if not cited:
            problems.append(f"{rel}: hint '{h.get('id', '?')}' cites no 'chapter {number}, section N'")
        for ch, secs in cited:
            for sec in re.split(r", | and ", secs):
                if ch != number or sec.split(".")[0] not in sections:
                    problems.append(f"{rel}: hint '{h.get('id', '?')}' cites chapter {ch}, section {sec}: no such section")
    return problems


def check_tree(root):
    problems = []
    chapters = sorted(d for d in os.listdir(os.path.join(root, "chapters")) if re.match(r"^\d\d-", d))
    if not chapters:
        problems.append("no chapters found")
    for ch in chapters:
        base = os.path.join(root, "chapters", ch)
        readme = os.path.join(base, "README.md")
        if not os.path.exists(readme):
            problems.append(f"chapters/{ch}: no README.md")
            continue
        problems += check_file(readme, root, need_figure=True)
        lab = os.path.join(base, "lab", "README.md")
        if os.path.exists(lab):
            problems += check_file(lab, root, need_figure=False)
        problems += check_lab_rules(base, root)
    return problems


def selftest():
    """Each planted fault must be reported; the committed tree must be clean."""
    plants = [
        ("a banned word", lambda t: t + "\nRun it with seed 7.\n", "internal reference 'seed'"),
        ("the design file", lambda t: t + "\nSee DESIGN.md.\n", "internal reference 'DESIGN.md'"),
        ("a broken link", lambda t: t + "\n[x](no-such-file.md)\n", "does not exist"),
        ("no figure", lambda t: re.sub(r"!\[", "[", t), "shows no figure"),
        ("a lab rule the chapter drops", lambda t: t.replace("the final m = +∞ makes", "the final m decides"),
         "is not stated"),
        ("a hint citing a missing section", lambda t: t.replace("## 3. ", "## Three. "), "no such section"),
    ]
    failed = 0
    for name, plant, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(ROOT, "chapters"), os.path.join(tmp, "chapters"),
                            ignore=shutil.ignore_patterns("starter"))
            # links may point outside chapters/: mirror the rest of the tree as links
            for entry in os.listdir(ROOT):
                if entry != "chapters" and not entry.startswith("build"):
                    os.symlink(os.path.join(ROOT, entry), os.path.join(tmp, entry))
            target = os.path.join(tmp, "chapters", "01-softmax", "README.md")
            text = open(target, encoding="utf-8").read()
            open(target, "w", encoding="utf-8").write(plant(text))
            found = check_tree(tmp)
            ok = any(expect in p for p in found)
            print(f"selftest: {name}: {'reported' if ok else 'NOT REPORTED'}")
            failed += not ok
    return failed


def main():
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(1 if selftest() else 0)
    problems = check_tree(ROOT)
    for p in problems:
        print(p)
    print(f"chapters: {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
