package airlock

import (
	"context"
	"net"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// Exposure is a port of a session's guest reached as a URL through airlockd's HTTP gateway
// (`airlock expose`).
type Exposure struct {
	Port   int
	URL    string // to open: carries ?airlock_token=TOKEN unless public
	Token  string // send as the header X-Airlock-Token; "" when public
	Public bool
	Host   string // PORT-ID.DOMAIN, the Host a request names
	// When the port was exposed.
	Created time.Time
}

func exposure(e *airlockv1.Exposure) Exposure {
	return Exposure{Port: int(e.Port), URL: e.Url, Token: e.Token, Public: e.Public, Host: e.Host,
		Created: time.UnixMilli(e.CreatedUnixMs)}
}

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return invalid("%d is not a TCP port; give one from 1 to 65535", port)
	}
	return nil
}

// Expose gives a server listening on port in the guest a URL, with a token unless public
// (exposing a port again gives it a new token).
func (s *Session) Expose(ctx context.Context, port int, public bool) (Exposure, error) {
	if err := checkPort(port); err != nil {
		return Exposure{}, err
	}
	r, err := s.c.sessions.Expose(ctx, &airlockv1.ExposeRequest{SessionId: s.ID(),
		Port: uint32(port), Public: public})
	if err != nil {
		return Exposure{}, s.explain(ctx, err)
	}
	return exposure(r), nil
}

// Exposures lists the session's exposed ports.
func (s *Session) Exposures(ctx context.Context) ([]Exposure, error) {
	r, err := s.c.sessions.ListExposures(ctx, &airlockv1.ListExposuresRequest{SessionId: s.ID()})
	if err != nil {
		return nil, s.explain(ctx, err)
	}
	out := make([]Exposure, 0, len(r.Exposures))
	for _, e := range r.Exposures {
		out = append(out, exposure(e))
	}
	return out, nil
}

// Unexpose ends an exposure and cuts its open connections.
func (s *Session) Unexpose(ctx context.Context, port int) error {
	if err := checkPort(port); err != nil {
		return err
	}
	_, err := s.c.sessions.Unexpose(ctx, &airlockv1.UnexposeRequest{SessionId: s.ID(),
		Port: uint32(port)})
	return s.explain(ctx, err)
}

// Forward is a listener here whose connections reach a port in a session's guest, each through
// airlockd (like `airlock port-forward`). Close stops listening.
type Forward struct {
	// Addr is where it listens (its port is the one given, or a free one).
	Addr   *net.TCPAddr
	Remote int
	ln     net.Listener
	s      *Session
}

// Forward listens on address (host:port; "127.0.0.1:0" for any free port here) and carries
// each connection to port in the guest, as `airlock port-forward` does.
func (s *Session) Forward(ctx context.Context, port int, address string) (*Forward, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	if _, err := s.Refresh(ctx); err != nil { // a session that is not the caller's is said now
		return nil, err
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, invalid("cannot listen on %s: %v", address, err)
	}
	f := &Forward{Addr: ln.Addr().(*net.TCPAddr), Remote: port, ln: ln, s: s}
	go f.accept()
	return f, nil
}

// Close stops listening; connections already open run to their end.
func (f *Forward) Close() error { return f.ln.Close() }

func (f *Forward) accept() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.relay(conn.(*net.TCPConn))
	}
}

func (f *Forward) relay(conn *net.TCPConn) {
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := f.s.c.sessions.ForwardPort(ctx)
	if err != nil {
		return
	}
	start := &airlockv1.PortForwardRequest{Kind: &airlockv1.PortForwardRequest_Start{
		Start: &airlockv1.PortForwardStart{SessionId: f.s.ID(), Port: uint32(f.Remote)}}}
	if stream.Send(start) != nil {
		return
	}
	// Here to the guest: the connection's bytes, then its end.
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				data := &airlockv1.PortForwardRequest{Kind: &airlockv1.PortForwardRequest_Data{
					Data: append([]byte(nil), buf[:n]...)}}
				if stream.Send(data) != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
		stream.Send(&airlockv1.PortForwardRequest{Kind: &airlockv1.PortForwardRequest_Eof{Eof: true}})
		stream.CloseSend()
	}()
	// The guest to here, until its end or a reset.
	for {
		r, err := stream.Recv()
		if err != nil {
			return
		}
		switch k := r.Kind.(type) {
		case *airlockv1.PortForwardResponse_Data:
			if _, err := conn.Write(k.Data); err != nil {
				return
			}
		case *airlockv1.PortForwardResponse_Eof:
			conn.CloseWrite()
		case *airlockv1.PortForwardResponse_Reset_:
			return
		}
	}
}
