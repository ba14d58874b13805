package tserver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"bighive/client"
	"bighive/internal/masterconn"
	pb "bighive/proto/bighivepb"
	"bighive/storage/checkpoint"
	rp "bighive/storage/replica"
)

// shortMaster answers every ReportCheckpoint with no status at all.
type shortMaster struct{ pb.UnimplementedMasterServer }

func (shortMaster) ReportCheckpoint(context.Context, *pb.ReportCheckpointRequest) (*pb.ReportCheckpointResponse, error) {
	return &pb.ReportCheckpointResponse{}, nil
}

// TestMasterMetaNeverSkips: the master-backed Metadata reads nothing as a
// success that is not one. An update of a tablet not registered here, or
// of a load that no longer serves it, is refused (before, the first was
// skipped and the batch reported committed); a list that drops a file the
// update does not replace is refused by the master's compare-and-swap; a
// reply with fewer statuses than reports is an error (before, read as all
// OK); and nothing is sent without a lease.
func TestMasterMetaNeverSkips(t *testing.T) {
	t.Parallel()
	m, s := startWithMaster(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, []string{m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "t", Families: []client.FamilySpec{{Name: "cf"}}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, "r", "cf", "q", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.coord.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	var r *rp.Replica
	for _, x := range s.tablets.all() {
		r = x
	}
	if r == nil || len(r.Files()) != 1 {
		t.Fatal("the table's tablet has no flushed file")
	}
	valid := checkpoint.Update{TabletID: r.ID(), Epoch: r.Epoch(), Load: r, TSFiles: r.Files()}

	// A stand-in master that answers with no status, for the same tablet.
	fake := grpc.NewServer()
	pb.RegisterMasterServer(fake, shortMaster{})
	flis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go fake.Serve(flis)
	defer fake.Stop()
	short := &Server{uuid: s.uuid}
	short.tablets.init()
	short.tablets.put(r)
	short.lease.Renew(time.Now(), time.Minute)
	if short.master, err = masterconn.New([]string{flis.Addr().String()}, masterconn.Options{}); err != nil {
		t.Fatal(err)
	}
	defer short.master.Close()

	for _, tc := range []struct {
		name    string
		s       *Server
		up      checkpoint.Update
		refused bool // a *checkpoint.RefusedError
		want    error
	}{
		{"unregistered tablet", s, checkpoint.Update{TabletID: "no-such-tablet", Epoch: 1}, true, checkpoint.ErrUnknownTablet},
		{"another load", s, checkpoint.Update{TabletID: r.ID(), Epoch: r.Epoch(), Load: rp.New(rp.Options{ID: r.ID(), Epoch: r.Epoch()}), TSFiles: r.Files()},
			true, checkpoint.ErrLoadEnded},
		{"drops a file", s, checkpoint.Update{TabletID: r.ID(), Epoch: r.Epoch(), Load: r}, true, checkpoint.ErrFilesChanged},
		{"stale epoch", s, checkpoint.Update{TabletID: r.ID(), Epoch: r.Epoch() + 1, Load: r, TSFiles: r.Files()},
			true, checkpoint.ErrStaleEpoch},
		{"short status list", short, valid, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := masterMeta{tc.s}.Commit(ctx, []checkpoint.Update{tc.up})
			var ref *checkpoint.RefusedError
			if err == nil || errors.As(err, &ref) != tc.refused || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Commit: %v, want refused %v, %v", err, tc.refused, tc.want)
			}
		})
	}
	if err := (masterMeta{s}).Commit(ctx, []checkpoint.Update{valid}); err != nil {
		t.Fatalf("a valid update: %v", err)
	}
	short.lease.Revoke()
	if err := (masterMeta{short}).Commit(ctx, []checkpoint.Update{valid}); !errors.Is(err, checkpoint.ErrNoLease) {
		t.Fatalf("Commit without a lease: %v, want ErrNoLease", err)
	}
}
