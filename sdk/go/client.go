// Package airlock is the Go SDK of Airlock: sessions in microVMs for code you do not trust.
//
//	c, err := airlock.Dial(ctx, "")  // the local socket; or airlock.Dial(ctx, "host:7443", airlock.WithTLS(...))
//	defer c.Close()
//	s, err := c.Sessions.Create(ctx, airlock.SessionOptions{Memory: "1g", Allow: []string{"pypi.org"}})
//	defer s.Remove(ctx)
//	r, err := s.Exec(ctx, []string{"python3", "-c", "print(6*7)"}, nil)  // r.ExitCode, r.Stdout
//	st, err := s.ExecStream(ctx, []string{"pytest", "-q"}, nil)
//	for ev, err := st.Recv(); err == nil; ev, err = st.Recv() { ... }       // output, then the exit
//	err = s.Files.Write(ctx, "/tmp/x.py", []byte("print(1)"), 0644)
//	err = s.Pause(ctx)
//	kids, err := s.Fork(ctx, 3)
//
// Every call takes a context.Context: cancelling it abandons the call (and a command's stream
// ends the command). Errors are *Error values whose kind errors.Is recognises (ErrNotFound,
// ErrLimitExceeded, ErrTimeout, ErrSessionFailed, ...).
package airlock

//go:generate protoc --proto_path=../../proto --go_out=. --go_opt=module=airlock.dev/sdk --go_opt=Mairlock/v1/airlock.proto=airlock.dev/sdk/airlockv1 --go-grpc_out=. --go-grpc_opt=module=airlock.dev/sdk --go-grpc_opt=Mairlock/v1/airlock.proto=airlock.dev/sdk/airlockv1 airlock/v1/airlock.proto

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"airlock.dev/sdk/airlockv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DefaultSocket is airlockd's socket when neither the address nor $AIRLOCK_SOCKET names one.
const DefaultSocket = "/run/airlock/airlockd.sock"

// Client is a connection to airlockd, safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn
	sessions airlockv1.SessionsClient
	network  airlockv1.NetworkClient
	images   airlockv1.ImagesClient
	vms      airlockv1.VmsClient
	volumes  airlockv1.VolumesClient
	api      airlockv1.ApiClient
	secrets  airlockv1.SecretsClient
	work     airlockv1.WorkspacesClient
	audit    airlockv1.AuditClient
	// Sessions creates, finds and lists sessions.
	Sessions *Sessions
	// Volumes creates, lists, fills and removes the caller's volumes.
	Volumes *Volumes
	// Audit reads the host's audit log.
	Audit *Audit
}

// DialOption configures Dial.
type DialOption func(*dialConfig) error

type dialConfig struct {
	tls *tls.Config
}

// WithTLS dials airlockd's TCP listener with mutual TLS: the CA that signed airlockd's
// certificate and this client's certificate and key (PEM files). serverName overrides the name
// checked in airlockd's certificate ("" for the host dialled).
func WithTLS(caFile, certFile, keyFile, serverName string) DialOption {
	return func(d *dialConfig) error {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return invalid("the CA file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return invalid("%s holds no PEM certificate", caFile)
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return invalid("the client certificate: %v", err)
		}
		d.tls = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert},
			ServerName: serverName, MinVersion: tls.VersionTLS12}
		return nil
	}
}

