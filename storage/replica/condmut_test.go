package replica_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"bighive/storage/mutation"
	"bighive/storage/replica"
	"bighive/storage/tablet"
	"bighive/storage/tablet/filter"
	"bighive/storage/vfs/errorfs"
)

func compileFilter(t *testing.T, f *btpb.RowFilter) *filter.Filter {
	t.Helper()
	if f == nil {
		return nil
	}
	cf, err := filter.Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func set(q, v string) mutation.Op {
	return mutation.Op{Kind: mutation.SetCell, Family: "cf", Qualifier: []byte(q), Timestamp: mutation.ServerTime, Value: []byte(v)}
}

// rowString renders a row's latest cells as "q=v q=v".
func rowString(t *testing.T, rep *replica.Replica, row string) string {
	t.Helper()
	r, _, err := rep.Get(context.Background(), []byte(row), tablet.ReadOptions{MaxVersions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range r.Cells {
		parts = append(parts, fmt.Sprintf("%s=%s", c.Qualifier, c.Value))
	}
	return strings.Join(parts, " ")
}

// TestCheckAndMutateSemantics: the predicate sees the whole row; a match
// (at least one cell out of the predicate) applies the true operations,
// else the false ones; a nil predicate matches a row with any cell;
// labels do not matter; an empty chosen list writes nothing.
func TestCheckAndMutateSemantics(t *testing.T) {
	valueIs := func(q, v string) *btpb.RowFilter {
		return &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
			{Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte(regexp.QuoteMeta(q))}},
			{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(regexp.QuoteMeta(v))}},
		}}}}
	}
	label := &btpb.RowFilter{Filter: &btpb.RowFilter_ApplyLabelTransformer{ApplyLabelTransformer: "x"}}
	block := &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}}
	strip := &btpb.RowFilter{Filter: &btpb.RowFilter_StripValueTransformer{StripValueTransformer: true}}
	delRow := mutation.Op{Kind: mutation.DeleteRow, Timestamp: mutation.ServerTime}
	delCol := func(q string) mutation.Op {
		return mutation.Op{Kind: mutation.DeleteColumn, Family: "cf", Qualifier: []byte(q)}
	}
	cases := []struct {
		name            string
		setup           []mutation.Op
		pred            *btpb.RowFilter
		onTrue, onFalse []mutation.Op
		matched         bool
		want            string
	}{
		{"nil predicate, missing row", nil, nil, []mutation.Op{set("a", "t")}, []mutation.Op{set("a", "f")}, false, "a=f"},
		{"nil predicate, row with a cell", []mutation.Op{set("a", "1")}, nil, []mutation.Op{set("b", "t")}, []mutation.Op{set("b", "f")}, true, "a=1 b=t"},
		{"value matches", []mutation.Op{set("lock", "free")}, valueIs("lock", "free"), []mutation.Op{set("lock", "me")}, nil, true, "lock=me"},
		{"value differs", []mutation.Op{set("lock", "you")}, valueIs("lock", "free"), []mutation.Op{set("lock", "me")}, nil, false, "lock=you"},
		{"empty false list writes nothing", nil, valueIs("lock", "free"), []mutation.Op{set("lock", "me")}, nil, false, ""},
		{"empty true list writes nothing", []mutation.Op{set("a", "1")}, nil, nil, []mutation.Op{set("a", "2")}, true, "a=1"},
		{"a label still matches", []mutation.Op{set("a", "1")}, label, []mutation.Op{set("a", "t")}, []mutation.Op{set("a", "f")}, true, "a=t"},
		{"block all never matches", []mutation.Op{set("a", "1")}, block, []mutation.Op{set("a", "t")}, []mutation.Op{set("a", "f")}, false, "a=f"},
		{"a stripped (empty) value still counts", []mutation.Op{set("a", "1")}, strip, []mutation.Op{set("b", "t")}, nil, true, "a=1 b=t"},
		{"true branch deletes the row and sets", []mutation.Op{set("a", "1"), set("b", "2")}, valueIs("b", "2"),
			[]mutation.Op{delRow, set("c", "3")}, []mutation.Op{set("z", "z")}, true, "c=3"},
		{"false branch deletes a column", []mutation.Op{set("a", "1"), set("b", "2")}, valueIs("b", "9"),
			[]mutation.Op{set("z", "z")}, []mutation.Op{delCol("a")}, false, "b=2"},
		{"ops apply in order: set then delete", nil, nil, nil, []mutation.Op{set("a", "1"), delCol("a"), set("b", "2")}, false, "b=2"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
			ctx := context.Background()
			row := fmt.Sprint("row", i)
			if len(tc.setup) > 0 {
				if err := g.rep.Write(ctx, &mutation.RowMutation{Row: []byte(row), Ops: tc.setup}); err != nil {
					t.Fatal(err)
				}
			}
			onTrue := append([]mutation.Op(nil), tc.onTrue...)
			matched, err := g.rep.CheckAndMutate(ctx, []byte(row), compileFilter(t, tc.pred), onTrue, tc.onFalse)
			if err != nil {
				t.Fatal(err)
			}
			if matched != tc.matched {
				t.Errorf("matched %v, want %v", matched, tc.matched)
			}
			if got := rowString(t, g.rep, row); got != tc.want {
				t.Errorf("row %q, want %q", got, tc.want)
			}
			for j, op := range onTrue {
				if op.Timestamp != tc.onTrue[j].Timestamp {
					t.Errorf("the caller's true operation %d got timestamp %d", j, op.Timestamp)
				}
			}
		})
	}
}

