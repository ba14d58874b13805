package bench

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"bighive/client"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// tableStatus sums what the tservers report about one table's tablets.
type tableStatus struct {
	tsfileBytes, memBytes int64
	tsfiles               int
}

// tserverStatus asks every live tserver for its Status (an admin call the
// client library does not wrap) and sums the table's tablets.
func tserverStatus(ctx context.Context, c *client.Client, creds credentials.TransportCredentials, table string) (tableStatus, error) {
	var st tableStatus
	servers, err := c.TServers(ctx)
	if err != nil {
		return st, err
	}
	var errs []error
	for _, s := range servers {
		if !s.Live {
			continue
		}
		resp, err := statusOf(ctx, s.Address, creds)
		if err != nil {
			errs = append(errs, fmt.Errorf("bench: status of %s: %w", s.Address, err))
			continue
		}
		for _, t := range resp.Tablets {
			if t.Table == table {
				st.tsfileBytes += t.TsfileBytes
				st.tsfiles += int(t.TsfileCount)
				st.memBytes += t.MemstoreBytes
			}
		}
	}
	return st, errors.Join(errs...)
}

func statusOf(ctx context.Context, addr string, creds credentials.TransportCredentials) (*pb.StatusResponse, error) {
	cc, err := grpc.NewClient(addr, limits.GRPCDialOptions(creds)...)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	return pb.NewTServerClient(cc).Status(ctx, &pb.StatusRequest{})
}