// Dial connects to airlockd and waits until it answers (or ctx ends). address "" is the local
// socket ($AIRLOCK_SOCKET, else DefaultSocket); a path is another socket; "host:port" is the
// TCP listener, which needs WithTLS. airlockd decides the caller's tenant (the socket's peer
// credentials, or the client certificate). A daemon whose API level does not work with this
// SDK's (APILevel) is refused with ErrVersionMismatch, which says what to upgrade.
func Dial(ctx context.Context, address string, options ...DialOption) (*Client, error) {
	var config dialConfig
	for _, o := range options {
		if err := o(&config); err != nil {
			return nil, err
		}
	}
	if address == "" {
		address = os.Getenv("AIRLOCK_SOCKET")
		if address == "" {
			address = DefaultSocket
		}
	}
	target := address
	dialOptions := []grpc.DialOption{grpc.WithBlock(), grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20))}
	switch {
	case strings.HasPrefix(address, "/"):
		target = "unix://" + address
		dialOptions = append(dialOptions, grpc.WithInsecure())
	case strings.HasPrefix(address, "unix:"):
		dialOptions = append(dialOptions, grpc.WithInsecure())
	case config.tls == nil:
		return nil, invalid("%s: airlockd listens on TCP only with mutual TLS; add "+
			"airlock.WithTLS(ca, cert, key, serverName), or give a socket path", address)
	default:
		dialOptions = append(dialOptions, grpc.WithTransportCredentials(credentials.NewTLS(config.tls)))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	conn, err := grpc.DialContext(ctx, target, dialOptions...)
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Message: fmt.Sprintf("airlockd does not answer at %s "+
			"(is it running, and may you use it? members of the airlock group may use its socket)",
			address)}
	}
	c := &Client{conn: conn, sessions: airlockv1.NewSessionsClient(conn),
		network: airlockv1.NewNetworkClient(conn), images: airlockv1.NewImagesClient(conn),
		vms: airlockv1.NewVmsClient(conn), volumes: airlockv1.NewVolumesClient(conn),
		api: airlockv1.NewApiClient(conn), secrets: airlockv1.NewSecretsClient(conn),
		work: airlockv1.NewWorkspacesClient(conn), audit: airlockv1.NewAuditClient(conn)}
	c.Sessions = &Sessions{c: c}
	c.Volumes = &Volumes{c: c}
	c.Audit = &Audit{c: c}
	if err := c.checkVersion(ctx, address); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Raw is the connection, for calling the API's generated stubs (package airlockv1) directly.
func (c *Client) Raw() *grpc.ClientConn { return c.conn }

// Image is an image airlockd has.
type Image struct {
	Name    string
	Digest  string
	Size    uint64
	Created time.Time
	Source  string // what it came from: a registry reference, an archive, a build
}

func imageOf(i *airlockv1.Image) Image {
	return Image{i.Name, i.Digest, i.SizeBytes, time.Unix(i.CreatedUnix, 0), i.Source}
}

// Images lists the images airlockd has (root's and the caller's own).
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	reply, err := c.images.List(ctx, &airlockv1.ListImagesRequest{})
	if err != nil {
		return nil, fromRPC(err)
	}
	out := make([]Image, 0, len(reply.Images))
	for _, i := range reply.Images {
		out = append(out, imageOf(i))
	}
	return out, nil
}

// PullImage has airlockd fetch an image from its registry into the caller's images (root's
// are everyone's, anyone else's their own). progress, if not nil, is called with the bytes
// downloaded and in all as it goes.
func (c *Client) PullImage(ctx context.Context, reference string, progress func(done, total uint64)) (Image, error) {
	if reference == "" {
		return Image{}, invalid("name an image to pull, like python:3.11-slim")
	}
	stream, err := c.images.Pull(ctx, &airlockv1.PullImageRequest{Reference: reference})
	if err != nil {
		return Image{}, fromRPC(err)
	}
	for {
		p, err := stream.Recv()
		if err == io.EOF {
			return Image{}, &Error{Kind: ErrUnavailable, Message: "airlockd ended the pull without the image"}
		}
		if err != nil {
			return Image{}, fromRPC(err)
		}
		if p.Image != nil {
			return imageOf(p.Image), nil
		}
		if progress != nil {
			progress(p.DoneBytes, p.TotalBytes)
		}
	}
}

// ImageBuild describes an image for Client.BuildImage.
type ImageBuild struct {
	Tag      string            // its name in the caller's images, like team/devbox:1
	Suite    string            // a Debian suite: bookworm, trixie...
	Packages []string          // Debian packages besides minbase, like python3, git
	Npm      []string          // npm packages: NAME or @SCOPE/NAME, optionally @VERSION (adds Node.js)
	Env      map[string]string // the image's environment
}

