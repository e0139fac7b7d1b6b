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
also importable from here (NotFound, PermissionDenied, LimitExceeded, Timeout, SessionFailed,
VersionMismatch...). ``API_LEVEL`` is the level of airlockd's API this SDK was built for:
connecting fails with VersionMismatch when airlockd does not speak it.
"""
from airlock._common import (API_LEVEL, TLS, VERSION, AuditRecord, AuditVerification, Event,
                             ExecResult, Exit, Exposure, Image, LogEntry, Metrics, NetworkRule,
                             Output, SecretInfo, SessionInfo, TimelineEvent, VersionInfo, Vm,
                             Volume, WorkspaceBase, WorkspaceBundle, WorkspaceBundleInfo,
                             WorkspaceChange, WorkspaceEntry, WorkspaceInfo)
from airlock.client import Client, ExecStream, Session, Watch
from airlock.errors import (AirlockError, CommandFailed, FailedPrecondition, InvalidArgument,
                            LimitExceeded, NotFound, PermissionDenied, SessionFailed, Timeout,
                            Unauthenticated, Unavailable, VersionMismatch)

__all__ = [
    "Client", "Session", "ExecStream", "Watch", "Event", "TLS", "ExecResult", "Exit", "Output",
    "SessionInfo", "LogEntry", "Metrics", "TimelineEvent", "Vm", "NetworkRule", "Exposure", "Image", "Volume",
    "VersionInfo", "WorkspaceBase", "WorkspaceEntry", "WorkspaceInfo", "WorkspaceChange",
    "WorkspaceBundle", "WorkspaceBundleInfo", "SecretInfo", "AuditRecord", "AuditVerification",
    "API_LEVEL", "AirlockError", "CommandFailed",
    "FailedPrecondition", "InvalidArgument", "LimitExceeded", "NotFound", "PermissionDenied",
    "SessionFailed", "Timeout", "Unauthenticated", "Unavailable", "VersionMismatch",
]
__version__ = VERSION
