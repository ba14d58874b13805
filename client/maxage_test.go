package client_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/master"
	"bighive/testkit/ports"
)

// TestCreateTableMaxAgeLimit runs against a real in-process master: a
// family max age over 100 years is refused with InvalidArgument naming the
// family and the value; 100 years is created and reads back unchanged.
func TestCreateTableMaxAgeLimit(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := ports.AddrT(t)
	m, err := master.Start(master.Config{ID: "m1", Dir: filepath.Join(t.TempDir(), "m1"), RaftAddr: raftAddr,
		Logger: slog.New(slog.DiscardHandler)}, lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	year := 365 * 24 * time.Hour
	tests := []struct {
		name   string
		maxAge time.Duration
		ok     bool
	}{
		{"100 years", limits.MaxFamilyMaxAge, true},
		{"100 years and a microsecond", limits.MaxFamilyMaxAge + time.Microsecond, false},
		{"200 years", 200 * year, false},
		{"290 years", 290 * year, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := "age" + string(rune('a'+i))
			err := c.CreateTable(ctx, client.TableSpec{Name: table, Families: []client.FamilySpec{{Name: "cf"}, {Name: "old", MaxAge: tc.maxAge}}})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				infos, err := c.DescribeTables(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, info := range infos {
					if info.Name == table && (len(info.Families) != 2 || info.Families[1].MaxAge != tc.maxAge) {
						t.Fatalf("families read back as %+v", info.Families)
					}
				}
				return
			}
			msg := status.Convert(err).Message()
			micros := tc.maxAge.Microseconds()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, `"old"`) || !strings.Contains(msg, strconv.FormatInt(micros, 10)) {
				t.Fatalf("create with max age %v: %v; want InvalidArgument naming family \"old\" and %d", tc.maxAge, err, micros)
			}
		})
	}
}
