// The Go SDK against a real airlockd (its own, on a private AIRLOCK_HOME that shares the host's
// images and kernel), as a program would use it: the shared scenario (../scenario.txt), the API
// level check, sessions, commands, streams, files, pause/resume/fork, workspaces, secrets, the
// audit log, the errors, the examples, and airlockd's TCP listener with mutual TLS.
//
// Run as root after scripts/setup.sh; AIRLOCKD names the daemon binary (default build/airlockd).
package airlock_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	airlock "airlock.dev/sdk"
	"airlock.dev/sdk/airlockv1"
	"google.golang.org/grpc"
)

const serverName = "airlock-sdk-test-server"

var (
	dir, socket, address string
	home, daemon         string // the test daemon's AIRLOCK_HOME and binary
)

func openssl(args ...string) error {
	out, err := exec.Command("openssl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("openssl %v: %v: %s", args, err, out)
	}
	return nil
}

func issue(name, cn string) error {
	if err := openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", dir+"/"+name+".key",
		"-out", dir+"/"+name+".csr", "-subj", "/CN="+cn); err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/"+name+".ext", []byte("subjectAltName=DNS:"+cn+"\n"), 0o644); err != nil {
		return err
	}
	return openssl("x509", "-req", "-in", dir+"/"+name+".csr", "-CA", dir+"/ca.pem", "-CAkey",
		dir+"/ca.key", "-CAcreateserial", "-out", dir+"/"+name+".pem", "-days", "1",
		"-extfile", dir+"/"+name+".ext")
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	dir, err = os.MkdirTemp("", "airlock-gosdk-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the VMM (uid 65534) reads the image through here
	hostHome := os.Getenv("AIRLOCK_HOME")
	if hostHome == "" {
		hostHome = "/var/lib/airlock"
	}
	home = filepath.Join(dir, "home")
	kernel, err := filepath.EvalSymlinks(filepath.Join(hostHome, "kernel/vmlinux"))
	if err != nil {
		panic(err)
	}
	for _, step := range []error{
		os.MkdirAll(filepath.Join(home, "kernel"), 0o755),
		os.Symlink(filepath.Join(hostHome, "images"), filepath.Join(home, "images")),
		os.Symlink(kernel, filepath.Join(home, "kernel/vmlinux")),
		openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir+"/ca.key", "-out",
			dir+"/ca.pem", "-days", "1", "-subj", "/CN=airlock-sdk-test-ca"),
		issue("server", serverName),
		issue("client", "go-sdk-client"),
	} {
		if step != nil {
			panic(step)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	address = l.Addr().String()
	l.Close()
	socket = filepath.Join(dir, "sock")
	daemon = os.Getenv("AIRLOCKD")
	if daemon == "" {
		daemon = "../../build/airlockd"
	}
	log, _ := os.Create(filepath.Join(dir, "airlockd.log"))
	cmd := exec.Command(daemon, "--socket", socket, "--listen-tcp", address, "--tls-cert",
		dir+"/server.pem", "--tls-key", dir+"/server.key", "--tls-client-ca", dir+"/ca.pem")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+home, "AIRLOCK_HTTP_LISTEN=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "airlockd.log"))
			fmt.Fprintf(os.Stderr, "airlockd did not start: %s\n", out)
			return 1
		}
	}
	return m.Run()
}

