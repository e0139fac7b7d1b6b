package airlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"airlock.dev/sdk/airlockv1"
)

const (
	exitAirlockError = 125
	stdinPiece       = 256 << 10
)

// ExecOptions are a command's settings; nil is all defaults.
type ExecOptions struct {
	// Stdin is read to its end and sent to the command (nil: /dev/null). For ExecStream,
	// OpenStdin keeps stdin open for Write and CloseStdin instead.
	Stdin     io.Reader
	OpenStdin bool
	Env       map[string]string
	Cwd       string
	User      string        // NAME or UID, optionally :GROUP; "": the image's user, else root
	Timeout   time.Duration // the command is killed after it; 0: none
	Check     bool          // Exec returns ErrCommandFailed on a non-zero exit
}

// Output is a piece of a command's output as it came.
type Output struct {
	Stderr bool // else stdout
	Data   []byte
}

// Exit is how a command ended: its exit code (128+N after signal N), and why when Airlock ended it.
type Exit struct {
	ExitCode int
	Signal   int
	TimedOut bool
	Message  string
}

// ExecEvent is one of a command's events: an Output, or its Exit (the last).
type ExecEvent struct {
	Output *Output
	Exit   *Exit
}

// ExecResult is a finished command: its exit and all its output, stdout and stderr apart.
type ExecResult struct {
	Exit
	Stdout, Stderr []byte
}

func execStart(argv []string, o *ExecOptions, sessionID string) (*airlockv1.ExecStart, error) {
	if o == nil {
		o = &ExecOptions{}
	}
	if o.Timeout < 0 {
		return nil, invalid("a timeout is zero or more")
	}
	start := &airlockv1.ExecStart{SessionId: sessionID, Stdin: o.Stdin != nil || o.OpenStdin,
		Cwd: []byte(o.Cwd), User: o.User, TimeoutSeconds: o.Timeout.Seconds()}
	for _, a := range argv {
		start.Argv = append(start.Argv, []byte(a))
	}
	for k, v := range o.Env {
		start.Env = append(start.Env, []byte(k+"="+v))
	}
	return start, nil
}

// ExecStream is a running command: Recv its events (output pieces, then one exit, then io.EOF).
// With stdin open, Write and CloseStdin feed it; Signal signals its process group; Cancel (or
// cancelling the context) ends it. Recv is for one goroutine; the rest are safe from any.
type ExecStream struct {
	call    airlockv1.Sessions_ExecClient
	cancel  context.CancelFunc
	session *Session
	ctx     context.Context
	mu      sync.Mutex // guards sends and closed
	closed  bool
	exit    *Exit
}

func (c *Client) startExec(ctx context.Context, start *airlockv1.ExecStart, o *ExecOptions,
	session *Session) (*ExecStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	call, err := c.sessions.Exec(ctx)
	if err != nil {
		cancel()
		return nil, fromRPC(err)
	}
	st := &ExecStream{call: call, cancel: cancel, session: session, ctx: ctx}
	if err := st.send(&airlockv1.ExecRequest{Kind: &airlockv1.ExecRequest_Start{Start: start}}); err != nil {
		cancel()
		return nil, err
	}
	if o != nil && o.Stdin != nil {
		go st.feed(o.Stdin)
	}
	return st, nil
}

func (st *ExecStream) send(r *airlockv1.ExecRequest) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	if err := st.call.Send(r); err != nil && !isEOF(err) {
		return fromRPC(err)
	}
	return nil
}

func (st *ExecStream) feed(r io.Reader) {
	buf := make([]byte, stdinPiece)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if st.Write(buf[:n]) != nil {
				break
			}
		}
		if err != nil {
			break // EOF, or a reader that failed: either way stdin ends
		}
	}
	st.CloseStdin() //nolint:errcheck // the command's exit tells what happened
}

// Write sends stdin to the command.
func (st *ExecStream) Write(p []byte) error {
	for at := 0; at < len(p); at += stdinPiece {
		end := at + stdinPiece
		if end > len(p) {
			end = len(p)
		}
		piece := append([]byte(nil), p[at:end]...)
		if err := st.send(&airlockv1.ExecRequest{Kind: &airlockv1.ExecRequest_Stdin{Stdin: piece}}); err != nil {
			return err
		}
	}
	return nil
}

// CloseStdin ends the command's stdin.
func (st *ExecStream) CloseStdin() error {
	return st.send(&airlockv1.ExecRequest{Kind: &airlockv1.ExecRequest_StdinEof{StdinEof: true}})
}