// BuildImage has airlockd build an image from Debian packages (mmdebstrap: minbase of
// b.Suite plus b.Packages) and, with b.Npm, Node.js and those npm packages, whose install
// scripts run in a build VM without network. It is tagged b.Tag in the caller's images
// (root's are everyone's, anyone else's their own). progress, if not nil, is called with
// each step and the build VM's output. Bad input is refused (ErrInvalidArgument) before
// anything runs; a build takes minutes (mmdebstrap's result is cached on the host), and
// cancelling ctx stops it.
func (c *Client) BuildImage(ctx context.Context, b ImageBuild, progress func(line string)) (Image, error) {
	if b.Tag == "" {
		return Image{}, invalid("give the image a name (tag), like team/devbox:1")
	}
	request := &airlockv1.BuildImageRequest{Suite: b.Suite, Packages: b.Packages, Npm: b.Npm, Tag: b.Tag}
	keys := make([]string, 0, len(b.Env))
	for k := range b.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same image for the same map
	for _, k := range keys {
		request.Env = append(request.Env, k+"="+b.Env[k])
	}
	stream, err := c.images.Build(ctx, request)
	if err != nil {
		return Image{}, fromRPC(err)
	}
	for {
		p, err := stream.Recv()
		if err == io.EOF {
			return Image{}, &Error{Kind: ErrUnavailable, Message: "airlockd ended the build without the image"}
		}
		if err != nil {
			return Image{}, fromRPC(err)
		}
		if p.Image != nil {
			return imageOf(p.Image), nil
		}
		if progress != nil {
			progress(p.Line)
		}
	}
}

// ImportImage imports an image archive (an OCI image layout or `docker save` tar, any
// compression) or, with rootfs, a root filesystem tar, sent as r gives it. name tags it (an
// archive's own name otherwise; a root filesystem tar needs one). If r fails part-way nothing
// is imported and r's error is returned.
func (c *Client) ImportImage(ctx context.Context, r io.Reader, name string, rootfs bool) (Image, error) {
	if rootfs && name == "" {
		return Image{}, invalid("name the image (like team/tool:1); a root filesystem tar has no name of its own")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a stream that ends without its last piece imports nothing
	stream, err := c.images.Import(ctx)
	if err != nil {
		return Image{}, fromRPC(err)
	}
	first := true
	err = sendPieces(r, func(data []byte, last bool) error {
		chunk := &airlockv1.ImportImageChunk{Data: data, Last: last}
		if first {
			chunk.Name, chunk.Rootfs, first = name, rootfs, false
		}
		return stream.Send(chunk)
	})
	var readErr *readError
	if errors.As(err, &readErr) {
		return Image{}, readErr.err
	}
	reply, err := stream.CloseAndRecv()
	if err != nil {
		return Image{}, fromRPC(err)
	}
	return imageOf(reply), nil
}

// Vm is a live VM process on airlockd's host (the caller's own).
type Vm struct {
	SessionID      string
	Pid            int
	Accelerator    string
	Vcpus          uint32
	HostCPUPercent float64
	HostRSS        uint64
}

// Vms lists the caller's live VMs with their host CPU and memory (`airlock ps`).
func (c *Client) Vms(ctx context.Context) ([]Vm, error) {
	reply, err := c.vms.List(ctx, &airlockv1.ListVmsRequest{})
	if err != nil {
		return nil, fromRPC(err)
	}
	out := make([]Vm, 0, len(reply.Vms))
	for _, v := range reply.Vms {
		out = append(out, Vm{v.SessionId, int(v.Pid), v.Accelerator, v.Vcpus, v.HostCpuPercent,
			v.HostRssBytes})
	}
	return out, nil
}

// Run runs one command in a fresh session that is removed when it ends (`airlock run`).
func (c *Client) Run(ctx context.Context, argv []string, session SessionOptions,
	options *ExecOptions) (*ExecResult, error) {
	start, err := execStart(argv, options, "")
	if err != nil {
		return nil, err
	}
	if err := session.fillExec(start); err != nil {
		return nil, err
	}
	stream, err := c.startExec(ctx, start, options, nil)
	if err != nil {
		return nil, err
	}
	return stream.finish(argv, options)
}
