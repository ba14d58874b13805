package client

import (
	"context"

	"google.golang.org/grpc/peer"

	"bighive/internal/limits"
)

// Ping sends one no-op call to the tserver that serves row's tablet, over
// the client's usual connection to it (a Ping command on the batch stream
// while that is on, else the unary Ping RPC) and with the usual location lookup
// and retries (it is idempotent), and returns when the reply is back. It
// measures the floor of a data call: a Get of row costs a Ping plus the
// tserver's work.
func (t *Table) Ping(ctx context.Context, row string) error {
	prefix := func() string { return errorPrefix("table %q: ping the tserver of row %q", t.name, row) }
	if err := limits.ValidateRowKey([]byte(row)); err != nil {
		return statusError(err, prefix())
	}
	return t.c.do(ctx, prefix, read, func(ctx context.Context, p *peer.Peer) error {
		loc, err := t.lc.lookup(ctx, row)
		if err != nil {
			return unsent(err)
		}
		if err := t.c.ping(ctx, loc.addr, p); err != nil {
			return t.failed(loc, err)
		}
		return nil
	})
}
