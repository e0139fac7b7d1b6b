#!/usr/bin/python3
"""Checks that every file under src/ includes only the folders its own folder may use.

The folders are layers (each is its own CMake library, linking exactly these); an include that
runs the wrong way (the VM layer reaching into the daemon, the guest agent into host code)
fails this check with the file, the line and what the folder may use. Tests (*_test.cc) may
also use src/testing/.
Usage: scripts/check_layers.py [REPO]   (exit 1 on a violation)
"""
import os
import re
import sys

# Each folder and the folders it may include from (besides itself).
MAY_USE = {
    "common": [],
    "image": ["common"],
    "vm": ["common", "image"],
    "net": ["common", "image", "vm"],
    "secrets": ["common"],
    "workspace": ["common", "image"],
    "mcp": ["common"],
    "telemetry": ["common"],
    "providers": ["common", "image", "vm", "net"],
    "daemon": ["common", "image", "vm", "net", "secrets", "workspace", "telemetry", "providers"],
    "cli": ["common", "image", "vm", "net", "secrets", "workspace", "mcp", "telemetry",
            "providers"],
    "guest": ["common"],
    "dashboard": ["common"],
    "testing": ["common", "image", "vm"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"src/([a-z_]+)/')


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    problems = []
    for folder in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        if folder not in MAY_USE:
            problems.append(f"src/{folder}/ is a folder this check does not know: add it to "
                            "MAY_USE in scripts/check_layers.py with the folders it may use")
            continue
        for dirpath, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                allowed = set(MAY_USE[folder]) | {folder}
                if name.endswith("_test.cc"):
                    allowed.add("testing")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) not in allowed:
                            rel = os.path.relpath(path, root)
                            uses = ", ".join(MAY_USE[folder]) or "nothing else"
                            problems.append(f"{rel}:{number}: includes src/{m.group(1)}/, but "
                                            f"src/{folder}/ may use only {uses}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
