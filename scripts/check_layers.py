#!/usr/bin/python3
"""Checks that every file under src/ includes only the folders its own folder may use.

The folders are layers (each is its own CMake library, linking exactly these); an include that
runs the wrong way (the VM layer reaching into the daemon, the guest agent into host code)
fails this check with the file, the line and what the folder may use. Tests (*_test.cc) may
also use src/testing/.
The table is src/layers.txt, which CMakeLists.txt links the libraries by.
Usage: scripts/check_layers.py [REPO]   (exit 1 on a violation)
"""
import os
import re
import sys


def read_layers(root: str) -> dict:
    """src/layers.txt: each folder and the folders it may include from (besides itself)."""
    layers = {}
    with open(os.path.join(root, "src", "layers.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            folder, _, uses = line.partition(":")
            layers[folder.strip()] = uses.split()
    return layers


INCLUDE = re.compile(r'^\s*#\s*include\s+"src/([a-z_]+)/')


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    may_use = read_layers(root)
    problems = []
    for folder in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        if folder not in may_use:
            problems.append(f"src/{folder}/ is a folder this check does not know: add it to "
                            "src/layers.txt with the folders it may use")
            continue
        for dirpath, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                allowed = set(may_use[folder]) | {folder}
                if name.endswith("_test.cc"):
                    allowed.add("testing")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) not in allowed:
                            rel = os.path.relpath(path, root)
                            uses = ", ".join(may_use[folder]) or "nothing else"
                            problems.append(f"{rel}:{number}: includes src/{m.group(1)}/, but "
                                            f"src/{folder}/ may use only {uses}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