// TestCheckAndMutateErrors: neither list, or an unknown family in either
// list (also the one not chosen), fails and writes nothing.
func TestCheckAndMutateErrors(t *testing.T) {
	g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	ctx := context.Background()
	if err := g.rep.Write(ctx, put("r", "abc")); err != nil {
		t.Fatal(err)
	}
	bad := mutation.Op{Kind: mutation.SetCell, Family: "zz", Qualifier: []byte("q"), Timestamp: mutation.ServerTime, Value: []byte("x")}
	cases := []struct {
		name            string
		onTrue, onFalse []mutation.Op
		want            error
	}{
		{"neither list", nil, nil, replica.ErrInvalidCondMutation},
		{"unknown family in the chosen list", []mutation.Op{set("q", "new"), bad}, nil, tablet.ErrUnknownFamily},
		{"unknown family in the other list", []mutation.Op{set("q", "new")}, []mutation.Op{bad}, tablet.ErrUnknownFamily},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := g.rep.CheckAndMutate(ctx, []byte("r"), nil, tc.onTrue, tc.onFalse); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if got := rowString(t, g.rep, "r"); got != "q=abc" {
				t.Fatalf("row after the failed call: %q, want q=abc", got)
			}
		})
	}
}

// TestCheckAndMutateCompareAndSet: goroutines race to advance one row's
// counter with compare-and-set (if v is k-1, set v to k and record the
// winner of round k). Without the row lock two of them could both read
// k-1 and both win round k; with it every round has exactly one winner
// and the counter ends at the number of rounds.
func TestCheckAndMutateCompareAndSet(t *testing.T) {
	g := newRig(t, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	ctx := context.Background()
	if err := g.rep.Write(ctx, &mutation.RowMutation{Row: []byte("c"), Ops: []mutation.Op{set("v", "0")}}); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 50
	var mu sync.Mutex
	winners := map[int][]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; k <= rounds; k++ {
				pred := &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
					{Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte("v")}},
					{Filter: &btpb.RowFilter_CellsPerColumnLimitFilter{CellsPerColumnLimitFilter: 1}},
					{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte(strconv.Itoa(k - 1))}},
				}}}}
				cf, err := filter.Compile(pred)
				if err != nil {
					errs <- err
					return
				}
				won, err := g.rep.CheckAndMutate(ctx, []byte("c"), cf, []mutation.Op{set("v", strconv.Itoa(k))}, nil)
				if err != nil {
					errs <- err
					return
				}
				if won {
					mu.Lock()
					winners[k] = append(winners[k], w)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := 1; k <= rounds; k++ {
		if len(winners[k]) != 1 {
			t.Errorf("round %d: winners %v, want exactly one", k, winners[k])
		}
	}
	if got := rowString(t, g.rep, "c"); got != "v="+strconv.Itoa(rounds) {
		t.Errorf("row %q, want v=%d", got, rounds)
	}
}
