package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "bighive/proto/bighivepb"
)

// testCA issues certificates for one test.
type testCA struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, cert: cert, key: key, n: 1}
}

func (ca *testCA) issue(cn string, uris ...string) tls.Certificate {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	ca.n++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.n), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			ca.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

type pingServer struct {
	pb.UnimplementedTServerServer
	seen chan Principal
}

func (p *pingServer) MutateRow(ctx context.Context, _ *pb.MutateRowRequest) (*pb.MutateRowResponse, error) {
	pr, _ := FromContext(ctx)
	p.seen <- pr
	return &pb.MutateRowResponse{}, nil
}

// TestCertificatePrincipals serves a TServer over TLS with client
// certificates from an in-test CA: the CN names the principal, a
// certificate with the SAN URI bighive://server is the server principal,
// and a token wins over a CN.
func TestCertificatePrincipals(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c := testChecker(t, &pb.Grant{Principal: "carol", Role: RoleWrite, Table: "orders"},
		&pb.Grant{Principal: "alice", Role: RoleWrite, Table: "orders"})
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{ca.issue("server")}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven})),
		grpc.ChainUnaryInterceptor(c.UnaryInterceptor()))
	ps := &pingServer{seen: make(chan Principal, 1)}
	pb.RegisterTServerServer(srv, ps)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	call := func(cert *tls.Certificate, token, tablet string, md ...string) (Principal, error) {
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearerCreds(token)))
		}
		cc, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
		if _, err := pb.NewTServerClient(cc).MutateRow(ctx, &pb.MutateRowRequest{TabletId: "tablet-of-" + tablet}); err != nil {
			return Principal{}, err
		}
		return <-ps.seen, nil
	}
	carol, mallory, server := ca.issue("carol"), ca.issue("mallory"), ca.issue("ts1", ServerURI)
	if p, err := call(&carol, "", "orders"); err != nil || p.Name != "carol" || p.Via != "certificate" {
		t.Fatalf("carol's certificate: %+v, %v", p, err)
	}
	if _, err := call(&mallory, "", "orders"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("mallory's certificate: %v, want PermissionDenied", err)
	}
	if _, err := call(&carol, "", "users"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("carol on another table: %v, want PermissionDenied", err)
	}
	if p, err := call(&server, "", "users"); err != nil || !p.Server {
		t.Fatalf("server certificate: %+v, %v", p, err)
	}
	if p, err := call(&mallory, "token-of-alice-0001", "orders"); err != nil || p.Name != "alice" || p.Via != "token" {
		t.Fatalf("token with a certificate: %+v, %v", p, err)
	}
	// A forwarded principal is believed from a server certificate only.
	if p, err := call(&server, "", "orders", ForwardedPrincipalKey, "carol"); err != nil || p.Name != "carol" || p.Server || p.Via != "forwarded" {
		t.Fatalf("server forwarding carol: %+v, %v", p, err)
	}
	if _, err := call(&server, "", "users", ForwardedPrincipalKey, "carol"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("server forwarding carol on another table: %v, want PermissionDenied", err)
	}
	if _, err := call(&mallory, "", "orders", ForwardedPrincipalKey, "carol"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("mallory claiming to forward carol: %v, want PermissionDenied (as mallory)", err)
	}
	if _, err := call(nil, "", "orders"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no certificate, no token: %v, want Unauthenticated", err)
	}
}

type bearerCreds string

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearerCreds) RequireTransportSecurity() bool { return true }
