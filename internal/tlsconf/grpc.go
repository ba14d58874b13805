package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Credentials are the gRPC transport credentials of src: TLS with the
// files re-read at each handshake, for dialing (ClientConfig) and for
// serving (ServerConfig). A nil src is the plaintext mode: insecure
// credentials, the only place Bighive uses them.
func Credentials(src *Source) credentials.TransportCredentials {
	if src == nil {
		return insecure.NewCredentials()
	}
	return &creds{src: src}
}

// ServerOptions are the gRPC server options of src: its credentials. Nil
// src (plaintext): none. The check of internal methods is an interceptor
// (UnaryInternalInterceptor), for the server to place in its chain.
func ServerOptions(src *Source) []grpc.ServerOption {
	if src == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(Credentials(src))}
}

// creds hands each handshake to gRPC's own TLS credentials built from the
// files as they are at that moment, so a rotated certificate or CA takes
// effect on the next connection.
type creds struct {
	src        *Source
	serverName string // OverrideServerName
}

func (c *creds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := c.src.ClientConfig()
	cfg.ServerName = c.serverName
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (c *creds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := c.src.serverConfig(c.src.current(), tls.VerifyClientCertIfGiven, nil)
	return credentials.NewTLS(cfg).ServerHandshake(conn)
}

func (c *creds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3", ServerName: c.serverName}
}

func (c *creds) Clone() credentials.TransportCredentials { cp := *c; return &cp }

//nolint:staticcheck // part of the interface
func (c *creds) OverrideServerName(name string) error { c.serverName = name; return nil }

// peerLeaf is the verified leaf certificate of the gRPC peer of ctx.
func peerLeaf(ctx context.Context) (*x509.Certificate, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return ti.State.VerifiedChains[0][0], true
}

// PeerCommonName is the subject CN of the verified certificate the gRPC
// peer of ctx presented; false without one (plaintext, or no client
// certificate).
func PeerCommonName(ctx context.Context) (string, bool) {
	leaf, ok := peerLeaf(ctx)
	if !ok {
		return "", false
	}
	return leaf.Subject.CommonName, true
}

// PeerIsServer reports whether the gRPC peer of ctx presented a verified
// certificate with the server role.
func PeerIsServer(ctx context.Context) bool {
	leaf, ok := peerLeaf(ctx)
	return ok && HasServerRole(leaf)
}

// CheckInternal allows an internal method (IsInternal) only to a peer
// with a verified server certificate: Unauthenticated without a
// certificate, PermissionDenied with one lacking the role. Other methods
// pass.
func CheckInternal(ctx context.Context, method string) error {
	if !IsInternal(method) {
		return nil
	}
	leaf, ok := peerLeaf(ctx)
	if !ok {
		return status.Errorf(codes.Unauthenticated,
			"%s is an internal method: it needs a server certificate (SAN URI %s) signed by the cluster CA, and the caller presented none", method, RoleURI)
	}
	if !HasServerRole(leaf) {
		return status.Errorf(codes.PermissionDenied,
			"%s is an internal method: certificate %q lacks the server role (SAN URI %s)", method, leaf.Subject.CommonName, RoleURI)
	}
	return nil
}

// UnaryInternalInterceptor refuses internal methods to callers without
// the server role (CheckInternal) when src is set; in plaintext (nil src)
// it lets every call pass, as before TLS.
func UnaryInternalInterceptor(src *Source) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if src == nil {
			return h(ctx, req)
		}
		if err := CheckInternal(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamInternalInterceptor is UnaryInternalInterceptor for streams.
func StreamInternalInterceptor(src *Source) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if src == nil {
			return h(srv, ss)
		}
		if err := CheckInternal(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
}
