"""Creates a session, runs a command in it, prints its output and exit code, and removes the
session.

    PYTHONPATH=sdk/python python3 sdk/python/examples/quickstart.py [SOCKET]

SOCKET defaults to $AIRLOCK_SOCKET, else /run/airlock/airlockd.sock.
"""
import sys

import airlock


def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else None
    with airlock.Client(address) as client:
        with client.session() as session:  # removed at the end of the block
            print(f"session {session.id} is {session.state}")
            result = session.exec(["sh", "-c", "echo hello from $(hostname)"])
        sys.stdout.write(result.stdout.decode(errors="replace"))
        print(f"exit code {result.exit_code}")


if __name__ == "__main__":
    main()