func dial(t *testing.T) *airlock.Client {
	t.Helper()
	c, err := airlock.Dial(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func create(t *testing.T, c *airlock.Client, o airlock.SessionOptions) *airlock.Session {
	t.Helper()
	s, err := c.Sessions.Create(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove(context.Background()) })
	return s
}

func mustExec(t *testing.T, s *airlock.Session, argv []string, o *airlock.ExecOptions) *airlock.ExecResult {
	t.Helper()
	r, err := s.Exec(context.Background(), argv, o)
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return r
}

// jsonString is s as a JSON string, as the shared transcript writes output.
func jsonString(b []byte) string {
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	e.Encode(string(b))
	return strings.TrimSuffix(out.String(), "\n")
}

// The steps of ../scenario.txt with the public API, and their transcript, which must be the
// file's: the four SDKs run the same scenario and print the same lines.
func TestTheSharedScenario(t *testing.T) {
	file, err := os.ReadFile("../scenario.txt")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(strings.TrimRight(string(file), "\n"), "\n") {
		if !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	var got []string
	say := func(format string, args ...interface{}) { got = append(got, fmt.Sprintf(format, args...)) }
	defer func() {
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the transcript differs from ../scenario.txt\n--- got:\n%s\n--- want:\n%s",
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}()
	ctx := context.Background()
	c := dial(t)

	s := create(t, c, airlock.SessionOptions{Memory: "1g"})
	say("create state=%s memory=%d", s.Info.State, s.Info.Limits.Memory)

	r := mustExec(t, s, []string{"sh", "-c", "echo out; echo to-err >&2; exit 3"}, nil)
	say("exec exit=%d stdout=%s stderr=%s", r.ExitCode, jsonString(r.Stdout), jsonString(r.Stderr))

	st, err := s.ExecStream(ctx, []string{"head", "-c", "67108864", "/dev/zero"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stdoutBytes, stderrBytes, allZero, exit := 0, 0, true, -1
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Output != nil && ev.Output.Stderr:
			stderrBytes += len(ev.Output.Data)
		case ev.Output != nil:
			stdoutBytes += len(ev.Output.Data)
			allZero = allZero && bytes.Count(ev.Output.Data, []byte{0}) == len(ev.Output.Data)
		case ev.Exit != nil:
			exit = ev.Exit.ExitCode
		}
	}
	say("stream stdout_bytes=%d all_zero=%v stderr_bytes=%d exit=%d", stdoutBytes, allZero, stderrBytes, exit)

	data := make([]byte, 3145745)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	n, err := s.Files.WriteFrom(ctx, "/root/data.bin", bytes.NewReader(data), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	say("write bytes=%d", n)
	same := func(k *airlock.Session) bool {
		back, err := k.Files.Read(ctx, "/root/data.bin", 0)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Equal(back, data)
	}
	say("read same=%v", same(s))
	r = mustExec(t, s, []string{"stat", "-c", "%a %s", "/root/data.bin"}, nil)
	say("stat stdout=%s", jsonString(r.Stdout))

	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	say("pause state=%s", s.Info.State)
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	say("resume state=%s", s.Info.State)
	say("read same=%v", same(s))

	kids, err := s.Fork(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{s.ID(): true}
	for _, k := range kids {
		ids[k.ID()] = true
	}
	say("fork children=%d distinct_ids=%d", len(kids), len(ids))
	for _, k := range kids {
		say("child same=%v own_hostname=%v", same(k),
			k.Info.Hostname != "" && k.Info.Hostname != s.Info.Hostname)
		if err := k.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if err := s.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.Sessions.Get(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	say("remove state=%s", again.Info.State)
}

// Dial asks airlockd's API level and refuses one this SDK cannot work with, saying what to
// upgrade.
func TestDialChecksTheAPILevel(t *testing.T) {
	ctx := context.Background()
	v, err := dial(t).Version(ctx)
	if err != nil || v.Level < airlock.APILevel || v.OldestClientLevel < 1 || v.DaemonVersion == "" {
		t.Fatalf("%+v %v", v, err)
	}
	t.Logf("airlockd %s speaks API level %d, serves clients of level %d and up", v.DaemonVersion,
		v.Level, v.OldestClientLevel)
	// An SDK built for a level above the daemon's.
	restore := airlock.SetAPILevelForTest(v.Level + 1)
	_, err = airlock.Dial(ctx, socket)
	restore()
	var e *airlock.Error
	if !errors.Is(err, airlock.ErrVersionMismatch) || !errors.As(err, &e) ||
		e.DaemonLevel != v.Level || e.ClientLevel != v.Level+1 ||
		!strings.Contains(err.Error(), fmt.Sprintf("speaks API level %d; this SDK needs %d: upgrade airlockd", v.Level, v.Level+1)) {
		t.Fatal(err)
	}
	// An SDK below the oldest level the daemon serves (0: one that does not say its level).
	restore = airlock.SetAPILevelForTest(0)
	_, err = airlock.Dial(ctx, socket)
	restore()
	if !errors.Is(err, airlock.ErrVersionMismatch) || !strings.Contains(err.Error(), "upgrade the SDK") {
		t.Fatal(err)
	}
	// A daemon older than API levels answers UNIMPLEMENTED: a gRPC server without the Api
	// service stands in for it.
	old := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", old)
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	go server.Serve(l)
	defer server.Stop()
	_, err = airlock.Dial(ctx, old)
	if !errors.Is(err, airlock.ErrVersionMismatch) || !strings.Contains(err.Error(), "predates API levels") ||
		!strings.Contains(err.Error(), "upgrade airlockd") {
		t.Fatal(err)
	}
	if _, err := airlock.Dial(ctx, socket); err != nil {
		t.Fatal(err) // the real level again
	}
}

// Runs the CLI against the test daemon.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(filepath.Dir(daemon), "airlock"), args...)
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+socket, "AIRLOCK_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("airlock %v: %v: %s", args, err, stderr.String())
	}
	return string(out)
}

// A session made with the CLI from a project (`airlock session create --workspace DIR`): the
// SDK reads its base, what it changed, and its new commits as a git bundle.
func TestAWorkspaceComesBackAsADiffAndABundle(t *testing.T) {
	ctx := context.Background()
	project := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		argv := append([]string{"-C", project, "-c", "user.name=Host User", "-c", "user.email=host@example.com"}, args...)
		if out, err := exec.Command("git", argv...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(project, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-qm", "first")
	id := strings.TrimSpace(cli(t, "session", "create", "--workspace", project))
	s, err := dial(t).Sessions.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove(context.Background()) })

	info, err := s.Workspace.Info(ctx, true)
	if err != nil || info.Base.Path != project || info.Base.Branch != "main" || len(info.Base.Head) != 40 ||
		!strings.HasPrefix(info.Base.TreeDigest, "sha256:") || !info.Synced.IsZero() {
		t.Fatalf("%+v %v", info, err)
	}
	readme := false
	for _, e := range info.Entries {
		readme = readme || (e.Path == "README" && e.Size == 6 && len(e.SHA256) == 64)
	}
	if !readme {
		t.Fatalf("no README in %+v", info.Entries)
	}

	mustExec(t, s, []string{"sh", "-c", "cd /workspace && echo changed > README && " +
		"git -c user.name=Agent -c user.email=agent@example.com commit -qam 'agent change'"},
		&airlock.ExecOptions{Check: true})
	changes, err := s.Workspace.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, c := range changes {
		if strings.HasPrefix(c.Path, ".git/") {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %s %o->%o %q->%q", c.Kind, c.Path, c.OldMode&0o777,
			c.NewMode&0o777, c.OldContent, c.NewContent))
	}
	if strings.Join(seen, "|") != `modified README 644->644 "hello\n"->"changed\n"` {
		t.Fatal(seen)
	}

	dry, err := s.Workspace.Bundle(ctx, &airlock.BundleOptions{DryRun: true})
	if err != nil || dry.Info.Commits != 1 || dry.Data != nil || !strings.Contains(dry.Info.Log, "agent change") {
		t.Fatalf("%+v %v", dry, err)
	}
	b, err := s.Workspace.Bundle(ctx, &airlock.BundleOptions{Branch: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Info.Commits != 1 || b.Info.BaseCommit != info.Base.Head || len(b.Info.HeadCommit) != 40 ||
		b.Info.HeadCommit == b.Info.BaseCommit || b.Info.Branch != "main" || b.Info.Ref == "" {
		t.Fatalf("%+v", b.Info)
	}
	if !bytes.HasPrefix(b.Data, []byte("# v2 git bundle\n")) && !bytes.HasPrefix(b.Data, []byte("# v3 git bundle\n")) {
		t.Fatalf("%q", b.Data[:min(len(b.Data), 40)])
	}
	// Host git takes it as a bundle with the session's commit.
	file := filepath.Join(t.TempDir(), "session.bundle")
	if err := os.WriteFile(file, b.Data, 0o600); err != nil {
		t.Fatal(err)
	}
	git("bundle", "verify", "-q", file)
	git("fetch", "-q", file, b.Info.Ref+":refs/heads/review")
	git("cat-file", "-e", b.Info.HeadCommit)

	if _, err := create(t, dial(t), airlock.SessionOptions{}).Workspace.Info(ctx, false); err == nil {
		t.Fatal("a session without a workspace has one")
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// A session's secrets and egress rules change while it runs; root reads the audit log of it.
func TestSecretsRulesAndTheAuditLog(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	s := create(t, c, airlock.SessionOptions{Secrets: map[string][]byte{
		"TOKEN=env:AIRLOCK_UNUSED@api.example.com": []byte("s3cret-value")}})
	listed, err := s.Secrets.List(ctx)
	if err != nil || len(listed) != 1 {
		t.Fatal(listed, err)
	}
	token := listed[0]
	if token.Name != "TOKEN" || token.Source != "env:AIRLOCK_UNUSED" || len(token.Hosts) != 1 ||
		token.Hosts[0] != "api.example.com" || !token.Available || token.Body || token.Placeholder == "" ||
		!token.LastUsed.IsZero() {
		t.Fatalf("%+v", token)
	}
	r := mustExec(t, s, []string{"sh", "-c", "echo $TOKEN"}, nil)
	if strings.TrimSpace(string(r.Stdout)) != token.Placeholder || strings.Contains(string(r.Stdout), "s3cret-value") {
		t.Fatalf("%q", r.Stdout)
	}
	both, err := s.Secrets.Set(ctx, map[string][]byte{"OTHER=env:AIRLOCK_UNUSED@other.example.com?body": []byte("v")})
	if err != nil || len(both) != 2 {
		t.Fatal(both, err)
	}
	left, err := s.Secrets.Remove(ctx, "TOKEN")
	if err != nil || len(left) != 1 || left[0].Name != "OTHER" || !left[0].Body {
		t.Fatalf("%+v %v", left, err)
	}
	if _, err := s.Secrets.Set(ctx, map[string][]byte{"BAD=env:X@": []byte("v")}); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}

	rules, err := s.Network.Change(ctx, airlock.NetworkChange{Allow: []string{"example.com"}, Deny: []string{"10.0.0.0/8"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, r := range rules {
		shown = append(shown, fmt.Sprintf("%s %s deny=%v expires=%v", r.Rule, r.Source, r.Deny, !r.Expires.IsZero()))
	}
	if strings.Join(shown, "|") != "example.com allow deny=false expires=true|10.0.0.0/8:* deny deny=true expires=true" {
		t.Fatal(shown)
	}
	if rules, err = s.Network.Change(ctx, airlock.NetworkChange{Remove: []string{"example.com", "10.0.0.0/8:*"}}); err != nil || len(rules) != 0 {
		t.Fatal(rules, err)
	}
	if rules, err = s.Network.Rules(ctx); err != nil || len(rules) != 0 {
		t.Fatal(rules, err)
	}
	if err := s.Remove(ctx); err != nil {
		t.Fatal(err)
	}

	// Root over the socket reads the audit log, which holds what was just done.
	start := time.Now().Add(-time.Hour)
	records, err := c.Audit.List(ctx, start, 0)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]bool{}
	for _, r := range records {
		if r.Target == s.ID() {
			actions[r.Action] = true
		}
		if r.Time.Before(start) || r.Seq <= 0 || len(r.Hash) != 64 {
			t.Fatalf("%+v", r)
		}
	}
	if !actions["session.create"] || !actions["secret.set"] {
		t.Fatal(actions)
	}
	if last, err := c.Audit.List(ctx, time.Time{}, 1); err != nil || len(last) != 1 || last[0].Seq < records[len(records)-1].Seq {
		t.Fatal(last, err)
	}
	verified, err := c.Audit.Verify(ctx)
	if err != nil || !verified.OK || verified.Records == 0 || verified.Problem != "" {
		t.Fatalf("%+v %v", verified, err)
	}
}

// The examples, as a user runs them, against the test daemon.
func TestTheExamplesRun(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin+"/",
		"./examples/quickstart", "./examples/stream", "./examples/fork")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	run := func(name string) (string, string) {
		cmd := exec.Command(filepath.Join(bin, name), socket)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v: %s", name, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	out, _ := run("quickstart")
	if !regexp.MustCompile(`^session [0-9a-f]{12} is running\nhello from \S+\nexit code 0\n$`).MatchString(out) {
		t.Fatalf("quickstart: %q", out)
	}
	out, errs := run("stream")
	if out != "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nexit code 0\n" || errs != "done\n" {
		t.Fatalf("stream: %q %q", out, errs)
	}
	out, _ = run("fork")
	id := `[0-9a-f]{12} \(\S+\):\n`
	if !regexp.MustCompile(`^` + id + `before the fork\ncopy 0\n` + id + `before the fork\ncopy 1\n` +
		`[0-9a-f]{12} \(the original\):\nbefore the fork\n$`).MatchString(out) {
		t.Fatalf("fork: %q", out)
	}
}

func TestExecSplitsOutputTakesStdinAndSaysHowItEnded(t *testing.T) {
	ctx := context.Background()
	s := create(t, dial(t), airlock.SessionOptions{})
	r := mustExec(t, s, []string{"sh", "-c", "cat; echo to-err >&2; exit 3"},
		&airlock.ExecOptions{Stdin: strings.NewReader("in\x00put")})
	if r.ExitCode != 3 || string(r.Stdout) != "in\x00put" || string(r.Stderr) != "to-err\n" {
		t.Fatalf("%+v", r)
	}
	big := make([]byte, 3<<20)
	rand.Read(big)
	sum := sha256.Sum256(big)
	r = mustExec(t, s, []string{"sha256sum"}, &airlock.ExecOptions{Stdin: bytes.NewReader(big)})
	if !strings.HasPrefix(string(r.Stdout), hex.EncodeToString(sum[:])) {
		t.Fatalf("%s", r.Stdout)
	}
	r = mustExec(t, s, []string{"sh", "-c", "echo $GREETING in $(pwd) as $(id -un)"},
		&airlock.ExecOptions{Env: map[string]string{"GREETING": "hello"}, Cwd: "/tmp", User: "nobody"})
	if string(r.Stdout) != "hello in /tmp as nobody\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if r := mustExec(t, s, []string{"no-such-command"}, nil); r.ExitCode != 127 || !strings.Contains(r.Message, "not found") {
		t.Fatalf("%+v", r)
	}
	if r := mustExec(t, s, []string{"sh", "-c", "kill -TERM $$"}, nil); r.ExitCode != 143 || r.Signal != 15 {
		t.Fatalf("%+v", r)
	}
	_, err := s.Exec(ctx, []string{"sh", "-c", "echo started; sleep 30"}, &airlock.ExecOptions{Timeout: time.Second})
	var e *airlock.Error
	if !errors.Is(err, airlock.ErrTimeout) || !errors.As(err, &e) || string(e.Result.Stdout) != "started\n" || !e.Result.TimedOut {
		t.Fatalf("%v", err)
	}
	_, err = s.Exec(ctx, []string{"false"}, &airlock.ExecOptions{Check: true})
	if !errors.Is(err, airlock.ErrCommandFailed) || !errors.As(err, &e) || e.Result.ExitCode != 1 {
		t.Fatalf("%v", err)
	}
}

func TestAStreamTakesStdinAndSignalsAndItsContextEndsIt(t *testing.T) {
	ctx := context.Background()
	s := create(t, dial(t), airlock.SessionOptions{})
	st, err := s.ExecStream(ctx, []string{"sh", "-c", "read line; echo got $line; sleep 300"},
		&airlock.ExecOptions{OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("hello\n"))
	var exit *airlock.Exit
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Output != nil && string(ev.Output.Data) == "got hello\n" {
			st.Signal(15)
		}
		if ev.Exit != nil {
			exit = ev.Exit
		}
	}
	if exit == nil || exit.ExitCode != 143 || exit.Signal != 15 {
		t.Fatalf("%+v", exit)
	}
	// Cancelling the context ends the command: the session is free for the next one.
	cctx, cancel := context.WithCancel(ctx)
	st, err = s.ExecStream(cctx, []string{"sh", "-c", "echo go; sleep 300"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := st.Recv(); err != nil || string(ev.Output.Data) != "go\n" {
		t.Fatal(err)
	}
	cancel()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := mustExec(t, s, []string{"ps", "-eo", "args"}, nil)
		if !strings.Contains(string(r.Stdout), "sleep 300") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled command still runs")
		}
	}
}

func TestImagesComeInThroughAirlockd(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "srv", "hello"), []byte("hello from an imported image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := exec.Command("tar", "-cf", "-", "-C", dir, "srv").Output()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sdk-test/tiny-go-%d:1", os.Getpid())
	defer airlockv1.NewImagesClient(c.Raw()).Remove(ctx, &airlockv1.RemoveImagesRequest{Names: []string{name}})
	image, err := c.ImportImage(ctx, bytes.NewReader(archive), name, true)
	if err != nil || image.Name != name || !strings.HasPrefix(image.Digest, "sha256:") {
		t.Fatal(image, err)
	}
	listed := func() bool {
		images, err := c.Images(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range images {
			if i.Name == name {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("the imported image is not listed")
	}
	airlockv1.NewImagesClient(c.Raw()).Remove(ctx, &airlockv1.RemoveImagesRequest{Names: []string{name}})
	broken := io.MultiReader(bytes.NewReader(archive[:1024]), iotest.ErrReader(errors.New("the archive went away")))
	if _, err := c.ImportImage(ctx, broken, name, true); err == nil || err.Error() != "the archive went away" {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("a broken import was imported")
	}
	if _, err := c.ImportImage(ctx, bytes.NewReader(archive), "", true); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.ImportImage(ctx, bytes.NewReader(archive), "Not A Name", true); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.PullImage(ctx, "", nil); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	// A build: bad input is refused by airlockd before anything runs (a real one takes minutes).
	var lines []string
	_, err = c.BuildImage(ctx, airlock.ImageBuild{Tag: name, Suite: "Bookworm!", Packages: []string{"git"}},
		func(line string) { lines = append(lines, line) })
	if !errors.Is(err, airlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "is not a Debian suite name") {
		t.Fatal(err)
	}
	if _, err := c.BuildImage(ctx, airlock.ImageBuild{Tag: name, Suite: "bookworm", Env: map[string]string{"A B": "1"}}, nil); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if len(lines) != 0 || listed() {
		t.Fatal("a refused build ran", lines)
	}
}

func TestVolumesOutliveSessions(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greeting"), []byte("hello from a volume\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := exec.Command("tar", "-cf", "-", "-C", dir, "greeting").Output()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sdk-go-%d", os.Getpid())
	made, err := c.Volumes.Create(ctx, name, "32m")
	if err != nil || made.Name != name || made.Size != 32<<20 || made.Snapshot {
		t.Fatal(made, err)
	}
	defer c.Volumes.Remove(ctx, name)
	if v, err := c.Volumes.Import(ctx, name, bytes.NewReader(archive)); err != nil || v.Generation != 1 {
		t.Fatal(v, err)
	}
	s, err := c.Sessions.Create(ctx, airlock.SessionOptions{Volumes: []string{name + ":/data"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Exec(ctx, []string{"sh", "-c", "cat /data/greeting; echo more > /data/more"}, nil)
	if err != nil || string(r.Stdout) != "hello from a volume\n" {
		t.Fatal(r, err)
	}
	volumes, err := c.Volumes.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range volumes {
		if v.Name == name && (len(v.Holders) != 1 || v.Holders[0] != s.ID() || !v.HeldReadWrite) {
			t.Fatal(v)
		}
	}
	_, err = c.Sessions.Create(ctx, airlock.SessionOptions{Volumes: []string{name + ":/data:ro"}})
	if !errors.Is(err, airlock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is attached to session") {
		t.Fatal(err)
	}
	// A host to make it on is a fleet's to honour: this airlockd alone refuses it.
	_, err = c.Sessions.Create(ctx, airlock.SessionOptions{Host: "host-b"})
	if !errors.Is(err, airlock.ErrFailedPrecondition) ||
		!strings.Contains(err.Error(), "makes sessions only on itself: --host host-b") {
		t.Fatal(err)
	}
	if _, err = c.Run(ctx, []string{"true"}, airlock.SessionOptions{Host: "host-b"}, nil); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if err := s.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = c.Run(ctx, []string{"cat", "/v/more"}, airlock.SessionOptions{Volumes: []string{name + ":/v:ro"}}, nil)
	if err != nil || string(r.Stdout) != "more\n" {
		t.Fatal(r, err)
	}
	snap, err := c.Volumes.Snapshot(ctx, name, name+"@v1")
	if err != nil || !snap.Snapshot || snap.Origin != "snapshot of "+name {
		t.Fatal(snap, err)
	}
	if err := c.Volumes.Remove(ctx, snap.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions.Create(ctx, airlock.SessionOptions{Volumes: []string{"no-path"}}); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.Volumes.Import(ctx, name, bytes.NewReader(make([]byte, 4096))); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if err := c.Volumes.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := c.Volumes.Remove(ctx, name); !errors.Is(err, airlock.ErrNotFound) || !strings.Contains(err.Error(), "airlock volume ls") {
		t.Fatal(err)
	}
}

func TestFilesListingsAndOneShotRuns(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	s := create(t, c, airlock.SessionOptions{})
	data := bytes.Repeat([]byte{7}, 1<<20)
	if err := s.Files.Write(ctx, "/root/blob", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Files.Read(ctx, "/root/blob", 0); err != nil || !bytes.Equal(got, data) {
		t.Fatal(err)
	}
	if r := mustExec(t, s, []string{"stat", "-c", "%a", "/root/blob"}, nil); string(r.Stdout) != "600\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if _, err := s.Files.Read(ctx, "/root/blob", 10); err == nil {
		t.Fatal("a read over max_bytes succeeded")
	}
	if err := s.Files.Write(ctx, "relative", nil, 0); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if err := s.Files.Write(ctx, "/root/x", nil, 0o10000); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}

	// Any size, from a reader, and back to a writer as it comes.
	piece := make([]byte, 512<<10)
	for i := range piece {
		piece[i] = byte(i)
	}
	big := bytes.Repeat(piece, 12)
	if n, err := s.Files.WriteFrom(ctx, "/root/big", bytes.NewReader(big), 0); err != nil || n != int64(len(big)) {
		t.Fatal(n, err)
	}
	sum := sha256.New()
	if n, err := s.Files.ReadTo(ctx, "/root/big", sum, 0); err != nil || n != int64(len(big)) {
		t.Fatal(n, err)
	}
	if want := sha256.Sum256(big); !bytes.Equal(sum.Sum(nil), want[:]) {
		t.Fatal("read back other bytes than were written")
	}
	// A reader that fails part-way leaves the old file, and its error is what is returned.
	broken := io.MultiReader(bytes.NewReader(piece), iotest.ErrReader(errors.New("the source went away")))
	if _, err := s.Files.WriteFrom(ctx, "/root/big", broken, 0); err == nil || err.Error() != "the source went away" {
		t.Fatal(err)
	}
	if r := mustExec(t, s, []string{"sh", "-c", "stat -c %s /root/big; ls -A /root | grep -c airlock || true"}, nil); string(r.Stdout) != "6291456\n0\n" {
		t.Fatalf("%q", r.Stdout)
	}
	list, err := c.Sessions.List(ctx)
	found := false
	for _, x := range list {
		found = found || x.ID() == s.ID()
	}
	if err != nil || !found {
		t.Fatal(err, found)
	}
	if m, err := s.Metrics(ctx); err != nil || m.MemoryTotal == 0 {
		t.Fatal(err)
	}
	events, err := s.Timeline(ctx)
	execs := 0
	for _, e := range events {
		if e.Kind == "exec" {
			execs++
		}
	}
	if err != nil || execs == 0 {
		t.Fatal(err, execs)
	}
	vms, err := c.Vms(ctx)
	if err != nil || len(vms) == 0 {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, []string{"sh", "-c", "echo $((6*7))"}, airlock.SessionOptions{Memory: "256m"}, nil)
	if err != nil || r.ExitCode != 0 || string(r.Stdout) != "42\n" {
		t.Fatal(err, r)
	}
	if images, err := c.Images(ctx); err != nil || len(images) == 0 {
		t.Fatal(err)
	}
}

func TestAServerInASessionIsAURL(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	s := create(t, c, airlock.SessionOptions{})
	mustExec(t, s, []string{"sh", "-c", "mkdir -p /srv && echo hello > /srv/hello.txt && cd /srv && " +
		"(setsid python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &) && until python3 -c " +
		"\"import socket; socket.create_connection(('127.0.0.1', 8000))\" 2>/dev/null; do sleep 0.2; done"}, nil)
	e, err := s.Expose(ctx, 8000, false)
	if err != nil {
		t.Fatal(err)
	}
	if e.Host != "8000-"+s.ID()+".airlock.localhost" || !strings.HasSuffix(e.URL, "/?airlock_token="+e.Token) {
		t.Fatalf("%+v", e)
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+u.Port()+"/hello.txt", nil)
	req.Host = u.Host
	req.Header.Set("X-Airlock-Token", e.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello\n" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if list, err := s.Exposures(ctx); err != nil || len(list) != 1 || list[0].Port != 8000 {
		t.Fatalf("%v %+v", err, list)
	}
	if err := s.Unexpose(ctx, 8000); err != nil {
		t.Fatal(err)
	}
	if err := s.Unexpose(ctx, 8000); !errors.Is(err, airlock.ErrNotFound) {
		t.Fatal(err)
	}
	// The same server through a listener here, as `airlock port-forward` does.
	f, err := s.Forward(ctx, 8000, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 2; i++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", f.Addr.Port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello\n" {
			t.Fatalf("%q", body)
		}
	}
	if _, err := s.Expose(ctx, 0, false); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	c := dial(t)
	if _, err := c.Sessions.Get(ctx, "0123456789ab"); !errors.Is(err, airlock.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := c.Sessions.Create(ctx, airlock.SessionOptions{Memory: "lots"}); !errors.Is(err, airlock.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "not a size") {
		t.Fatal(err)
	}
	if _, err := c.Sessions.Create(ctx, airlock.SessionOptions{Allow: []string{"not a rule!"}}); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := c.Sessions.Create(ctx, airlock.SessionOptions{Memory: "64t"}); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err)
	}
	s := create(t, c, airlock.SessionOptions{})
	if _, err := s.Fork(ctx, 17); !errors.Is(err, airlock.ErrLimitExceeded) || !strings.Contains(err.Error(), "forks") {
		t.Fatal(err)
	}
	busy, err := s.ExecStream(ctx, []string{"sleep", "300"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := s.Pause(ctx); !errors.Is(err, airlock.ErrFailedPrecondition) || errors.Is(err, airlock.ErrSessionFailed) {
		t.Fatal(err)
	}
	busy.Cancel()
	vms, _ := c.Vms(ctx)
	for _, v := range vms {
		if v.SessionID == s.ID() {
			syscall.Kill(v.Pid, syscall.SIGKILL)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if info, _ := s.Refresh(ctx); info.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never failed")
		}
	}
	_, err = s.Exec(ctx, []string{"true"}, nil)
	var e *airlock.Error
	if !errors.Is(err, airlock.ErrSessionFailed) || !errors.As(err, &e) || e.Reason == "" {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := airlock.Dial(short, filepath.Join(dir, "no-such.sock")); !errors.Is(err, airlock.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := airlock.Dial(ctx, address); !errors.Is(err, airlock.ErrInvalidArgument) {
		t.Fatal(err) // TCP without TLS
	}
}

func TestWatchSeesStatesCommandsAndDenials(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := dial(t)
	w, err := c.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan airlock.Event, 256)
	go func() {
		defer close(events)
		for {
			e, err := w.Recv()
			if err != nil {
				return
			}
			events <- e
		}
	}()
	time.Sleep(500 * time.Millisecond) // the call is under way before anything happens
	s, err := c.Sessions.Create(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, s, []string{"sh", "-c", "exit 3"}, nil)
	mustExec(t, s, []string{"python3", "-c", "import socket\ntry: socket.getaddrinfo('denied.test', 80)\nexcept OSError: pass"}, nil)
	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, s, []string{"true"}, nil)
	if err := s.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	var states []string
	var start, exit *airlock.Event
	denied := false
	timeout := time.After(30 * time.Second)
	for len(states) == 0 || states[len(states)-1] != "stopped" {
		select {
		case e := <-events:
			if e.SessionID != s.ID() {
				continue
			}
			switch e.Kind {
			case "state":
				states = append(states, e.State)
			case "exec_start":
				if start == nil {
					start = &e
				}
			case "exec_exit":
				if exit == nil {
					exit = &e
				}
			case "denied":
				denied = denied || strings.HasPrefix(e.Destination, "denied.test")
			}
		case <-timeout:
			t.Fatalf("no stop; states %v", states)
		}
	}
	cancel()
	if len(states) < 3 || states[0] != "creating" || states[1] != "running" {
		t.Fatal(states)
	}
	if start == nil || string(bytes.Join(start.Argv, []byte(" "))) != "sh -c exit 3" {
		t.Fatalf("%+v", start)
	}
	if exit == nil || exit.ExitCode != 3 || exit.ExecID != start.ExecID {
		t.Fatalf("%+v", exit)
	}
	if !denied {
		t.Fatal("no denial seen")
	}
	none, err := c.Watch(context.Background(), "0123456789ab")
	if err == nil {
		_, err = none.Recv()
	}
	if !errors.Is(err, airlock.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestMutualTLSIsItsOwnTenant(t *testing.T) {
	ctx := context.Background()
	remote, err := airlock.Dial(ctx, address, airlock.WithTLS(dir+"/ca.pem", dir+"/client.pem", dir+"/client.key", serverName))
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	s := create(t, remote, airlock.SessionOptions{})
	if r := mustExec(t, s, []string{"echo", "over tls"}, nil); string(r.Stdout) != "over tls\n" {
		t.Fatalf("%q", r.Stdout)
	}
	if _, err := dial(t).Sessions.Get(ctx, s.ID()); !errors.Is(err, airlock.ErrNotFound) {
		t.Fatal(err) // another tenant's session is not found
	}
	if err := openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir+"/stranger.key",
		"-out", dir+"/stranger.pem", "-days", "1", "-subj", "/CN=stranger"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := airlock.Dial(short, address, airlock.WithTLS(dir+"/ca.pem", dir+"/stranger.pem", dir+"/stranger.key", serverName)); !errors.Is(err, airlock.ErrUnavailable) {
		t.Fatal(err)
	}
}
