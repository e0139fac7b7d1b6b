"""Streams a long command's output as it comes, and says how it ended.

    PYTHONPATH=sdk/python python3 sdk/python/examples/stream.py [SOCKET]
"""
import sys

import airlock


def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else None
    script = "for i in 1 2 3 4 5; do echo step $i; sleep 0.5; done; echo done >&2"
    with airlock.Client(address) as client:
        with client.session() as session:
            for event in session.exec_stream(["sh", "-c", script]):
                if isinstance(event, airlock.Output):
                    out = sys.stdout if event.stream == "stdout" else sys.stderr
                    out.buffer.write(event.data)
                    out.flush()  # each piece as it comes, not when the buffer fills
                else:
                    print(f"exit code {event.exit_code}")


if __name__ == "__main__":
    main()