// Signal sends a signal (like 15) to the command's process group.
func (st *ExecStream) Signal(signal int) error {
	if signal <= 0 {
		return invalid("a signal is a positive number, like 15")
	}
	return st.send(&airlockv1.ExecRequest{Kind: &airlockv1.ExecRequest_Signal{Signal: int32(signal)}})
}

// Cancel ends the command unless it has ended.
func (st *ExecStream) Cancel() { st.cancel() }

func (st *ExecStream) halfClose() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed {
		st.closed = true
		st.call.CloseSend() //nolint:errcheck // the call ends either way
	}
}

// Recv returns the next event; after the Exit, io.EOF once airlockd has ended the call (the
// session is free for its next use, a pause for one, only then).
func (st *ExecStream) Recv() (ExecEvent, error) {
	if st.exit != nil {
		for {
			if _, err := st.call.Recv(); err != nil {
				break
			}
		}
		st.cancel()
		return ExecEvent{}, io.EOF
	}
	for {
		r, err := st.call.Recv()
		if err != nil {
			st.cancel()
			if isEOF(err) {
				return ExecEvent{}, &Error{Kind: errors.New("airlock error"),
					Message: "airlockd ended the command without an exit status"}
			}
			if st.session != nil {
				return ExecEvent{}, st.session.explain(context.Background(), err)
			}
			return ExecEvent{}, fromRPC(err)
		}
		switch k := r.Kind.(type) {
		case *airlockv1.ExecResponse_Stdout:
			return ExecEvent{Output: &Output{Data: k.Stdout}}, nil
		case *airlockv1.ExecResponse_Stderr:
			return ExecEvent{Output: &Output{Stderr: true, Data: k.Stderr}}, nil
		case *airlockv1.ExecResponse_Exit:
			st.exit = &Exit{ExitCode: int(k.Exit.Code), Signal: int(k.Exit.Signal),
				TimedOut: k.Exit.TimedOut, Message: k.Exit.Message}
			st.halfClose() // airlockd ends the call after the exit once the client half-closes
			return ExecEvent{Exit: st.exit}, nil
		}
	}
}

func (st *ExecStream) finish(argv []string, o *ExecOptions) (*ExecResult, error) {
	defer st.cancel()
	var out, errs bytes.Buffer
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if ev.Output != nil && ev.Output.Stderr {
			errs.Write(ev.Output.Data)
		} else if ev.Output != nil {
			out.Write(ev.Output.Data)
		}
	}
	r := &ExecResult{Exit: *st.exit, Stdout: out.Bytes(), Stderr: errs.Bytes()}
	name := "the image's command"
	if len(argv) > 0 {
		name = argv[0]
	}
	if r.TimedOut {
		return r, &Error{Kind: ErrTimeout, Message: name + " ran past its timeout and was killed", Result: r}
	}
	if r.ExitCode == exitAirlockError && r.Message != "" && st.session != nil {
		if i, err := st.session.Refresh(context.Background()); err == nil && i.State == "failed" {
			return r, &Error{Kind: ErrSessionFailed, Message: r.Message, Reason: i.Reason}
		}
	}
	if o != nil && o.Check && r.ExitCode != 0 {
		why := ""
		if r.Message != "" {
			why = ": " + r.Message
		}
		return r, &Error{Kind: ErrCommandFailed, Message: fmt.Sprintf("%s exited with %d%s", name,
			r.ExitCode, why), Result: r}
	}
	return r, nil
}

// Exec runs a command and waits for it: its exit code, stdout and stderr. A timeout returns
// ErrTimeout (Error.Result has what it printed); Check returns ErrCommandFailed on a non-zero
// exit; a session whose VM died returns ErrSessionFailed. A non-zero exit is not an error
// otherwise.
func (s *Session) Exec(ctx context.Context, argv []string, o *ExecOptions) (*ExecResult, error) {
	if o != nil && o.OpenStdin {
		return nil, invalid("OpenStdin is for ExecStream; give Exec a Stdin reader")
	}
	st, err := s.ExecStream(ctx, argv, o)
	if err != nil {
		return nil, err
	}
	return st.finish(argv, o)
}

// ExecStream starts a command and returns its stream.
func (s *Session) ExecStream(ctx context.Context, argv []string, o *ExecOptions) (*ExecStream, error) {
	start, err := execStart(argv, o, s.ID())
	if err != nil {
		return nil, err
	}
	return s.c.startExec(ctx, start, o, s)
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
