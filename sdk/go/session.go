package airlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// SessionOptions is what a new session gets; zero fields take airlockd's defaults.
type SessionOptions struct {
	Image       string // an image airlockd has; "": its default image
	Vcpus       uint32
	Memory      string // "512m", "1g", or bytes ("536870912")
	Disk        string // the writable layer's size, as Memory
	Pids        uint32
	TTL         time.Duration  // the session is destroyed after this; 0: never
	IdleTimeout *time.Duration // it pauses itself after this long unused; nil: 5 minutes, 0: never
	NetRate     string         // egress bytes per second each way, as Memory
	Allow       []string       // egress rules: "pypi.org", "*.example.com:8443"; none by default
	Presets     []string       // rule sets: "pypi", "npm", "github", ...
	// Secrets the guest holds only placeholders of: "NAME=SOURCE@HOST[,HOST...]" to the value
	// (nil: read here, with this process's rights, for env:, file: and op:// sources, as the CLI
	// does; shared: sources are read by airlockd).
	Secrets map[string][]byte
	// Volumes of the caller's to attach: "NAME:/PATH" (read-write: one session at a time) or
	// "NAME:/PATH:ro" (read-only: any number at once).
	Volumes []string
	// In a fleet, the host Sessions.Create makes it on (its airlockd --host-id); "": the one with
	// room. A one-shot Run is made on the host called and refuses it.
	Host string
}

