//! The SDK's errors: one variant per kind of failure a program handles differently, each with
//! airlockd's message (which says what to do next).

use std::fmt;

use crate::exec::ExecResult;

/// A gRPC status code, as airlockd answered a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    Ok,
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl Code {
    /// The code for a `grpc-status` value; numbers gRPC does not define are `Unknown`.
    pub fn from_i32(value: i32) -> Code {
        match value {
            0 => Code::Ok,
            1 => Code::Cancelled,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            6 => Code::AlreadyExists,
            7 => Code::PermissionDenied,
            8 => Code::ResourceExhausted,
            9 => Code::FailedPrecondition,
            10 => Code::Aborted,
            11 => Code::OutOfRange,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            15 => Code::DataLoss,
            16 => Code::Unauthenticated,
            _ => Code::Unknown,
        }
    }

    /// The code's name as gRPC spells it ("NOT_FOUND").
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error the SDK returns. `message` is airlockd's (or the SDK's) sentence for a person;
/// [`Error::code`] is the gRPC code when airlockd answered with one. The kinds match the
/// other SDKs' (Go's `ErrNotFound`, Python's `NotFound`, ...). A non-zero exit of a command is
/// not an error unless [`ExecOptions::check`](crate::ExecOptions::check) asks for one.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The request was refused as malformed (a bad limit, rule, path); also OUT_OF_RANGE
    /// (a file larger than the `max_bytes` asked).
    InvalidArgument { code: Option<Code>, message: String },
    /// No such session, image or volume (another tenant's sessions are never found).
    NotFound { message: String },
    /// The caller may not do this.
    PermissionDenied { message: String },
    /// airlockd could not identify the caller.
    Unauthenticated { message: String },
    /// A quota or limit refused the request, or ended the command (RESOURCE_EXHAUSTED).
    LimitExceeded { message: String },
    /// The session is in the wrong state for this (pausing while a command runs).
    FailedPrecondition { message: String },
    /// The session's VM died or could not start; `reason` says why, as airlockd recorded it.
    /// [`Error::is_failed_precondition`] is true for it too.
    SessionFailed { message: String, reason: String },
    /// A deadline passed. For a command's own timeout `result` holds what it printed until it
    /// was killed.
    Timeout { message: String, result: Option<Box<ExecResult>> },
    /// airlockd cannot be reached (not running, no permission on its socket, connection lost).
    Unavailable { message: String },
    /// [`ExecOptions::check`](crate::ExecOptions::check) and a non-zero exit: `result` has it all.
    CommandFailed { message: String, result: Box<ExecResult> },
    /// A reader or writer of the caller's failed (a file sent with `write_from`, received
    /// with `read_to`); airlockd kept nothing of an upload that failed so.
    Io(std::io::Error),
    /// airlockd and this SDK do not speak the same API ([`Client::connect`](crate::Client::connect)
    /// checks before it returns): airlockd is older than the SDK (`daemon_level` below
    /// `client_level`, or 0 when it predates API levels), or the SDK is older than the oldest
    /// client airlockd still serves. `message` says which to upgrade.
    VersionMismatch { message: String, daemon_level: u32, client_level: u32 },
    /// Any other gRPC status (UNIMPLEMENTED: airlockd is older than this SDK; INTERNAL...).
    Other { code: Code, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for a gRPC status that is not OK.
    pub(crate) fn from_status(code: Code, message: String) -> Error {
        let message = if message.is_empty() {
            match code {
                Code::Unavailable => "lost the connection to airlockd".to_string(),
                Code::Unimplemented => "airlockd does not know this call: it is older than this \
                                        SDK (upgrade airlockd, or use an SDK of its version)"
                    .to_string(),
                _ => format!("airlockd answered {}", code),
            }
        } else {
            message
        };
        match code {
            Code::InvalidArgument | Code::OutOfRange => Error::InvalidArgument { code: Some(code), message },
            Code::NotFound => Error::NotFound { message },
            Code::PermissionDenied => Error::PermissionDenied { message },
            Code::Unauthenticated => Error::Unauthenticated { message },
            Code::ResourceExhausted => Error::LimitExceeded { message },
            Code::FailedPrecondition => Error::FailedPrecondition { message },
            Code::DeadlineExceeded => Error::Timeout { message, result: None },
            Code::Unavailable => Error::Unavailable { message },
            _ => Error::Other { code, message },
        }
    }

    /// A request the SDK refuses before sending it.
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument { code: None, message: message.into() }
    }

    /// The gRPC code airlockd answered with, when it did.
    pub fn code(&self) -> Option<Code> {
        match self {
            Error::InvalidArgument { code, .. } => *code,
            Error::NotFound { .. } => Some(Code::NotFound),
            Error::PermissionDenied { .. } => Some(Code::PermissionDenied),
            Error::Unauthenticated { .. } => Some(Code::Unauthenticated),
            Error::LimitExceeded { .. } => Some(Code::ResourceExhausted),
            Error::FailedPrecondition { .. } | Error::SessionFailed { .. } => Some(Code::FailedPrecondition),
            Error::Timeout { result: None, .. } => Some(Code::DeadlineExceeded),
            Error::Unavailable { .. } => Some(Code::Unavailable),
            Error::Other { code, .. } => Some(*code),
            // The SDK's own verdicts, not a status of one call.
            Error::Timeout { .. }
            | Error::CommandFailed { .. }
            | Error::VersionMismatch { .. }
            | Error::Io(_) => None,
        }
    }

    /// The error's sentence (airlockd's, when it answered).
    pub fn message(&self) -> String {
        match self {
            Error::InvalidArgument { message, .. }
            | Error::NotFound { message }
            | Error::PermissionDenied { message }
            | Error::Unauthenticated { message }
            | Error::LimitExceeded { message }
            | Error::FailedPrecondition { message }
            | Error::SessionFailed { message, .. }
            | Error::Timeout { message, .. }
            | Error::Unavailable { message }
            | Error::CommandFailed { message, .. }
            | Error::VersionMismatch { message, .. }
            | Error::Other { message, .. } => message.clone(),
            Error::Io(e) => e.to_string(),
        }
    }

    /// Whether the session was in the wrong state: FailedPrecondition or SessionFailed (as Go's
    /// `errors.Is(err, ErrFailedPrecondition)`).
    pub fn is_failed_precondition(&self) -> bool {
        matches!(self, Error::FailedPrecondition { .. } | Error::SessionFailed { .. })
    }

    /// The command's result, for a command's timeout and for CommandFailed.
    pub fn result(&self) -> Option<&ExecResult> {
        match self {
            Error::Timeout { result, .. } => result.as_deref(),
            Error::CommandFailed { result, .. } => Some(result),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::SessionFailed { message, reason } if !reason.is_empty() && message != reason => {
                write!(f, "{} (the session failed: {})", message, reason)
            }
            _ => f.write_str(&self.message()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_the_kinds_the_other_sdks_use() {
        let kind = |code| Error::from_status(code, "m".into());
        assert!(matches!(kind(Code::NotFound), Error::NotFound { .. }));
        assert!(matches!(kind(Code::OutOfRange), Error::InvalidArgument { .. }));
        assert!(matches!(kind(Code::ResourceExhausted), Error::LimitExceeded { .. }));
        assert!(matches!(kind(Code::DeadlineExceeded), Error::Timeout { result: None, .. }));
        assert!(matches!(kind(Code::Internal), Error::Other { code: Code::Internal, .. }));
        assert_eq!(kind(Code::OutOfRange).code(), Some(Code::OutOfRange));
        assert_eq!(kind(Code::NotFound).to_string(), "m");
    }

    #[test]
    fn empty_messages_say_something_a_person_can_act_on() {
        let lost = Error::from_status(Code::Unavailable, String::new());
        assert_eq!(lost.to_string(), "lost the connection to airlockd");
        let old = Error::from_status(Code::Unimplemented, String::new());
        assert!(old.to_string().contains("older than this SDK"), "{}", old);
    }

    #[test]
    fn a_session_failure_is_also_a_failed_precondition() {
        let e = Error::SessionFailed { message: "m".into(), reason: "the VM died".into() };
        assert!(e.is_failed_precondition());
        assert_eq!(e.code(), Some(Code::FailedPrecondition));
        assert!(e.to_string().contains("the VM died"));
        assert!(!Error::invalid("x").is_failed_precondition());
    }
}
