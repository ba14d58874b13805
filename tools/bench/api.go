package bench

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"bighive/client"
	"bighive/internal/limits"
)

// The APIs a run's data calls can go through (Options.API).
const (
	// APINative is Bighive's own client, straight to the tservers.
	APINative = "native"
	// APIBigtable is the official Cloud Bigtable Go client
	// (cloud.google.com/go/bigtable) through a frontend serving the
	// Bigtable API (Options.BigtableAddr).
	APIBigtable = "bigtable"
)

// store is what the phases call: each data operation of a run, over one
// of the two clients. Table creation, checkpoints and status stay on the
// native client in both cases.
type store interface {
	// Ping is the floor of a data call: a no-op RPC over the same
	// connections, to the tserver of row key (native) or to the frontend
	// (Bigtable API: PingAndWarm, which the frontend answers itself).
	Ping(ctx context.Context, key string) error
	// Put writes value to row key's cf:v at the server's time, durably.
	Put(ctx context.Context, key string, value []byte) error
	// Bulk writes values[j] at timestamp ts (µs) to rows[j]; it fails if
	// any row does.
	Bulk(ctx context.Context, rows []string, ts int64, values [][]byte) error
	// Get reads row key and returns its cells' count, its first value and
	// the key, qualifier and value bytes it moved.
	Get(ctx context.Context, key string) (cells int, value []byte, bytes int64, err error)
	// Scan reads the rows of [start, end) in order ("" end: the table's
	// end) and calls f with each row's key, cell count and bytes until f
	// returns false.
	Scan(ctx context.Context, start, end string, f func(key string, cells int, bytes int64) bool) error
	// Increment adds 1 to the 8-byte big-endian counter cf:n of row key.
	Increment(ctx context.Context, key string) error
	// Counter reads cf:n of row key (ok false: no cell).
	Counter(ctx context.Context, key string) (v []byte, ok bool, err error)
	// CheckAndSet is one conditional mutation of row key: the predicate
	// is "the latest cf:owner matches the regular expression owner"; if
	// onMatch it sets cf:owner to value when the predicate matches,
	// otherwise when it does not. It reports whether it matched.
	CheckAndSet(ctx context.Context, key, owner string, onMatch bool, value string) (matched bool, err error)
	Close() error
}

// nativeStore is store over Bighive's client.
type nativeStore struct{ tbl *client.Table }

func (s nativeStore) Close() error { return nil }

func (s nativeStore) Ping(ctx context.Context, key string) error { return s.tbl.Ping(ctx, key) }

func (s nativeStore) Put(ctx context.Context, key string, value []byte) error {
	return s.tbl.Put(ctx, key, family, qualifier, value)
}

func (s nativeStore) Bulk(ctx context.Context, rows []string, ts int64, values [][]byte) error {
	ms := make([]*client.Mutation, len(rows))
	for j := range rows {
		ms[j] = client.NewMutation()
		ms[j].Set(family, qualifier, ts, values[j])
	}
	errs, err := s.tbl.ApplyBulk(ctx, rows, ms)
	if err != nil {
		return err
	}
	for j, e := range errs {
		if e != nil {
			return fmt.Errorf("row %s: %w", rows[j], e)
		}
	}
	return nil
}

func (s nativeStore) Get(ctx context.Context, key string) (int, []byte, int64, error) {
	row, err := s.tbl.Get(ctx, key)
	if err != nil || len(row.Cells) == 0 {
		return 0, nil, 0, err
	}
	return len(row.Cells), row.Cells[0].Value, rowBytes(row), nil
}

func rowBytes(row client.Row) int64 {
	n := int64(len(row.Key))
	for _, c := range row.Cells {
		n += int64(len(c.Qualifier) + len(c.Value))
	}
	return n
}

func (s nativeStore) Scan(ctx context.Context, start, end string, f func(string, int, int64) bool) error {
	return s.tbl.Scan(ctx, start, end, func(row client.Row) bool { return f(row.Key, len(row.Cells), rowBytes(row)) })
}

func (s nativeStore) Increment(ctx context.Context, key string) error {
	m := client.NewReadModifyWrite()
	m.Increment(family, counterQualifier, 1)
	_, err := s.tbl.ApplyReadModifyWrite(ctx, key, m)
	return err
}

func (s nativeStore) Counter(ctx context.Context, key string) ([]byte, bool, error) {
	row, err := s.tbl.Get(ctx, key, client.Column(family, counterQualifier))
	if err != nil {
		return nil, false, err
	}
	v, ok := row.Value(family, counterQualifier)
	return v, ok, nil
}

func (s nativeStore) CheckAndSet(ctx context.Context, key, owner string, onMatch bool, value string) (bool, error) {
	set := client.NewMutation()
	set.Set(family, lockQualifier, client.ServerTime, []byte(value))
	pred := client.ChainFilters(client.ColumnFilter(lockQualifier), client.LatestNFilter(1), client.ValueFilter(owner))
	var cm *client.Mutation
	if onMatch {
		cm = client.NewCondMutation(pred, set, nil)
	} else {
		cm = client.NewCondMutation(pred, nil, set)
	}
	var matched bool
	err := s.tbl.Apply(ctx, key, cm, client.GetCondMutationResult(&matched))
	return matched, err
}

