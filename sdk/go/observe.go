package airlock

import (
	"context"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// unixMs is a time of airlockd's; 0 (never) is the zero time.Time.
func unixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Network is a session's egress policy: nothing is reachable until allowed.
type Network struct{ s *Session }

// NetworkRule is one rule of a session's egress policy.
type NetworkRule struct {
	Rule    string    // canonical: "pypi.org", "*.example.com:8443", "10.20.0.0/16:5432"
	Source  string    // where it came from: "create", "run", "preset:pypi", "allow", "deny"
	Deny    bool      // it denies what the session's allows would let through
	Expires time.Time // zero: never
}

// NetworkChange is rules to add and remove in one step (Network.Change).
type NetworkChange struct {
	Allow   []string      // rules as in SessionOptions.Allow
	Presets []string      // rule sets: "pypi", "npm", "github", ...
	Deny    []string      // destinations the session may not reach
	Remove  []string      // rules (allow or deny) to drop, as Rules lists them
	TTL     time.Duration // the rules added expire after this; 0: never
}

func rulesOf(p *airlockv1.NetworkPolicy) []NetworkRule {
	out := make([]NetworkRule, 0, len(p.Rules))
	for _, r := range p.Rules {
		out = append(out, NetworkRule{Rule: r.Rule, Source: r.Source, Deny: r.Deny,
			Expires: unixMs(r.ExpiresUnixMs)})
	}
	return out
}

// Rules returns the policy's rules.
func (n *Network) Rules(ctx context.Context) ([]NetworkRule, error) {
	p, err := n.s.c.network.Get(ctx, &airlockv1.GetNetworkRequest{SessionId: n.s.ID()})
	if err != nil {
		return nil, n.s.explain(ctx, err)
	}
	return rulesOf(p), nil
}

// Change adds and removes rules in one step; it applies at once to the running session
// (connections no longer allowed are reset) and returns the rules now.
func (n *Network) Change(ctx context.Context, change NetworkChange) ([]NetworkRule, error) {
	if change.TTL < 0 {
		return nil, invalid("a rule's TTL is zero or more")
	}
	p, err := n.s.c.network.Change(ctx, &airlockv1.ChangeNetworkRequest{SessionId: n.s.ID(),
		Allow: change.Allow, AllowPreset: change.Presets, Deny: change.Deny, Remove: change.Remove,
		TtlSeconds: change.TTL.Seconds()})
	if err != nil {
		return nil, n.s.explain(ctx, err)
	}
	return rulesOf(p), nil
}

// TimelineEvent is one thing that happened in a session (Session.Timeline). Every string from
// the guest (output, transcripts, file names) is hostile: show it as text.
type TimelineEvent struct {
	Seq  uint64 // 1, 2, ... in time order
	Time time.Time
	// session.create, session.pause, exec, file.write, network.allow, net.connect, secret.set,
	// workspace.promote, agent.tool_call, ...
	Kind    string
	Summary string // one line for a person
	Actor   string // who asked (uid:0, cert:NAME, airlockd), or the agent's name
	Failed  bool   // a denial, a failure, a non-zero exit
	// Kind "exec" (and agent.*): the command, where and as whom, how long (-1: still running,
	// or airlockd lost it) and how it ended, and its output (stdout and stderr interleaved as
	// they came, from its start, cut short; OutputTotal is what airlockd stored).
	ExecID      uint64
	Argv        [][]byte
	User, Cwd   string
	TTY         bool
	Duration    time.Duration
	ExitCode    int
	Output      []byte
	OutputTotal uint64
	// agent.*: the tool call's id, the tool, and the text (a message, a tool's input as JSON,
	// a result).
	ToolID, Tool string
	Text         []byte
}

// Timeline is everything the session did, oldest first: its lifecycle, each command with its
// output, file transfers, egress decisions, secret uses, what agents in it did.
func (s *Session) Timeline(ctx context.Context) ([]TimelineEvent, error) {
	stream, err := s.c.sessions.Timeline(ctx, &airlockv1.TimelineRequest{SessionId: s.ID()})
	if err != nil {
		return nil, fromRPC(err)
	}
	var out []TimelineEvent
	for {
		e, err := stream.Recv()
		if err != nil {
			if isEOF(err) {
				return out, nil
			}
			return nil, s.explain(ctx, err)
		}
		duration := time.Duration(-1)
		if e.DurationMs >= 0 {
			duration = time.Duration(e.DurationMs) * time.Millisecond
		}
		out = append(out, TimelineEvent{Seq: e.Seq, Time: time.UnixMilli(e.UnixMs), Kind: e.Kind,
			Summary: e.Summary, Actor: e.Actor, Failed: e.Failed, ExecID: e.ExecId, Argv: e.Argv,
			User: e.User, Cwd: e.Cwd, TTY: e.Tty, Duration: duration, ExitCode: int(e.ExitCode),
			Output: e.Output, OutputTotal: e.OutputTotal, ToolID: e.ToolId, Tool: e.Tool,
			Text: e.Text})
	}
}

// Metrics is one sample of a guest's metrics.
type Metrics struct {
	Time        time.Time
	CPUPercent  float64 // of all vCPUs together, over the last interval
	MemoryUsed  uint64  // bytes
	MemoryTotal uint64
	Processes   uint64
	DiskUsed    uint64 // bytes of the writable layer
	DiskTotal   uint64
	// Egress since the VM started (or was last resumed): bytes of connections that ended,
	// those connections, and the DNS answers and connections refused.
	NetBytesOut, NetBytesIn   uint64
	NetConnections, NetDenied uint64
}

// Metrics is one sample of the guest's metrics (a paused session is resumed for it).
func (s *Session) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // one sample is all this asks for
	stream, err := s.c.sessions.Metrics(ctx, &airlockv1.MetricsRequest{SessionId: s.ID(), Once: true})
	if err != nil {
		return Metrics{}, fromRPC(err)
	}
	m, err := stream.Recv()
	if err != nil {
		return Metrics{}, s.explain(ctx, err)
	}
	return Metrics{Time: time.UnixMilli(m.UnixMs), CPUPercent: m.CpuPercent,
		MemoryUsed: m.MemoryUsedBytes, MemoryTotal: m.MemoryTotalBytes, Processes: m.Processes,
		DiskUsed: m.DiskUsedBytes, DiskTotal: m.DiskTotalBytes, NetBytesOut: m.NetBytesOut,
		NetBytesIn: m.NetBytesIn, NetConnections: m.NetConnections, NetDenied: m.NetDenied}, nil
}
