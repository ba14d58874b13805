package auth

import (
	"context"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerURI is the SAN URI of a server certificate: its holder is a
// master or tserver and may call everything.
const ServerURI = "bighive://server"

// Principal is an authenticated caller.
type Principal struct {
	Name string
	// Server: a peer certificate with ServerURI (the name is its CN).
	Server bool
	// Via says how it was authenticated: "token", "certificate" or "server".
	Via string
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p (what the interceptors do).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the interceptors put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// peerCert is the verified leaf certificate of the peer, nil without TLS
// or without a verified client certificate.
func peerCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

// IsServerCert reports whether c carries the server role (SAN URI
// bighive://server).
func IsServerCert(c *x509.Certificate) bool {
	for _, u := range c.URIs {
		if u.String() == ServerURI {
			return true
		}
	}
	return false
}

// BearerToken returns the token of the incoming "authorization: Bearer …"
// metadata; ok is false when there is none.
func BearerToken(ctx context.Context) (token string, ok bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", false, status.Errorf(codes.Unauthenticated, "auth: %d authorization headers; send one", len(vals))
	}
	scheme, tok, found := strings.Cut(vals[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false, status.Errorf(codes.Unauthenticated, "auth: authorization metadata is not \"Bearer TOKEN\"")
	}
	return strings.TrimSpace(tok), true, nil
}

// ForwardedPrincipalKey is the metadata a master forwarding a call sets to
// the principal a client certificate named at the forwarding master. It is
// believed only from a peer with a server certificate.
const ForwardedPrincipalKey = "bighive-forwarded-principal"

// Authenticate names the caller of ctx (see the package comment for the
// order), or fails with Unauthenticated.
func (c *Checker) Authenticate(ctx context.Context) (Principal, error) {
	tok, ok, err := BearerToken(ctx)
	if err != nil {
		return Principal{}, err
	}
	if ok {
		if c.cfg.Tokens != nil {
			if name, found := c.cfg.Tokens.Lookup(tok); found {
				return Principal{Name: name, Via: "token"}, nil
			}
		}
		return Principal{}, status.Errorf(codes.Unauthenticated, "auth: unknown bearer token")
	}
	cert := peerCert(ctx)
	if cert != nil && IsServerCert(cert) {
		md, _ := metadata.FromIncomingContext(ctx)
		if fp := md.Get(ForwardedPrincipalKey); len(fp) == 1 && ValidPrincipal(fp[0]) == nil {
			return Principal{Name: fp[0], Via: "forwarded"}, nil
		}
		return Principal{Name: cert.Subject.CommonName, Server: true, Via: "server"}, nil
	}
	if cert != nil && cert.Subject.CommonName != "" {
		return Principal{Name: cert.Subject.CommonName, Via: "certificate"}, nil
	}
	return Principal{}, status.Errorf(codes.Unauthenticated, "auth: no credential: send \"authorization: Bearer TOKEN\" metadata or a client certificate")
}
