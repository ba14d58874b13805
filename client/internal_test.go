package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
	pb "bighive/proto/bighivepb"
)

func TestBackoff(t *testing.T) {
	b := newBackoff(10*time.Millisecond, time.Second)
	want := 10 * time.Millisecond
	for i := 0; i < 12; i++ {
		d := b.next()
		if d < want/2 || d > want {
			t.Fatalf("wait %d = %v, want in [%v, %v]", i, d, want/2, want)
		}
		want = min(2*want, time.Second)
	}
	b.reset()
	if d := b.next(); d > 10*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	notServing := apierr.ToStatus(apierr.Tablet(pb.TabletError_NOT_SERVING, "t1", 2, "x")).Err()
	wrong := apierr.ToStatus(apierr.Tablet(pb.TabletError_WRONG_TABLET, "t1", 2, "x")).Err()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		sent bool
		want failure
	}{
		{"not serving", live, notServing, true, safe},
		{"wrong tablet", live, wrong, true, safe},
		{"unavailable sent", live, status.Error(codes.Unavailable, "eof"), true, ambiguous},
		{"unavailable unsent", live, status.Error(codes.Unavailable, "refused"), false, safe},
		{"lookup failed", live, unsent(status.Error(codes.Unavailable, "no leader")), true, safe},
		{"attempt timeout", live, status.Error(codes.DeadlineExceeded, "slow"), true, ambiguous},
		{"aborted", live, status.Error(codes.Aborted, "x"), true, ambiguous},
		{"invalid", live, status.Error(codes.InvalidArgument, "x"), false, permanent},
		{"not found", live, unsent(status.Error(codes.NotFound, "table")), false, permanent},
		{"precondition", live, status.Error(codes.FailedPrecondition, "x"), true, permanent},
		{"exhausted", live, status.Error(codes.ResourceExhausted, "x"), true, permanent},
		{"internal", live, errors.New("bug"), true, permanent},
		{"caller gave up", done, notServing, true, permanent},
	}
	for _, tc := range tests {
		if got := classify(tc.ctx, tc.err, tc.sent); got != tc.want {
			t.Errorf("%s: classify = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !safe.retry(false) || !ambiguous.retry(true) || ambiguous.retry(false) || permanent.retry(true) {
		t.Errorf("retry rules broken")
	}
}

func TestLocCacheInsert(t *testing.T) {
	lc := newLocCache(nil, "t")
	loc := func(id, start, end, addr string) *location {
		return &location{tabletID: id, start: start, end: end, addr: addr}
	}
	lc.insert([]*location{loc("a", "", "c", "s1"), loc("b", "c", "f", "s1"), loc("c", "f", "", "s2")})
	// A split of [c, f) into [c, d) and [d, f), the second without a server yet.
	lc.insert([]*location{loc("d", "c", "d", "s3"), loc("e", "d", "f", "")})
	tests := []struct{ row, want string }{
		{"a", "a"}, {"b", "a"}, {"c", "d"}, {"cz", "d"}, {"d", ""}, {"e", ""}, {"f", "c"}, {"zz", "c"},
	}
	for _, tc := range tests {
		got := ""
		if l := lc.find(tc.row); l != nil {
			got = l.tabletID
		}
		if got != tc.want {
			t.Errorf("find(%q) = %q, want %q", tc.row, got, tc.want)
		}
	}
	lc.invalidate(lc.find("a"))
	if lc.find("b") != nil || lc.size() != 2 {
		t.Errorf("invalidate left %d locations", lc.size())
	}
	// A fetch covering everything replaces everything.
	lc.insert([]*location{loc("x", "", "", "s9")})
	if l := lc.find("q"); l == nil || l.tabletID != "x" || lc.size() != 1 {
		t.Errorf("full replace: %v, %d locations", l, lc.size())
	}
}

func TestCreateTableRequest(t *testing.T) {
	tests := []struct {
		name string
		spec TableSpec
		ok   bool
	}{
		{"ok", TableSpec{Name: "t", Families: []FamilySpec{{Name: "cf", MaxVersions: 3, MaxAge: time.Hour}}, SplitKeys: []string{"m", "c"}}, true},
		{"bad name", TableSpec{Name: "a b", Families: []FamilySpec{{Name: "cf"}}}, false},
		{"no family (families come later)", TableSpec{Name: "t"}, true},
		{"dup family", TableSpec{Name: "t", Families: []FamilySpec{{Name: "cf"}, {Name: "cf"}}}, false},
		{"bad family", TableSpec{Name: "t", Families: []FamilySpec{{Name: "c:f"}}}, false},
		{"negative", TableSpec{Name: "t", Families: []FamilySpec{{Name: "cf", MaxVersions: -1}}}, false},
		{"dup split", TableSpec{Name: "t", Families: []FamilySpec{{Name: "cf"}}, SplitKeys: []string{"a", "a"}}, false},
		{"empty split", TableSpec{Name: "t", Families: []FamilySpec{{Name: "cf"}}, SplitKeys: []string{""}}, false},
	}
	for _, tc := range tests {
		req, err := createTableRequest(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.name, err)
			continue
		}
		if err != nil && apierr.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("%s: code %v", tc.name, apierr.CodeOf(err))
		}
		if tc.name == "ok" {
			if string(req.SplitKeys[0]) != "c" || req.Schema.Families[0].MaxAgeMicros != time.Hour.Microseconds() {
				t.Errorf("request %v", req)
			}
		}
	}
}