// bigtableStore is store over the official Cloud Bigtable Go client.
type bigtableStore struct {
	c   *bigtable.Client
	tbl *bigtable.Table
}

// dialBigtable connects the official client to the frontend at addr
// (without Google authentication, as with BIGTABLE_EMULATOR_HOST, but
// with the client's usual pool of connections), secured by creds.
func dialBigtable(ctx context.Context, addr, table string, creds credentials.TransportCredentials) (*bigtableStore, error) {
	c, err := bigtable.NewClientWithConfig(ctx, "bench", "bench",
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}},
		option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(creds)),
		option.WithGRPCDialOption(limits.GRPCCallOptions()))
	if err != nil {
		return nil, fmt.Errorf("bench: connect the Bigtable client to %s: %w", addr, err)
	}
	return &bigtableStore{c: c, tbl: c.Open(table)}, nil
}

func (s *bigtableStore) Close() error { return s.c.Close() }

func (s *bigtableStore) Ping(ctx context.Context, _ string) error { return s.c.PingAndWarm(ctx) }

func (s *bigtableStore) Put(ctx context.Context, key string, value []byte) error {
	m := bigtable.NewMutation()
	m.Set(family, qualifier, bigtable.ServerTime, value)
	return s.tbl.Apply(ctx, key, m)
}

func (s *bigtableStore) Bulk(ctx context.Context, rows []string, ts int64, values [][]byte) error {
	ms := make([]*bigtable.Mutation, len(rows))
	for j := range rows {
		ms[j] = bigtable.NewMutation()
		ms[j].Set(family, qualifier, bigtable.Timestamp(ts), values[j])
	}
	errs, err := s.tbl.ApplyBulk(ctx, rows, ms)
	if err != nil {
		return err
	}
	for j, e := range errs {
		if e != nil {
			return fmt.Errorf("row %s: %w", rows[j], e)
		}
	}
	return nil
}

func btRowBytes(row bigtable.Row) (cells int, first []byte, n int64) {
	n = int64(len(row.Key()))
	for _, items := range row {
		for _, it := range items {
			if cells == 0 {
				first = it.Value
			}
			cells++
			n += int64(len(it.Column) - len(family) - 1 + len(it.Value))
		}
	}
	return cells, first, n
}

func (s *bigtableStore) Get(ctx context.Context, key string) (int, []byte, int64, error) {
	row, err := s.tbl.ReadRow(ctx, key)
	if err != nil || row == nil {
		return 0, nil, 0, err
	}
	cells, first, n := btRowBytes(row)
	return cells, first, n, nil
}

func (s *bigtableStore) Scan(ctx context.Context, start, end string, f func(string, int, int64) bool) error {
	rr := bigtable.NewRange(start, end)
	if end == "" {
		rr = bigtable.InfiniteRange(start)
	}
	return s.tbl.ReadRows(ctx, rr, func(row bigtable.Row) bool {
		cells, _, n := btRowBytes(row)
		return f(row.Key(), cells, n)
	})
}

func (s *bigtableStore) Increment(ctx context.Context, key string) error {
	m := bigtable.NewReadModifyWrite()
	m.Increment(family, counterQualifier, 1)
	_, err := s.tbl.ApplyReadModifyWrite(ctx, key, m)
	return err
}

func (s *bigtableStore) Counter(ctx context.Context, key string) ([]byte, bool, error) {
	row, err := s.tbl.ReadRow(ctx, key, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.FamilyFilter(family), bigtable.ColumnFilter(counterQualifier), bigtable.LatestNFilter(1))))
	if err != nil {
		return nil, false, err
	}
	if items := row[family]; len(items) > 0 {
		return items[0].Value, true, nil
	}
	return nil, false, nil
}

func (s *bigtableStore) CheckAndSet(ctx context.Context, key, owner string, onMatch bool, value string) (bool, error) {
	set := bigtable.NewMutation()
	set.Set(family, lockQualifier, bigtable.ServerTime, []byte(value))
	pred := bigtable.ChainFilters(bigtable.ColumnFilter(lockQualifier), bigtable.LatestNFilter(1), bigtable.ValueFilter(owner))
	var cm *bigtable.Mutation
	if onMatch {
		cm = bigtable.NewCondMutation(pred, set, nil)
	} else {
		cm = bigtable.NewCondMutation(pred, nil, set)
	}
	var matched bool
	err := s.tbl.Apply(ctx, key, cm, bigtable.GetCondMutationResult(&matched))
	return matched, err
}

// openStore opens the run's table through the API the options name.
func (r *runner) openStore(ctx context.Context) (store, error) {
	switch r.opts.API {
	case APINative:
		tbl, err := r.opts.Client.Open(ctx, r.opts.Table)
		if err != nil {
			return nil, fmt.Errorf("bench: open table: %w", err)
		}
		return nativeStore{tbl: tbl}, nil
	case APIBigtable:
		return dialBigtable(ctx, r.opts.BigtableAddr, r.opts.Table, r.opts.Credentials)
	}
	return nil, errors.New("bench: unreachable")
}
