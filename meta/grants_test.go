package meta

import (
	"bytes"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func grantCmd(p string, r pb.Role, table string) *spb.MetaCommand {
	return &spb.MetaCommand{Version: CommandVersion, Cmd: &spb.MetaCommand_Grant{Grant: &spb.MetaGrant{
		Grant: &pb.Grant{Principal: p, Role: r, Table: table}}}}
}

func revokeCmd(p string, r pb.Role, table string) *spb.MetaCommand {
	return &spb.MetaCommand{Version: CommandVersion, Cmd: &spb.MetaCommand_Revoke{Revoke: &spb.MetaRevoke{
		Grant: &pb.Grant{Principal: p, Role: r, Table: table}}}}
}

func bootstrapCmd(p string) *spb.MetaCommand {
	return &spb.MetaCommand{Version: CommandVersion, Cmd: &spb.MetaCommand_BootstrapAdmin{BootstrapAdmin: &spb.MetaBootstrapAdmin{Principal: p}}}
}

func (f *testFSM) grants() *pb.GrantList {
	f.t.Helper()
	var gl *pb.GrantList
	if err := f.View(func(r *Reader) (err error) { gl, err = r.Grants(); return err }); err != nil {
		f.t.Fatal(err)
	}
	return gl
}

func TestGrantCommands(t *testing.T) {
	f := openTestFSM(t)
	if gl := f.grants(); gl.Version != 0 || len(gl.Grants) != 0 {
		t.Fatalf("new FSM grants = %v", gl)
	}
	// Bootstrap on an empty set grants admin on every table; a second
	// bootstrap (another name, a restart) changes nothing.
	if res := f.mustApply(bootstrapCmd("root")); res.Applied != 1 {
		t.Fatalf("bootstrap applied %d", res.Applied)
	}
	if res := f.mustApply(bootstrapCmd("mallory")); res.Applied != 0 {
		t.Fatalf("second bootstrap applied %d", res.Applied)
	}
	f.mustApply(grantCmd("alice", auth.RoleWrite, "orders"))
	f.mustApply(grantCmd("alice", auth.RoleWrite, "orders")) // again: no change
	f.mustApply(grantCmd("bob", auth.RoleRead, ""))
	gl := f.grants()
	want := []*pb.Grant{
		{Principal: "alice", Role: auth.RoleWrite, Table: "orders"},
		{Principal: "bob", Role: auth.RoleRead},
		{Principal: "root", Role: auth.RoleAdmin},
	}
	if gl.Version != 3 || len(gl.Grants) != len(want) {
		t.Fatalf("grants = %v, want version 3 and %v", gl, want)
	}
	for i := range want {
		if !proto.Equal(gl.Grants[i], want[i]) {
			t.Errorf("grant %d = %v, want %v", i, gl.Grants[i], want[i])
		}
	}

	// Refusals change nothing.
	before := f.dump()
	for _, c := range []struct {
		cmd  *spb.MetaCommand
		code codes.Code
	}{
		{revokeCmd("alice", auth.RoleRead, "orders"), codes.NotFound},
		{grantCmd("", auth.RoleRead, "orders"), codes.InvalidArgument},
		{grantCmd("carol", auth.RoleNone, "orders"), codes.InvalidArgument},
		{grantCmd("carol", auth.RoleRead, "bad name!"), codes.InvalidArgument},
		{grantCmd("car ol", auth.RoleRead, "orders"), codes.InvalidArgument},
	} {
		if res := f.apply(c.cmd); apierr.CodeOf(res.Err) != c.code {
			t.Errorf("%v: err %v, want %v", c.cmd, res.Err, c.code)
		}
	}
	if after := f.dump(); after != before {
		t.Errorf("refused commands changed the state:\n%s\nto\n%s", before, after)
	}

	f.mustApply(revokeCmd("alice", auth.RoleWrite, "orders"))
	if gl := f.grants(); gl.Version != 4 || len(gl.Grants) != 2 {
		t.Fatalf("after revoke: %v", gl)
	}
}

func TestGrantsSnapshotRestore(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(bootstrapCmd("root"))
	f.mustApply(grantCmd("alice", auth.RoleRead, "orders"))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	f.mustApply(revokeCmd("alice", auth.RoleRead, "orders")) // after the snapshot
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := openTestFSM(t)
	g.mustApply(grantCmd("gone", auth.RoleAdmin, ""))
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	gl := g.grants()
	if gl.Version != 2 || len(gl.Grants) != 2 || gl.Grants[0].Principal != "alice" || gl.Grants[1].Principal != "root" {
		t.Fatalf("restored grants = %v", gl)
	}
	// The restored FSM goes on from the restored version.
	g.index = 2
	g.mustApply(revokeCmd("alice", auth.RoleRead, "orders"))
	if gl := g.grants(); gl.Version != 3 || len(gl.Grants) != 1 {
		t.Fatalf("after revoke on the restored FSM: %v", gl)
	}
}
