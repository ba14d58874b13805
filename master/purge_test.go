package master

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

// TestDeleteFamilyInterrupted: a DeleteFamily whose purge cannot finish
// (no tablet of the table serves) leaves the family out of the schema and
// in purging_families, also across a master restart; until the purge is
// done AddFamily of the name does not succeed (the master tries to finish
// the purge first, and the state machine refuses it outright).
func TestDeleteFamilyInterrupted(t *testing.T) {
	t.Parallel()
	c, mc := singleMaster(t)
	ctx := ctxT(t, 30*time.Second)
	if _, err := mc.CreateTable(ctx, &pb.CreateTableRequest{Schema: schema("t", "cf", "f")}); err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	// No tserver: the schema change commits, the purge waits for the
	// tablet to serve until the deadline.
	if _, err := mc.DeleteFamily(short(), &pb.DeleteFamilyRequest{Table: "t", Family: "f"}); err == nil {
		t.Fatal("DeleteFamily returned before any tablet masked the family's cells")
	}
	purging := func(stage string) {
		t.Helper()
		m := c.masters[c.leader(10*time.Second)]
		p, err := m.purging("t", "f")
		if err != nil || !p {
			t.Fatalf("%s: family f purging = %v, %v; want true", stage, p, err)
		}
		if _, err := mc.AddFamily(short(), &pb.AddFamilyRequest{Table: "t", Family: &pb.FamilySpec{Name: "f"}}); err == nil {
			t.Fatalf("%s: AddFamily of f succeeded with the purge unfinished", stage)
		}
		_, err = m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_AddFamily{AddFamily: &spb.MetaAddFamily{
			Table: "t", Family: &pb.FamilySpec{Name: "f"}}}})
		if apierr.CodeOf(err) != codes.FailedPrecondition {
			t.Fatalf("%s: the state machine's AddFamily of f: %v, want FailedPrecondition", stage, err)
		}
	}
	purging("after the interrupted delete")
	c.stop(0)
	c.start(0)
	mc = newClient(t, c.addrs()...).at(0)
	purging("after a master restart")
	// Once every tablet masked the cells the name is free again.
	m := c.masters[c.leader(10*time.Second)]
	if _, err := m.apply(ctx, &spb.MetaCommand{Cmd: &spb.MetaCommand_FamilyPurged{FamilyPurged: &spb.MetaFamilyPurged{Table: "t", Family: "f"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.AddFamily(ctx, &pb.AddFamilyRequest{Table: "t", Family: &pb.FamilySpec{Name: "f"}}); err != nil {
		t.Fatalf("AddFamily after the purge: %v", err)
	}
}
