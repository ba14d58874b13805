package tlsconf_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/tlsconf"
	"bighive/internal/tlsconf/tlstest"
	pb "bighive/proto/bighivepb"
)

// pki is a CA with a server and a client certificate written to files,
// and a second CA.
type pki struct {
	dir          string
	ca, other    *tlstest.CA
	server, user tlsconf.Files
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = tlstest.NewCA("test CA"); err != nil {
		t.Fatal(err)
	}
	if p.other, err = tlstest.NewCA("other CA"); err != nil {
		t.Fatal(err)
	}
	srv, err := p.ca.Server("m1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := p.ca.Client("alice")
	if err != nil {
		t.Fatal(err)
	}
	if p.server, err = tlstest.Files(p.ca, srv, p.dir, "server"); err != nil {
		t.Fatal(err)
	}
	if p.user, err = tlstest.Files(p.ca, cli, p.dir, "alice"); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, f tlsconf.Files) *tlsconf.Source {
	t.Helper()
	s, err := tlsconf.Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// otherCAFiles are a CA file of the other CA and, if withCert, a server
// certificate it signed.
func (p *pki) otherCAFiles(t *testing.T, withCert bool) tlsconf.Files {
	t.Helper()
	var c *tlstest.Cert
	if withCert {
		var err error
		if c, err = p.other.Server("rogue"); err != nil {
			t.Fatal(err)
		}
	}
	f, err := tlstest.Files(p.other, c, t.TempDir(), "rogue")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type masterStub struct {
	pb.UnimplementedMasterServer
	peer chan string
}

func (m *masterStub) ListTables(ctx context.Context, _ *pb.ListTablesRequest) (*pb.ListTablesResponse, error) {
	cn, _ := tlsconf.PeerCommonName(ctx)
	m.peer <- cn
	return &pb.ListTablesResponse{}, nil
}

// serve runs a Master service (every method unimplemented but
// ListTables) with src's server options.
func serve(t *testing.T, src *tlsconf.Source) (string, *masterStub) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(tlsconf.ServerOptions(src),
		grpc.UnaryInterceptor(tlsconf.UnaryInternalInterceptor(src)))...)
	stub := &masterStub{peer: make(chan string, 1)}
	pb.RegisterMasterServer(g, stub)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String(), stub
}

func dial(t *testing.T, addr string, src *tlsconf.Source) pb.MasterClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tlsconf.Credentials(src)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewMasterClient(cc)
}

