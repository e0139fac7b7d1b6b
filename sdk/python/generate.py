#!/usr/bin/env python3
"""Generates the gRPC stubs of the Airlock API into airlock/v1/ (run before using or packaging
the SDK from a checkout; the project's build runs it). Uses Debian's protoc and
grpc_python_plugin (packages protobuf-compiler and protobuf-compiler-grpc).

    python3 sdk/python/generate.py [--out DIR]   # DIR defaults to this folder
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")
PROTO = "airlock/v1/airlock.proto"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--stamp", help="a file to touch once the stubs are written")
    args = parser.parse_args()
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        sys.stderr.write("generate.py: protoc and grpc_python_plugin are needed: "
                         "apt-get install protobuf-compiler protobuf-compiler-grpc\n")
        return 1
    os.makedirs(os.path.join(args.out, "airlock", "v1"), exist_ok=True)
    subprocess.run([protoc, "--proto_path", PROTO_ROOT, "--python_out", args.out,
                    "--pyi_out", args.out, "--grpc_python_out", args.out,
                    "--plugin=protoc-gen-grpc_python=" + plugin, PROTO], check=True)
    init = os.path.join(args.out, "airlock", "v1", "__init__.py")
    if not os.path.exists(init):
        with open(init, "w") as f:
            f.write('"""Generated gRPC stubs of airlock.v1 (see generate.py)."""\n')
    if args.stamp:
        with open(args.stamp, "w"):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
