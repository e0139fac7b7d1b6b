package airlock

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kinds of failure a program handles differently; test with errors.Is(err, airlock.ErrNotFound).
var (
	// ErrInvalidArgument: the request was refused as malformed (a bad limit, rule, path).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: no such session or image (another tenant's sessions are never found).
	ErrNotFound = errors.New("not found")
	// ErrPermissionDenied: the caller may not do this.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnauthenticated: airlockd could not identify the caller.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrLimitExceeded: a quota or limit refused the request (RESOURCE_EXHAUSTED).
	ErrLimitExceeded = errors.New("limit exceeded")
	// ErrFailedPrecondition: the session is in the wrong state for this.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrSessionFailed: the session's VM died or could not start (Error.Reason says why). Such
	// an error is also an ErrFailedPrecondition.
	ErrSessionFailed = errors.New("session failed")
	// ErrTimeout: a deadline passed; for a command's own timeout Error.Result has its output.
	ErrTimeout = errors.New("timeout")
	// ErrUnavailable: airlockd cannot be reached.
	ErrUnavailable = errors.New("unavailable")
	// ErrCommandFailed: ExecOptions.Check and a non-zero exit; Error.Result has it all.
	ErrCommandFailed = errors.New("command failed")
	// ErrVersionMismatch: airlockd and this SDK speak API levels that do not work together
	// (Dial checks); the message says which to upgrade, Error.DaemonLevel and ClientLevel why.
	ErrVersionMismatch = errors.New("version mismatch")
)

// Error is every error the SDK returns: a kind (one of the Err values), airlockd's message
// (which says what to do), and for some kinds the session's failure reason or the command's
// result.
type Error struct {
	Kind    error
	Code    codes.Code // the gRPC status code, when airlockd answered with one
	Message string
	Reason  string      // ErrSessionFailed: why, as airlockd recorded it
	Result  *ExecResult // ErrTimeout of a command, ErrCommandFailed
	// ErrVersionMismatch: the daemon's API level (0 when it did not say) and this SDK's.
	DaemonLevel, ClientLevel uint32
}

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrNotFound) work.
func (e *Error) Unwrap() error { return e.Kind }

// Is lets a session failure also match ErrFailedPrecondition.
func (e *Error) Is(target error) bool {
	return target == e.Kind || (e.Kind == ErrSessionFailed && target == ErrFailedPrecondition)
}

func invalid(format string, args ...interface{}) error {
	return &Error{Kind: ErrInvalidArgument, Code: codes.InvalidArgument,
		Message: fmt.Sprintf(format, args...)}
}

var byCode = map[codes.Code]error{
	codes.InvalidArgument:    ErrInvalidArgument,
	codes.OutOfRange:         ErrInvalidArgument,
	codes.NotFound:           ErrNotFound,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.ResourceExhausted:  ErrLimitExceeded,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.DeadlineExceeded:   ErrTimeout,
	codes.Unavailable:        ErrUnavailable,
}

// fromRPC turns a gRPC error into the SDK's; nil stays nil.
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	var own *Error
	if errors.As(err, &own) {
		return err
	}
	s, ok := status.FromError(err)
	if !ok {
		return &Error{Kind: errors.New("airlock error"), Message: err.Error()}
	}
	message := s.Message()
	if s.Code() == codes.Unavailable && message == "" {
		message = "lost the connection to airlockd"
	}
	kind, known := byCode[s.Code()]
	if !known {
		kind = errors.New(s.Code().String())
	}
	return &Error{Kind: kind, Code: s.Code(), Message: message}
}