func TestGRPCCallers(t *testing.T) {
	p := newPKI(t)
	addr, stub := serve(t, load(t, p.server))
	caOnly := load(t, tlsconf.Files{CA: p.user.CA})
	rogue := p.otherCAFiles(t, true)
	tests := []struct {
		name           string
		src            *tlsconf.Source
		list, internal codes.Code
		peer           string
	}{
		// A server certificate passes the internal check: the stub
		// answers Unimplemented.
		{"server certificate", load(t, p.server), codes.OK, codes.Unimplemented, "m1"},
		{"client certificate", load(t, p.user), codes.OK, codes.PermissionDenied, "alice"},
		{"CA only", caOnly, codes.OK, codes.Unauthenticated, ""},
		{"plaintext", nil, codes.Unavailable, codes.Unavailable, ""},
		{"other CA", load(t, p.otherCAFiles(t, false)), codes.Unavailable, codes.Unavailable, ""},
		// The server refuses a client certificate of another CA in the
		// handshake.
		{"certificate of another CA", load(t, tlsconf.Files{CA: p.server.CA, Cert: rogue.Cert, Key: rogue.Key}), codes.Unavailable, codes.Unavailable, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := dial(t, addr, tc.src)
			_, err := c.ListTables(ctx, &pb.ListTablesRequest{})
			if got := status.Code(err); got != tc.list {
				t.Fatalf("ListTables: code %v (%v), want %v", got, err, tc.list)
			}
			if err == nil {
				if got := <-stub.peer; got != tc.peer {
					t.Errorf("PeerCommonName = %q, want %q", got, tc.peer)
				}
			}
			_, err = c.Heartbeat(ctx, &pb.HeartbeatRequest{})
			if got := status.Code(err); got != tc.internal {
				t.Fatalf("Heartbeat: code %v (%v), want %v", got, err, tc.internal)
			}
			if tc.internal == codes.PermissionDenied || tc.internal == codes.Unauthenticated {
				if want := pb.Master_Heartbeat_FullMethodName; !contains(status.Convert(err).Message(), want) {
					t.Errorf("message %q does not name %s", status.Convert(err).Message(), want)
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestServerNeedsRole: a client refuses a server whose certificate lacks
// the server role, though the CA signed it.
func TestServerNeedsRole(t *testing.T) {
	p := newPKI(t)
	noRole, err := p.ca.Issue(tlstest.Spec{CommonName: "impostor", Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := tlstest.Files(p.ca, noRole, t.TempDir(), "impostor")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, load(t, f))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = dial(t, addr, load(t, p.server)).ListTables(ctx, &pb.ListTablesRequest{})
	if status.Code(err) != codes.Unavailable || !contains(err.Error(), "lacks the server role") {
		t.Fatalf("ListTables against a server without the role: %v, want Unavailable naming the role", err)
	}
}

// tlsListener serves src's ServerConfig on loopback, reading each
// connection until it ends (the handshake runs on the first read).
func tlsListener(t *testing.T, src *tlsconf.Source) net.Listener {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", src.ServerConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return lis
}

func TestTLS12Refused(t *testing.T) {
	p := newPKI(t)
	src := load(t, p.server)
	lis := tlsListener(t, src)
	cfg := src.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if c, err := tls.Dial("tcp", lis.Addr().String(), cfg); err == nil {
		c.Close()
		t.Fatal("a TLS 1.2 handshake succeeded")
	}
	cfg = src.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", lis.Addr().String(), cfg)
	if err != nil {
		t.Fatalf("TLS 1.3 handshake: %v", err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", v)
	}
	c.Close()
}

// servedSerial is the serial of the certificate a new connection to addr
// is served.
func servedSerial(t *testing.T, addr string, client *tlsconf.Source) string {
	t.Helper()
	cfg := client.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestReload(t *testing.T) {
	old := tlsconf.ReloadInterval
	tlsconf.ReloadInterval = 0
	defer func() { tlsconf.ReloadInterval = old }()
	p := newPKI(t)
	src := load(t, p.server)
	lis := tlsListener(t, src)
	client := load(t, p.user)
	first := servedSerial(t, lis.Addr().String(), client)
	if want := src.Leaf().SerialNumber.String(); first != want {
		t.Fatalf("served serial %s, want the loaded %s", first, want)
	}

	// A key that does not match the certificate: the old pair stays.
	next, err := p.ca.Server("m1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := p.ca.Server("m1")
	if err != nil {
		t.Fatal(err)
	}
	mismatched := &tlstest.Cert{CertPEM: next.CertPEM, KeyPEM: other.KeyPEM}
	if _, _, err := mismatched.Write(p.dir, "server"); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, lis.Addr().String(), client); got != first {
		t.Fatalf("after a mismatched rotation the served serial is %s, want the old %s", got, first)
	}
	// The matching key arrives: the new certificate is served.
	if _, _, err := next.Write(p.dir, "server"); err != nil {
		t.Fatal(err)
	}
	if got, want := servedSerial(t, lis.Addr().String(), client), next.Cert.SerialNumber.String(); got != want {
		t.Fatalf("after rotation the served serial is %s, want %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		f        tlsconf.Files
		needCert bool
		ok       bool
	}{
		{tlsconf.Files{}, true, true},
		{tlsconf.Files{CA: "ca"}, false, true},
		{tlsconf.Files{CA: "ca"}, true, false},
		{tlsconf.Files{Cert: "c", Key: "k"}, false, false},
		{tlsconf.Files{Cert: "c", CA: "ca"}, false, false},
		{tlsconf.Files{Cert: "c", Key: "k", CA: "ca"}, true, true},
	}
	for _, tc := range tests {
		if err := tc.f.Validate(tc.needCert); (err == nil) != tc.ok {
			t.Errorf("%+v.Validate(%v) = %v, want ok=%v", tc.f, tc.needCert, err, tc.ok)
		}
	}
}

// TestRaftStreamLayer: two stream layers with server certificates talk;
// a dialer with only a client certificate is refused by the acceptor.
func TestRaftStreamLayer(t *testing.T) {
	p := newPKI(t)
	srv := load(t, p.server)
	a, err := tlsconf.RaftStreamLayer(srv, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := make(chan error, 2)
	go func() {
		for {
			c, err := a.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4)
				_, err := io.ReadFull(c, buf)
				if err == nil && string(buf) != "ping" {
					err = io.ErrUnexpectedEOF
				}
				got <- err
				c.Close()
			}()
		}
	}()
	b, err := tlsconf.RaftStreamLayer(srv, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := b.Dial(a.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("accepting side: %v", err)
	}
	c.Close()

	if _, err := tlsconf.RaftStreamLayer(load(t, tlsconf.Files{CA: p.user.CA}), "127.0.0.1:0", nil); err == nil {
		t.Fatal("a stream layer without a certificate was made")
	}
	// A client certificate dials: the acceptor refuses it for the role.
	cfg := load(t, p.user).ClientConfig()
	cfg.ServerName = "127.0.0.1"
	cc, err := tls.Dial("tcp", a.Addr().String(), cfg)
	if err == nil {
		_, _ = cc.Write([]byte("ping"))
		_, err = cc.Read(make([]byte, 1))
		cc.Close()
	}
	if err == nil {
		t.Fatal("a client certificate's raft connection was served")
	}
	if err := <-got; err == nil || !contains(err.Error(), "lacks the server role") {
		t.Fatalf("accepting side of a client certificate: %v, want a refusal naming the role", err)
	}
}