var sizePattern = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)[iI]?[bB]?\s*$`)

// ParseSize reads "512m", "1g", "1GiB" or a number of bytes (binary units, as the CLI's).
func ParseSize(value, what string) (uint64, error) {
	m := sizePattern.FindStringSubmatch(value)
	if m == nil {
		return 0, invalid("%s %q is not a size: give bytes, or a number with k, m, g or t (\"512m\", \"1g\")",
			what, value)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[strings.ToLower(m[2])]
	return uint64(n * float64(uint64(1)<<shift)), nil
}

func (o SessionOptions) limits() (*airlockv1.Limits, error) {
	l := &airlockv1.Limits{Vcpus: o.Vcpus, Pids: o.Pids}
	for _, s := range []struct {
		value, what string
		out         *uint64
	}{{o.Memory, "memory", &l.MemoryBytes}, {o.Disk, "disk", &l.DiskBytes},
		{o.NetRate, "net rate", &l.NetBytesPerSecond}} {
		if s.value == "" {
			continue
		}
		n, err := ParseSize(s.value, s.what)
		if err != nil {
			return nil, err
		}
		*s.out = n
	}
	if o.TTL < 0 || (o.IdleTimeout != nil && *o.IdleTimeout < 0) {
		return nil, invalid("TTL and IdleTimeout are zero or more")
	}
	l.TtlSeconds = uint64(o.TTL / time.Second)
	if o.IdleTimeout != nil {
		idle := uint64(*o.IdleTimeout / time.Second)
		l.IdleTimeoutSeconds = &idle
	}
	return l, nil
}

func (o SessionOptions) secrets() ([]*airlockv1.SecretBinding, error) {
	var out []*airlockv1.SecretBinding
	for spec, value := range o.Secrets {
		b := &airlockv1.SecretBinding{Spec: spec, Value: value}
		if value == nil {
			source := ""
			if i := strings.Index(spec, "="); i >= 0 {
				source = strings.SplitN(spec[i+1:], "@", 2)[0]
			}
			switch {
			case strings.HasPrefix(source, "env:"):
				v, ok := os.LookupEnv(source[4:])
				if !ok {
					return nil, invalid("secret %s: $%s is not set", spec, source[4:])
				}
				b.Value = []byte(v)
			case strings.HasPrefix(source, "file:"):
				v, err := os.ReadFile(source[5:])
				if err != nil {
					return nil, invalid("secret %s: %v", spec, err)
				}
				b.Value = v
			case strings.HasPrefix(source, "op://"):
				v, err := opRead(source)
				if err != nil {
					return nil, invalid("secret %s: %v", spec, err)
				}
				b.Value = v
			}
		}
		out = append(out, b)
	}
	return out, nil
}

func (o SessionOptions) fillExec(start *airlockv1.ExecStart) error {
	if o.Host != "" {
		return invalid("Host is for Sessions.Create: a one-shot run is made on the host called")
	}
	l, err := o.limits()
	if err != nil {
		return err
	}
	s, err := o.secrets()
	if err != nil {
		return err
	}
	v, err := volumeMounts(o.Volumes)
	if err != nil {
		return err
	}
	start.Image, start.Limits, start.Allow, start.AllowPreset, start.Secrets, start.Volumes =
		o.Image, l, o.Allow, o.Presets, s, v
	return nil
}

// Sessions creates, finds and lists the caller's sessions.
type Sessions struct{ c *Client }

// Create boots (or restores) a session and returns once it runs commands.
func (ss *Sessions) Create(ctx context.Context, o SessionOptions) (*Session, error) {
	l, err := o.limits()
	if err != nil {
		return nil, err
	}
	secrets, err := o.secrets()
	if err != nil {
		return nil, err
	}
	volumes, err := volumeMounts(o.Volumes)
	if err != nil {
		return nil, err
	}
	s, err := ss.c.sessions.Create(ctx, &airlockv1.CreateSessionRequest{Image: o.Image, Limits: l,
		Allow: o.Allow, AllowPreset: o.Presets, Secrets: secrets, Volumes: volumes, Host: o.Host})
	if err != nil {
		return nil, fromRPC(err)
	}
	return newSession(ss.c, s), nil
}

// Get finds one of the caller's sessions.
func (ss *Sessions) Get(ctx context.Context, id string) (*Session, error) {
	if id == "" {
		return nil, invalid("a session id is a non-empty string (as Create returned)")
	}
	s, err := ss.c.sessions.Get(ctx, &airlockv1.GetSessionRequest{Id: id})
	if err != nil {
		return nil, fromRPC(err)
	}
	return newSession(ss.c, s), nil
}

// List returns the caller's sessions, newest first (stopped and failed ones too).
func (ss *Sessions) List(ctx context.Context) ([]*Session, error) {
	reply, err := ss.c.sessions.List(ctx, &airlockv1.ListSessionsRequest{})
	if err != nil {
		return nil, fromRPC(err)
	}
	out := make([]*Session, 0, len(reply.Sessions))
	for _, s := range reply.Sessions {
		out = append(out, newSession(ss.c, s))
	}
	return out, nil
}

// SessionInfo is a session as airlockd last described it.
type SessionInfo struct {
	ID, Image, ImageDigest string
	State                  string // "creating", "running", "paused", "stopped" or "failed"
	Reason                 string // why it paused, stopped or failed
	Hostname               string
	Created, LastUsed      time.Time
	Limits                 Limits
	Tenant                 string        // who owns it: "uid:1000", "cert:NAME", "oidc:ISSUER#SUBJECT"
	Volumes                []VolumeMount // the volumes it attaches
}

// Limits are a session's limits as airlockd applies them (the defaults filled in).
type Limits struct {
	Vcpus       uint32
	Memory      uint64 // guest RAM in bytes
	Pids        uint32
	Disk        uint64         // the writable layer in bytes
	TTL         time.Duration  // the session is destroyed this long after creation; 0: never
	IdleTimeout *time.Duration // it pauses itself after this long unused; nil: 5 minutes, 0: never
	NetRate     uint64         // egress bytes per second each way; 0: no limit
}

// VolumeMount is a volume a session attaches, at Path in its guest.
type VolumeMount struct {
	Name, Path string
	ReadOnly   bool
}

func limitsOf(l *airlockv1.Limits) Limits {
	if l == nil {
		return Limits{}
	}
	out := Limits{Vcpus: l.Vcpus, Memory: l.MemoryBytes, Pids: l.Pids, Disk: l.DiskBytes,
		TTL: time.Duration(l.TtlSeconds) * time.Second, NetRate: l.NetBytesPerSecond}
	if l.IdleTimeoutSeconds != nil {
		idle := time.Duration(*l.IdleTimeoutSeconds) * time.Second
		out.IdleTimeout = &idle
	}
	return out
}

var states = map[airlockv1.SessionState]string{
	airlockv1.SessionState_SESSION_STATE_CREATING: "creating",
	airlockv1.SessionState_SESSION_STATE_RUNNING:  "running",
	airlockv1.SessionState_SESSION_STATE_STOPPED:  "stopped",
	airlockv1.SessionState_SESSION_STATE_FAILED:   "failed",
	airlockv1.SessionState_SESSION_STATE_PAUSED:   "paused",
}

func info(s *airlockv1.Session) SessionInfo {
	state, ok := states[s.State]
	if !ok {
		state = "unknown"
	}
	out := SessionInfo{ID: s.Id, Image: s.Image, ImageDigest: s.ImageDigest, State: state,
		Reason: s.Reason, Hostname: s.Hostname, Created: time.UnixMilli(s.CreatedUnixMs),
		LastUsed: time.UnixMilli(s.LastUsedUnixMs), Limits: limitsOf(s.Limits), Tenant: s.Tenant}
	for _, v := range s.Volumes {
		out.Volumes = append(out.Volumes, VolumeMount{v.Name, v.Path, v.ReadOnly})
	}
	return out
}

// Session is one session. Info is its last known state (Refresh asks again). Its methods are
// safe for concurrent use except that Info is updated by Refresh, Pause and Resume.
type Session struct {
	c    *Client
	Info SessionInfo
	// Files are its files; Network its egress policy; Secrets what it holds placeholders of;
	// Workspace the project it was made with (`airlock session create --workspace DIR`).
	Files     *Files
	Network   *Network
	Secrets   *Secrets
	Workspace *Workspace
}

func newSession(c *Client, s *airlockv1.Session) *Session {
	session := &Session{c: c, Info: info(s)}
	session.Files = &Files{session}
	session.Network = &Network{session}
	session.Secrets = &Secrets{session}
	session.Workspace = &Workspace{session}
	return session
}

// ID is the session's id.
func (s *Session) ID() string { return s.Info.ID }

// explain turns a FAILED_PRECONDITION on a session whose VM failed into ErrSessionFailed.
func (s *Session) explain(ctx context.Context, err error) error {
	err = fromRPC(err)
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrFailedPrecondition {
		if i, rerr := s.Refresh(ctx); rerr == nil && i.State == "failed" {
			return &Error{Kind: ErrSessionFailed, Code: e.Code, Message: e.Message, Reason: i.Reason}
		}
	}
	return err
}

// Refresh asks airlockd for the session's state.
func (s *Session) Refresh(ctx context.Context) (SessionInfo, error) {
	r, err := s.c.sessions.Get(ctx, &airlockv1.GetSessionRequest{Id: s.ID()})
	if err != nil {
		return s.Info, fromRPC(err)
	}
	s.Info = info(r)
	return s.Info, nil
}

// Pause snapshots the session to disk and ends its VM (refused while a command runs).
func (s *Session) Pause(ctx context.Context) error {
	r, err := s.c.sessions.Pause(ctx, &airlockv1.PauseSessionRequest{Id: s.ID()})
	if err != nil {
		return s.explain(ctx, err)
	}
	s.Info = info(r)
	return nil
}

// Resume restores a paused session's VM (commands resume it too).
func (s *Session) Resume(ctx context.Context) error {
	r, err := s.c.sessions.Resume(ctx, &airlockv1.ResumeSessionRequest{Id: s.ID()})
	if err != nil {
		return s.explain(ctx, err)
	}
	s.Info = info(r)
	return nil
}

// Fork makes count new sessions from one snapshot of this one, each with its own disk copy.
func (s *Session) Fork(ctx context.Context, count int) ([]*Session, error) {
	if count < 1 {
		return nil, invalid("fork count is 1 or more")
	}
	r, err := s.c.sessions.Fork(ctx, &airlockv1.ForkSessionRequest{Id: s.ID(), Count: uint32(count)})
	if err != nil {
		return nil, s.explain(ctx, err)
	}
	out := make([]*Session, 0, len(r.Sessions))
	for _, k := range r.Sessions {
		out = append(out, newSession(s.c, k))
	}
	return out, nil
}

// Remove destroys the VM and every file of the session; its record stays ("stopped").
func (s *Session) Remove(ctx context.Context) error {
	_, err := s.c.sessions.Remove(ctx, &airlockv1.RemoveSessionRequest{Id: s.ID()})
	return s.explain(ctx, err)
}

// Files are a session's files, through its guest agent, of any size. A paused session is
// resumed first.
type Files struct{ s *Session }

// filePiece is the most airlockd takes in one message of a file.
const filePiece = 1 << 20

func guestPath(path string) error {
	if !strings.HasPrefix(path, "/") {
		return invalid("give an absolute path in the guest, like /root/data.txt")
	}
	return nil
}

// readError is an error of the reader an upload sends, not of the call.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// sendPieces sends everything r gives in pieces of at most filePiece bytes, the last one with
// last set. An error of r comes back as a *readError (the caller cancels the call, so that
// airlockd keeps nothing of it); an error of send as it is.
func sendPieces(r io.Reader, send func(data []byte, last bool) error) error {
	buf := make([]byte, filePiece)
	for {
		n, err := io.ReadFull(r, buf)
		last := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !last {
			return &readError{err}
		}
		if err := send(buf[:n], last); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

// Write creates or replaces a file (and its missing directories) with data and the permission
// bits mode (0: 0644).
func (f *Files) Write(ctx context.Context, path string, data []byte, mode uint32) error {
	_, err := f.WriteFrom(ctx, path, bytes.NewReader(data), mode)
	return err
}

// WriteFrom creates or replaces a file with everything r gives until io.EOF, sent as it is
// read, and returns the bytes written. The file changes only once all of it is in the guest:
// if r fails part-way, the old file stays and r's error is returned.
func (f *Files) WriteFrom(ctx context.Context, path string, r io.Reader, mode uint32) (int64, error) {
	if err := guestPath(path); err != nil {
		return 0, err
	}
	if mode > 0o7777 {
		return 0, invalid(fmt.Sprintf("a file's mode is its permission bits, like 0o644, not %#o", mode))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a stream that ends without its last piece leaves the file as it was
	stream, err := f.s.c.sessions.WriteFileStream(ctx)
	if err != nil {
		return 0, f.s.explain(ctx, err)
	}
	first := &airlockv1.WriteFileChunk{SessionId: f.s.ID(), Path: []byte(path), Mode: mode}
	if err := stream.Send(first); err != nil {
		_, err = stream.CloseAndRecv() // the reason the stream broke
		return 0, f.s.explain(ctx, err)
	}
	err = sendPieces(r, func(data []byte, last bool) error {
		return stream.Send(&airlockv1.WriteFileChunk{Data: data, Last: last})
	})
	var readErr *readError
	if errors.As(err, &readErr) {
		return 0, readErr.err
	}
	if err != nil {
		_, err = stream.CloseAndRecv() // the reason the stream broke
		return 0, f.s.explain(ctx, err)
	}
	reply, err := stream.CloseAndRecv()
	if err != nil {
		return 0, f.s.explain(ctx, err)
	}
	return int64(reply.Bytes), nil
}

// Read returns a file's content; it fails (ErrInvalidArgument) if the file is larger than
// maxBytes (0: no limit).
func (f *Files) Read(ctx context.Context, path string, maxBytes uint64) ([]byte, error) {
	var b bytes.Buffer
	if _, err := f.ReadTo(ctx, path, &b, maxBytes); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadTo copies a file to w as the guest reads it, for files too large to hold, and returns
// the bytes copied. An error of w cancels the read and is returned.
func (f *Files) ReadTo(ctx context.Context, path string, w io.Writer, maxBytes uint64) (int64, error) {
	if err := guestPath(path); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := f.s.c.sessions.ReadFileStream(ctx, &airlockv1.ReadFileStreamRequest{
		SessionId: f.s.ID(), Path: []byte(path), MaxBytes: maxBytes})
	if err != nil {
		return 0, f.s.explain(ctx, err)
	}
	var total int64
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, f.s.explain(ctx, err)
		}
		n, werr := w.Write(chunk.Data)
		total += int64(n)
		if werr != nil {
			return total, werr
		}
	}
}

// opRead is the value 1Password's `op read` prints for reference, as this process's user.
func opRead(reference string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "op", "read", reference)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		first, _, _ := strings.Cut(stderr.String(), "\n")
		return nil, fmt.Errorf("`op read` failed: %v %s", err, first)
	}
	return bytes.TrimSuffix(out, []byte("\n")), nil
}
