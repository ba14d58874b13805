package client

import (
	"context"

	pb "bighive/proto/bighivepb"
)

// MasterStatus is one master's own view of raft.
type MasterStatus struct {
	ID, Address, RaftState  string
	LeaderID, LeaderAddress string // empty: it knows no leader
	Term, AppliedIndex      uint64
	Version                 string
}

// MasterStatus asks the master at addr (itself, not the leader) for its
// view of raft.
func (c *Client) MasterStatus(ctx context.Context, addr string) (MasterStatus, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return MasterStatus{}, err
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := pb.NewMasterClient(cc).GetMasterStatus(ctx, &pb.GetMasterStatusRequest{})
	if err != nil {
		return MasterStatus{}, statusError(err, "client: master status of "+addr)
	}
	return MasterStatus{ID: r.Id, Address: r.Address, RaftState: r.RaftState, LeaderID: r.LeaderId,
		LeaderAddress: r.LeaderAddress, Term: r.Term, AppliedIndex: r.AppliedIndex, Version: r.Version}, nil
}

// TServerStatus is a tserver's own summary: its tablets and its counters
// (WAL, block cache, checkpoints; see the tserver's Status RPC).
type TServerStatus struct {
	Address       string
	Tablets       int
	MemstoreBytes int64
	Counters      map[string]int64
}

// TServerStatus asks the tserver at addr for its summary.
func (c *Client) TServerStatus(ctx context.Context, addr string) (TServerStatus, error) {
	ts, err := c.tserver(addr)
	if err != nil {
		return TServerStatus{}, err
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := ts.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return TServerStatus{}, statusError(err, "client: status of tserver "+addr)
	}
	return TServerStatus{Address: addr, Tablets: len(r.Tablets), MemstoreBytes: r.MemstoreBytes, Counters: r.Counters}, nil
}
