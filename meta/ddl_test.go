package meta

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
	spb "bighive/proto/storagepb"
)

func chunkCmd(name, start string, first, last bool, keys ...string) *spb.MetaCommand {
	c := &spb.MetaCreateTablets{Table: name, StartRow: []byte(start), First: first, Last: last}
	for _, k := range keys {
		c.SplitKeys = append(c.SplitKeys, []byte(k))
	}
	if first {
		c.Schema = createCmd(name).GetCreateTable().Schema
	}
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_CreateTablets{CreateTablets: c}}
}

func deleteChunkCmd(name string, max uint32) *spb.MetaCommand {
	return &spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTablets{DeleteTablets: &spb.MetaDeleteTablets{Table: name, Max: max}}}
}

// visible reports whether the table is in tables and whether it is pending.
func (f *testFSM) visible(name string) (visible, pending bool) {
	f.t.Helper()
	err := f.View(func(r *Reader) error {
		_, err := r.Table(name)
		visible = err == nil
		_, pending, err = r.PendingTable(name)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return visible, pending
}

// TestCreateTabletsChunks: a table created in three chunks is invisible
// until the last one and then equals, byte for byte, the table one
// CreateTable makes.
func TestCreateTabletsChunks(t *testing.T) {
	one := openTestFSM(t)
	one.mustApply(createCmd("users", "b", "d", "f", "h", "j"))

	f := openTestFSM(t)
	chunks := []*spb.MetaCommand{
		chunkCmd("users", "", true, false, "b", "d"),
		chunkCmd("users", "d", false, false, "f", "h"),
		chunkCmd("users", "h", false, true, "j"),
	}
	created := 0
	for i, c := range chunks {
		created += len(f.mustApply(c).Tablets)
		vis, pend := f.visible("users")
		if last := i == len(chunks)-1; vis != last || pend == last {
			t.Fatalf("after chunk %d: visible %v, pending %v", i, vis, pend)
		}
	}
	if created != 6 {
		t.Fatalf("chunks created %d tablets, want 6", created)
	}
	if got, want := f.dump(), one.dump(); got != want {
		t.Fatalf("chunked create differs from one command:\n%s\nwant\n%s", got, want)
	}
}

func TestDDLChunkRefusals(t *testing.T) {
	f := openTestFSM(t)
	f.mustApply(createCmd("exists", "m"))
	f.mustApply(chunkCmd("half", "", true, false, "c", "f"))
	tests := []struct {
		name string
		cmd  *spb.MetaCommand
		code codes.Code
	}{
		{"first chunk of an existing table", chunkCmd("exists", "", true, true), codes.AlreadyExists},
		{"first chunk of a pending table", chunkCmd("half", "", true, true), codes.Unavailable},
		{"one-command create of a pending table", createCmd("half"), codes.Unavailable},
		{"later chunk of no pending table", chunkCmd("none", "c", false, true), codes.Unavailable},
		{"later chunk not where the last ended", chunkCmd("half", "c", false, true), codes.FailedPrecondition},
		{"first chunk not at the empty row", chunkCmd("new", "a", true, true, "b"), codes.InvalidArgument},
		{"key not after the start", chunkCmd("half", "f", false, true, "f"), codes.InvalidArgument},
		{"unsorted keys", chunkCmd("new", "", true, true, "b", "a"), codes.InvalidArgument},
		{"chunk before the last without keys", chunkCmd("new", "", true, false), codes.InvalidArgument},
		{"delete of nothing", deleteChunkCmd("none", 5), codes.NotFound},
		{"delete chunk of 0", deleteChunkCmd("exists", 0), codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.dump()
			res := f.apply(tc.cmd)
			if apierr.CodeOf(res.Err) != tc.code {
				t.Fatalf("got %v, want %v", res.Err, tc.code)
			}
			if after := f.dump(); after != before {
				t.Fatalf("a refused command changed the state:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// TestDeleteTabletsChunks: a table deleted in chunks of 3 is hidden by the
// first and gone, like one DeleteTable, after the one that finds none
// left; a creation rolled back the same way refuses its later chunks and
// frees the name.
func TestDeleteTabletsChunks(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} // 10 tablets
	one := openTestFSM(t)
	one.mustApply(createCmd("keep", "m"))
	one.mustApply(createCmd("big", keys...))
	one.mustApply(&spb.MetaCommand{Cmd: &spb.MetaCommand_DeleteTable{DeleteTable: &spb.MetaDeleteTable{Name: "big"}}})

	f := openTestFSM(t)
	f.mustApply(createCmd("keep", "m"))
	f.mustApply(createCmd("big", keys...))
	var sizes []int
	for i := 0; ; i++ {
		res := f.mustApply(deleteChunkCmd("big", 3))
		sizes = append(sizes, len(res.Tablets))
		if vis, pend := f.visible("big"); vis || pend == res.Done {
			t.Fatalf("after delete chunk %d: visible %v, pending %v, done %v", i, vis, pend, res.Done)
		}
		if res.Done {
			break
		}
		if i > 10 {
			t.Fatal("deletion never done")
		}
	}
	if fmt.Sprint(sizes) != "[3 3 3 1]" {
		t.Fatalf("chunk sizes %v, want [3 3 3 1]", sizes)
	}
	if got, want := f.dump(), one.dump(); got != want {
		t.Fatalf("chunked delete differs from one command:\n%s\nwant\n%s", got, want)
	}

	// Rollback of a half-created table.
	f.mustApply(chunkCmd("half", "", true, false, "c", "f"))
	if res := f.mustApply(deleteChunkCmd("half", 100)); !res.Done || len(res.Tablets) != 2 {
		t.Fatalf("rollback: done %v, %d tablets", res.Done, len(res.Tablets))
	}
	if res := f.apply(chunkCmd("half", "f", false, true)); apierr.CodeOf(res.Err) != codes.Unavailable {
		t.Fatalf("chunk after the rollback: %v", res.Err)
	}
	f.mustApply(createCmd("half"))
	var tablets []*pb.TabletMeta
	_ = f.View(func(r *Reader) (err error) { tablets, err = r.TableTablets("half", nil, 0); return err })
	if len(tablets) != 1 {
		t.Fatalf("recreated table has %d tablets, want 1", len(tablets))
	}
}
