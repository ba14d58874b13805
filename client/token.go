package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// WithToken sends token as "authorization: Bearer TOKEN" metadata with
// every call, to masters and tservers alike (a cluster started with
// --auth-tokens names the caller by it). Over a plaintext connection
// anyone on the path can read the token: use it with TLS outside a
// trusted network.
func WithToken(token string) Option {
	return WithGRPCDialOptions(grpc.WithPerRPCCredentials(TokenCredentials(token)))
}

// TokenCredentials are the per-RPC credentials WithToken uses, for a
// connection made without the client library.
func TokenCredentials(token string) credentials.PerRPCCredentials {
	return bearer{"Bearer " + token}
}

// bearer is per-RPC credentials carrying one token.
type bearer struct{ header string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity is false so that tokens work on a plaintext
// cluster too (the transport is the TLS flags' business).
func (bearer) RequireTransportSecurity() bool { return false }
