#!/usr/bin/env python3
"""Every relative link in README.md, golden/README.md and docs/*.md names a
file or directory of the repository, and every path written in backquotes
that looks like one of the repository's own (src/..., docs/..., tests/...,
tools/..., include/..., examples/..., python/...) exists too: the docs must
never point at something a reader cannot open.

usage: docs_links.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
docs = ["README.md", os.path.join("golden", "README.md")]
docs += [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(root, "docs")))
         if f.endswith(".md")]
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
code_path = re.compile(r"`((?:src|docs|tests|tools|include|examples|python|golden)/[A-Za-z0-9_./-]+)`")
failures = 0
checked = 0
for doc in docs:
    path = os.path.join(root, doc)
    if not os.path.exists(path):
        continue
    text = open(path, encoding="utf-8").read()
    for target in link.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file = target.split("#", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file))
        checked += 1
        if not os.path.exists(resolved):
            print(f"FAIL {doc}: link to {target} names nothing ({resolved})")
            failures += 1
    for target in code_path.findall(text):
        target = target.rstrip(".")
        # globs and placeholders name families of files, not one
        if any(c in target for c in "*<>") or "..." in target:
            continue
        checked += 1
        if not os.path.exists(os.path.join(root, target)):
            print(f"FAIL {doc}: `{target}` is not a path of the repository")
            failures += 1
print(f"{checked} links and paths checked, {failures} broken")
sys.exit(1 if failures else 0)
