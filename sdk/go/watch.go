package airlock

import (
	"context"
	"time"

	"airlock.dev/sdk/airlockv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Event is something that happened to a session (Client.Watch). Kind is "state" (the session
// is now in State, for Reason), "exec_start" (ExecID, Argv), "exec_exit" (ExecID, ExitCode,
// Reason), "denied" (egress refused Destination, for Reason) or "removed". Lost counts events
// this watcher missed just before this one (it fell behind). Host: in a fleet, the other host
// that has the session ("": airlockd's own host).
type Event struct {
	Kind        string
	Time        time.Time
	SessionID   string
	State       string
	Reason      string
	ExecID      uint64
	Argv        [][]byte
	ExitCode    int
	Destination string
	Lost        uint64
	Host        string
}

var eventKinds = map[airlockv1.SessionEvent_Kind]string{
	airlockv1.SessionEvent_KIND_STATE:      "state",
	airlockv1.SessionEvent_KIND_EXEC_START: "exec_start",
	airlockv1.SessionEvent_KIND_EXEC_EXIT:  "exec_exit",
	airlockv1.SessionEvent_KIND_DENIED:     "denied",
	airlockv1.SessionEvent_KIND_REMOVED:    "removed",
}

// Watcher is a stream of Events from Client.Watch; cancelling its context ends it.
type Watcher struct {
	stream airlockv1.Sessions_WatchClient
}

// Watch streams what happens to the caller's sessions (or to one, with sessionID) from now on,
// until ctx ends.
func (c *Client) Watch(ctx context.Context, sessionID string) (*Watcher, error) {
	stream, err := c.sessions.Watch(ctx, &airlockv1.WatchRequest{SessionId: sessionID})
	if err != nil {
		return nil, fromRPC(err)
	}
	return &Watcher{stream}, nil
}

// Recv waits for the next event. Once the context is cancelled it returns context.Canceled.
func (w *Watcher) Recv() (Event, error) {
	e, err := w.stream.Recv()
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == codes.Canceled {
			return Event{}, context.Canceled
		}
		return Event{}, fromRPC(err)
	}
	kind, ok := eventKinds[e.Kind]
	if !ok {
		kind = "unknown"
	}
	out := Event{Kind: kind, Time: time.UnixMilli(e.UnixMs), SessionID: e.SessionId,
		Reason: e.Reason, ExecID: e.ExecId, Argv: e.Argv, ExitCode: int(e.ExitCode),
		Destination: e.Destination, Lost: e.Lost, Host: e.Host}
	if kind == "state" {
		out.State = states[e.State]
	}
	return out, nil
}
