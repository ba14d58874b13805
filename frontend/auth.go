package frontend

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"bighive/client"
	"bighive/internal/auth"
)

// Authentication at the Bigtable API endpoint: the frontend forwards the
// caller's credential. With ListenOptions.AuthTokens set it refuses a
// call without a known bearer token (Unauthenticated) itself; everything
// else, the grants included, is decided by the masters and tservers the
// call reaches, with the caller's own "authorization" metadata, which the
// client made by ForwardCredentials copies onto every call it makes for
// that caller. So the frontend holds no grants and needs no credential of
// its own, and the rules are exactly the cluster's.

// ForwardCredentials are the client options of a frontend that forwards
// its callers' credentials: every call carries the authorization metadata
// of the incoming call whose context it runs in. Calls of several callers
// must never share an RPC, so the batch stream and write coalescing are
// off.
func ForwardCredentials() []client.Option {
	return []client.Option{
		client.WithBatchStream(false),
		client.WithWriteCoalescing(false),
		client.WithGRPCDialOptions(
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(forwardAuth(ctx), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(forwardAuth(ctx), desc, cc, method, opts...)
			})),
	}
}

// forwardAuth copies the incoming call's authorization metadata to the
// outgoing one.
func forwardAuth(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	vals := in.Get("authorization")
	if len(vals) != 1 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", vals[0])
}

// authInterceptors refuse calls without a known token (health checks and
// reflection stay open).
func authInterceptors(tokens *auth.Tokens) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	ck := auth.New(auth.Config{Tokens: tokens})
	authenticate := func(ctx context.Context, method string) error {
		if auth.Lookup(method).Kind == auth.Public {
			return nil
		}
		_, err := ck.Authenticate(ctx)
		return err
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := authenticate(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := authenticate(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
	return unary, stream
}
