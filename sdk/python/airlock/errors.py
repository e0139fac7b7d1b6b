"""The errors the SDK raises: one class per kind of failure a program handles differently.

Every error is an :class:`AirlockError` carrying airlockd's message (which says what to do). The
classes also derive from the closest built-in exception, so ``except LookupError`` or
``except TimeoutError`` work as a Python programmer expects.
"""
from __future__ import annotations

from typing import Optional

import grpc


class AirlockError(Exception):
    """A call to airlockd failed. ``code`` is the gRPC status code, ``message`` airlockd's words."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.message = message
        self.code = code


class InvalidArgument(AirlockError, ValueError):
    """The request was refused as malformed (a bad limit, rule, path or argument)."""


class NotFound(AirlockError, LookupError):
    """No such session or image (another tenant's sessions are never found either)."""


class PermissionDenied(AirlockError, PermissionError):
    """The caller may not do this."""


class Unauthenticated(AirlockError, PermissionError):
    """airlockd could not identify the caller (no client certificate, not on the socket)."""


class LimitExceeded(AirlockError):
    """A quota or limit refused the request, or ended the command (RESOURCE_EXHAUSTED)."""


class FailedPrecondition(AirlockError):
    """The session is in the wrong state for this (e.g. pausing while a command runs)."""


class SessionFailed(FailedPrecondition):
    """The session's VM died or could not start; ``reason`` says why (as airlockd recorded it)."""

    def __init__(self, message: str, reason: str = "", code: Optional[grpc.StatusCode] = None):
        super().__init__(message, code)
        self.reason = reason


class Timeout(AirlockError, TimeoutError):
    """A deadline passed. For a command's own timeout, ``result`` holds what it printed until
    it was killed (an :class:`airlock.ExecResult` with ``timed_out`` set)."""

    def __init__(self, message: str, result=None, code: Optional[grpc.StatusCode] = None):
        super().__init__(message, code)
        self.result = result


class Unavailable(AirlockError, ConnectionError):
    """airlockd cannot be reached (not running, no permission on its socket, connection lost)."""


class VersionMismatch(AirlockError):
    """This SDK and airlockd do not speak the same API level; the message says which of the two
    to upgrade. ``daemon_level`` is airlockd's level (0 when it predates levels or did not say),
    ``client_level`` the SDK's."""

    def __init__(self, message: str, daemon_level: int = 0, client_level: int = 0,
                 code: Optional[grpc.StatusCode] = None):
        super().__init__(message, code)
        self.daemon_level = daemon_level
        self.client_level = client_level


class CommandFailed(AirlockError):
    """``exec(..., check=True)``: the command ended with a non-zero exit; ``result`` has it all."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: LimitExceeded,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
}


def from_rpc_error(error: grpc.RpcError) -> AirlockError:
    """The SDK's error for a failed gRPC call."""
    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or ""
    if code == grpc.StatusCode.UNAVAILABLE and not details:
        details = "lost the connection to airlockd"
    cls = _BY_CODE.get(code, AirlockError)
    return cls(details or str(error), code=code)
