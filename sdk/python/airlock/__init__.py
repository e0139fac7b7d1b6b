"""Airlock's Python SDK: sessions in microVMs for code you do not trust.

    import airlock
    with airlock.Client() as c:                       # the local socket
        with c.session(image="python:3.11-slim", memory="1g", allow=["pypi.org"]) as s:
            r = s.exec(["python3", "-c", "print(6*7)"])
            assert r.stdout == b"42\\n" and r.exit_code == 0
            for event in s.exec_stream(["pytest", "-q"]):
                print(event)                              # Output pieces as they come, then Exit
            s.files.write("/tmp/x.py", b"print(1)")
            s.pause()
            kids = s.fork(3)

``airlock.aio`` is the same API for asyncio. Errors are the classes of ``airlock.errors``,
also importable from here (NotFound, PermissionDenied, LimitExceeded, Timeout, SessionFailed...).
"""
from airlock._common import (TLS, Event, ExecResult, Exit, Exposure, Image, LogEntry, Metrics,
                             NetworkRule, Output, SessionInfo, Vm, Volume)
from airlock.client import Client, ExecStream, Session, Watch
from airlock.errors import (AirlockError, CommandFailed, FailedPrecondition, InvalidArgument,
                            LimitExceeded, NotFound, PermissionDenied, SessionFailed, Timeout,
                            Unauthenticated, Unavailable)

__all__ = [
    "Client", "Session", "ExecStream", "Watch", "Event", "TLS", "ExecResult", "Exit", "Output", "SessionInfo",
    "LogEntry", "Metrics", "Vm", "NetworkRule", "Exposure", "Image", "Volume", "AirlockError",
    "CommandFailed",
    "FailedPrecondition", "InvalidArgument", "LimitExceeded", "NotFound", "PermissionDenied",
    "SessionFailed", "Timeout", "Unauthenticated", "Unavailable",
]
__version__ = "0.1.0"
