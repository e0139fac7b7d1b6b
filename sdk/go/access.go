package airlock

import (
	"context"
	"io"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// SecretInfo is a secret bound to a session: its name, source, hosts and placeholder, never its
// value.
type SecretInfo struct {
	Name        string
	Source      string // "env:OPENAI_API_KEY", "op://vault/item/field"
	Hosts       []string
	Body        bool   // swapped in request bodies too
	Placeholder string // what the guest holds in its environment instead of the value
	// The value is in airlockd's memory (false after a restart for env: and file: sources,
	// until set again).
	Available bool
	LastUsed  time.Time // zero: not used yet
}

func secretInfos(reply *airlockv1.ListSecretsResponse) []SecretInfo {
	out := make([]SecretInfo, 0, len(reply.Secrets))
	for _, s := range reply.Secrets {
		out = append(out, SecretInfo{Name: s.Name, Source: s.Source, Hosts: s.Hosts, Body: s.Body,
			Placeholder: s.Placeholder, Available: s.Available, LastUsed: unixMs(s.LastUsedUnixMs)})
	}
	return out
}

// Secrets are the secrets a session's guest holds placeholders of: airlockd swaps each
// placeholder for its value in HTTPS requests to the secret's hosts, and the value never enters
// the guest.
type Secrets struct{ s *Session }

// List returns the secrets bound to the session.
func (ss *Secrets) List(ctx context.Context) ([]SecretInfo, error) {
	reply, err := ss.s.c.secrets.List(ctx, &airlockv1.ListSecretsRequest{SessionId: ss.s.ID()})
	if err != nil {
		return nil, ss.s.explain(ctx, err)
	}
	return secretInfos(reply), nil
}

// Set binds secrets, as SessionOptions.Secrets does ("NAME=SOURCE@HOST[,HOST...]" to the value;
// nil: read here for env:, file: and op:// sources), or gives bound ones a new value or source
// (their placeholders stay). It returns the session's secrets now.
func (ss *Secrets) Set(ctx context.Context, secrets map[string][]byte) ([]SecretInfo, error) {
	if len(secrets) == 0 {
		return nil, invalid("name a secret to set: \"NAME=SOURCE@HOST\" to its value")
	}
	bindings, err := SessionOptions{Secrets: secrets}.secrets()
	if err != nil {
		return nil, err
	}
	reply, err := ss.s.c.secrets.Set(ctx, &airlockv1.SetSecretsRequest{SessionId: ss.s.ID(),
		Secrets: bindings})
	if err != nil {
		return nil, ss.s.explain(ctx, err)
	}
	return secretInfos(reply), nil
}

// Remove unbinds secrets by name and returns the session's secrets now.
func (ss *Secrets) Remove(ctx context.Context, names ...string) ([]SecretInfo, error) {
	if len(names) == 0 {
		return nil, invalid("name a secret to remove")
	}
	reply, err := ss.s.c.secrets.Remove(ctx, &airlockv1.RemoveSecretsRequest{SessionId: ss.s.ID(),
		Names: names})
	if err != nil {
		return nil, ss.s.explain(ctx, err)
	}
	return secretInfos(reply), nil
}

// AuditRecord is a record of the host's audit log: who did what to whose sessions or images.
type AuditRecord struct {
	Seq       int64 // 1, 2, ... in the order written
	Time      time.Time
	Principal string // who asked: uid:N, cert:NAME
	Tenant    string // whose sessions or images it concerned
	Action    string // session.create, file.read, network.allow, quota.refuse, ...
	Target    string // a session id, image name, path, ...
	Outcome   string // "ok..." or what went wrong
	Hash      string // SHA-256 hex of the previous hash and this record's fields
}

// AuditVerification says whether the audit log's hash chain is whole (Audit.Verify).
type AuditVerification struct {
	OK          bool
	Records     uint64
	LastSeq     int64
	Problem     string // the first break in the chain; "" when OK
	FirstBadSeq int64
}

// Audit is the host's audit log, a hash chain of every call that changed or read something.
// Root over the Unix socket and read-only operators read it; anyone else gets
// ErrPermissionDenied.
type Audit struct{ c *Client }

// List returns the records from since on (the zero time: all), the newest limit of them (0:
// 1000; at most 100000), oldest first.
func (a *Audit) List(ctx context.Context, since time.Time, limit int) ([]AuditRecord, error) {
	if limit < 0 {
		return nil, invalid("a limit is 0 (the default, 1000) or more")
	}
	var sinceMs int64
	if !since.IsZero() {
		sinceMs = since.UnixMilli()
	}
	stream, err := a.c.audit.List(ctx, &airlockv1.ListAuditRequest{SinceUnixMs: sinceMs,
		Limit: uint32(limit)})
	if err != nil {
		return nil, fromRPC(err)
	}
	var out []AuditRecord
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fromRPC(err)
		}
		out = append(out, AuditRecord{Seq: r.Seq, Time: time.UnixMilli(r.UnixMs),
			Principal: r.Principal, Tenant: r.Tenant, Action: r.Action, Target: r.Target,
			Outcome: r.Outcome, Hash: r.Hash})
	}
}

// Verify walks the audit log's whole chain and says whether a record was changed, removed or
// moved in its database, and where.
func (a *Audit) Verify(ctx context.Context) (AuditVerification, error) {
	v, err := a.c.audit.Verify(ctx, &airlockv1.VerifyAuditRequest{})
	if err != nil {
		return AuditVerification{}, fromRPC(err)
	}
	return AuditVerification{OK: v.Ok, Records: v.Records, LastSeq: v.LastSeq, Problem: v.Problem,
		FirstBadSeq: v.FirstBadSeq}, nil
}
