#!/usr/bin/env python3
"""Checks that README.md and docs/*.md name only what exists (run by ctest as docs_name_what_exists).

A doc that points at a file that moved, a heading that was renamed, a test that was renamed or a
line number is a bug (a line number goes stale with the next edit). Reported, one per line:
- a relative link whose file, or whose #anchor in a Markdown file, does not exist;
- a `path/in/the/tree` in backticks, outside code blocks, that does not exist (paths under the
  tree's top folders only; globs and placeholders such as <name> are skipped);
- a `Suite.Test` in backticks whose suite is a test suite of tests/ but which names no test of it,
  or whose suite ends in "Test" and is no suite at all;
- a `Class::member` in backticks whose class is declared in include/ or src/ but whose member is
  no name there at all;
- a file reference with a line number (`file.cpp:120`, `#L120`).

  scripts/check_docs.py [ROOT]     # exit status 1 when anything is reported
  scripts/check_docs.py --self-test  # a tree with one problem of each kind: each must be reported
"""
import os
import re
import sys
import tempfile

TOP = ("src", "include", "lua", "tests", "scripts", "benchmarks", "tools", "examples", "cmake", "docs",
       "packaging", ".ci")
PATH = re.compile(r"`((?:%s)/[A-Za-z0-9_./\-]+)`" % "|".join(re.escape(t) for t in TOP))
LINK = re.compile(r"\]\(([^)\s]+)\)")
TEST_NAME = re.compile(r"`([A-Z]\w+)\.([A-Z]\w+)`")
LINE_NUMBER = re.compile(r"\.(?:cpp|hpp|h|lua|sh|py|cmake|md|txt)(?::\d+|#L\d+)\b")
TEST_MACRO = re.compile(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")
MEMBER = re.compile(r"`(?:redlimit::)?(?:detail::)?(\w+)::(\w+)")


def anchors(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    out, seen = set(), {}
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            m = None if in_code else re.match(r"^#+\s+(.*)$", line)
            if not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def known_tests(root):
    tests = set()
    for folder, _, names in os.walk(os.path.join(root, "tests")):
        for name in names:
            if name.endswith((".cpp", ".hpp")):
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    tests.update(a + "." + b for a, b in TEST_MACRO.findall(f.read()))
    return tests


def code_names(root):
    """The classes declared in include/ and src/, and every name that appears there."""
    classes, names = set(), set()
    for top in ("include", "src"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith((".hpp", ".cpp", ".h")):
                    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    classes.update(re.findall(r"\b(?:class|struct)\s+(\w+)", text))
                    names.update(re.findall(r"\b\w+\b", text))
    return classes, names


def check_line(root, doc, i, line, known, problems):
    tests, suites, classes, names = known
    where = "%s:%d" % (os.path.relpath(doc, root), i)
    for target in LINK.findall(line):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(doc), file)) if file else doc
        if not os.path.exists(path):
            problems.append("%s: link to a missing file: %s" % (where, target))
        elif anchor and path.endswith(".md") and anchor not in anchors(path):
            problems.append("%s: link to a missing heading: %s" % (where, target))
    for ref in PATH.findall(line):
        ref = ref.rstrip(".")
        if not any(c in ref for c in "*<>") and not os.path.exists(os.path.join(root, ref)):
            problems.append("%s: names a missing path: %s" % (where, ref))
    for suite, name in TEST_NAME.findall(line):
        if suite in suites and suite + "." + name not in tests:
            problems.append("%s: names a missing test: %s.%s" % (where, suite, name))
        elif suite.endswith("Test") and suite not in suites:
            problems.append("%s: names a missing test suite: %s.%s" % (where, suite, name))
    for cls, member in MEMBER.findall(line):
        if cls in classes and member not in names:
            problems.append("%s: names a missing member: %s::%s" % (where, cls, member))
    if LINE_NUMBER.search(line):
        problems.append("%s: points at a line number: %s" % (where, line.strip()))


def self_test():
    """A tree with one problem of each kind, and one good reference of each: exactly the problems
    are reported."""
    files = {
        "tests/a_test.cpp": "TEST_F(GoodTest, Exists) {}\nTEST(OtherSuite, Exists) {}\n",
        "src/real.cpp": "struct Options { int size; };\n",
        "docs/other.md": "# A heading\n",
        "README.md": "[ok](docs/other.md#a-heading) `src/real.cpp` `GoodTest.Exists`\n",
        "docs/x.md": "\n".join([
            "[gone](missing.md)",
            "[bad anchor](other.md#no-such-heading)",
            "`src/moved.cpp`",
            "`GoodTest.Renamed`",
            "`GoneTest.Anything`",
            "see src/real.cpp:12 for it",
            "`Options::gone`",
            "```",
            "`src/inside_a_code_block.cpp`",
            "```",
            "`OtherSuite.Exists` `src/*.cpp` `tests/<suite>/` `Options::size` `std::vector`",
        ]) + "\n",
    }
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        problems = check(root)
    expected = ["docs/x.md:1: link to a missing file", "docs/x.md:2: link to a missing heading",
                "docs/x.md:3: names a missing path", "docs/x.md:4: names a missing test:",
                "docs/x.md:5: names a missing test suite", "docs/x.md:6: points at a line number",
                "docs/x.md:7: names a missing member"]
    missed = [e for e in expected if not any(p.startswith(e) for p in problems)]
    extra = [p for p in problems if not any(p.startswith(e) for e in expected)]
    for m in missed:
        print("self-test: not reported: " + m)
    for x in extra:
        print("self-test: reported wrongly: " + x)
    print("check_docs self-test: %d problems reported, %d expected" % (len(problems), len(expected)))
    return 1 if missed or extra or len(problems) != len(expected) else 0


def check(root):
    """The problems of the documents under `root`."""
    docs = [os.path.join(root, "README.md")]
    docs += sorted(os.path.join(root, "docs", n) for n in os.listdir(os.path.join(root, "docs")) if n.endswith(".md"))
    tests = known_tests(root)
    suites = {t.split(".")[0] for t in tests}
    known = (tests, suites) + code_names(root)
    problems = [] if tests else ["no tests found under %s/tests" % root]
    for doc in docs:
        in_code = False
        with open(doc, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                if not in_code:
                    check_line(root, doc, i, line, known, problems)
    return problems


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = check(root)
    for p in problems:
        print(p)
    print("check_docs: %d problems in README.md and docs/" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
