package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"

	"cloud.google.com/go/bigtable"

	"bighive/testkit/cluster"
)

// bigtableChapter: the official Cloud Bigtable Go client
// (cloud.google.com/go/bigtable), pointed at the cluster's frontend with
// BIGTABLE_EMULATOR_HOST, does what the tour did with Bighive's client:
// admin, writes, reads with a filter, a conditional mutation, an
// increment, SampleRowKeys, dropping rows and the table.
func bigtableChapter(ctx context.Context, t *tour, c *cluster.Cluster) error {
	const table = "orders"
	done := t.stepf("Cloud Bigtable API: the official Go client through the frontend (BIGTABLE_EMULATOR_HOST=%s)", c.BigtableAddr())
	old, had := os.LookupEnv("BIGTABLE_EMULATOR_HOST")
	os.Setenv("BIGTABLE_EMULATOR_HOST", c.BigtableAddr())
	defer func() {
		if had {
			os.Setenv("BIGTABLE_EMULATOR_HOST", old)
		} else {
			os.Unsetenv("BIGTABLE_EMULATOR_HOST")
		}
	}()
	adm, err := bigtable.NewAdminClient(ctx, "demo-project", "demo-instance")
	if err != nil {
		return fmt.Errorf("bigtable admin client: %w", err)
	}
	defer adm.Close()
	bt, err := bigtable.NewClientWithConfig(ctx, "demo-project", "demo-instance",
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return fmt.Errorf("bigtable client: %w", err)
	}
	defer bt.Close()
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, SplitKeys: []string{"order0010"},
		Families: map[string]bigtable.GCPolicy{"info": bigtable.MaxVersionsPolicy(2), "counts": bigtable.MaxVersionsPolicy(1)}}); err != nil {
		return fmt.Errorf("bigtable: create table: %w", err)
	}
	info, err := adm.TableInfo(ctx, table)
	if err != nil {
		return fmt.Errorf("bigtable: table info: %w", err)
	}
	fams := slices.Clone(info.Families)
	slices.Sort(fams)
	if !slices.Equal(fams, []string{"counts", "info"}) {
		return fmt.Errorf("bigtable: table %s has families %v, want counts and info", table, fams)
	}
	t.printf("admin: CreateTableFromConf %q split at order0010, families %s (info keeps 2 versions)", table, strings.Join(fams, ", "))
	tbl := bt.Open(table)

	// Write: 20 orders in one ApplyBulk, every third one shipped.
	var keys []string
	var ms []*bigtable.Mutation
	for i := range 20 {
		m := bigtable.NewMutation()
		m.Set("info", "item", bigtable.ServerTime, []byte(fmt.Sprintf("item-%d", i)))
		status := "pending"
		if i%3 == 0 {
			status = "shipped"
		}
		m.Set("info", "status", bigtable.ServerTime, []byte(status))
		keys = append(keys, orderKey(i))
		ms = append(ms, m)
	}
	errs, err := tbl.ApplyBulk(ctx, keys, ms)
	if err != nil {
		return fmt.Errorf("bigtable: apply bulk: %w", err)
	}
	for i, e := range errs {
		if e != nil {
			return fmt.Errorf("bigtable: apply bulk, row %s: %w", keys[i], e)
		}
	}
	t.printf("write: ApplyBulk of %d rows %s … %s (info:item, info:status), across both tablets", len(keys), keys[0], keys[len(keys)-1])

	// Read one row by key.
	row, err := tbl.ReadRow(ctx, orderKey(7))
	if err != nil {
		return fmt.Errorf("bigtable: read row: %w", err)
	}
	if got := cellValue(row, "info", "item"); got != "item-7" {
		return fmt.Errorf("bigtable: ReadRow %s: info:item = %q, want item-7", orderKey(7), got)
	}
	t.printf("read by key: ReadRow %s → info:item=%q info:status=%q", orderKey(7), cellValue(row, "info", "item"), cellValue(row, "info", "status"))

	// Read a range with a filter: the shipped orders of [order0005, order0015).
	var shipped []string
	err = tbl.ReadRows(ctx, bigtable.NewRange(orderKey(5), orderKey(15)), func(r bigtable.Row) bool {
		shipped = append(shipped, r.Key())
		return true
	}, bigtable.RowFilter(bigtable.ConditionFilter(
		bigtable.ChainFilters(bigtable.ColumnFilter("status"), bigtable.ValueFilter("shipped")),
		bigtable.PassAllFilter(), bigtable.BlockAllFilter())))
	if err != nil {
		return fmt.Errorf("bigtable: read rows: %w", err)
	}
	want := []string{orderKey(6), orderKey(9), orderKey(12)}
	if !slices.Equal(shipped, want) {
		return fmt.Errorf("bigtable: shipped orders of [%s, %s) = %v, want %v", orderKey(5), orderKey(15), shipped, want)
	}
	t.printf("read a range with a filter: ReadRows [%s, %s) where info:status=shipped → %s", orderKey(5), orderKey(15), strings.Join(shipped, " "))

	// Conditional mutation: ship order 7 only if it is still pending.
	ship := bigtable.NewMutation()
	ship.Set("info", "status", bigtable.ServerTime, []byte("shipped"))
	var matched bool
	cond := bigtable.NewCondMutation(bigtable.ChainFilters(bigtable.ColumnFilter("status"), bigtable.LatestNFilter(1), bigtable.ValueFilter("pending")), ship, nil)
	if err := tbl.Apply(ctx, orderKey(7), cond, bigtable.GetCondMutationResult(&matched)); err != nil {
		return fmt.Errorf("bigtable: conditional mutation: %w", err)
	}
	row, err = tbl.ReadRow(ctx, orderKey(7), bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err != nil {
		return fmt.Errorf("bigtable: read row: %w", err)
	}
	if !matched || cellValue(row, "info", "status") != "shipped" {
		return fmt.Errorf("bigtable: conditional ship of %s: matched %v, status now %q", orderKey(7), matched, cellValue(row, "info", "status"))
	}
	again := false
	if err := tbl.Apply(ctx, orderKey(7), cond, bigtable.GetCondMutationResult(&again)); err != nil || again {
		return fmt.Errorf("bigtable: second conditional ship of %s: matched %v, %v; want no match", orderKey(7), again, err)
	}
	t.printf("conditional mutation: if %s's latest info:status is pending, set shipped → matched, now %q; again → no match", orderKey(7), "shipped")

	// Increment a counter twice.
	var n uint64
	for range 2 {
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment("counts", "views", 5)
		r, err := tbl.ApplyReadModifyWrite(ctx, orderKey(7), rmw)
		if err != nil {
			return fmt.Errorf("bigtable: increment: %w", err)
		}
		v := []byte(cellValue(r, "counts", "views"))
		if len(v) != 8 {
			return fmt.Errorf("bigtable: increment of %s returned %d bytes, want 8", orderKey(7), len(v))
		}
		n = binary.BigEndian.Uint64(v)
	}
	if n != 10 {
		return fmt.Errorf("bigtable: counts:views of %s = %d after two +5, want 10", orderKey(7), n)
	}
	t.printf("increment: ReadModifyWrite counts:views +5, twice → %d (an 8-byte big-endian counter)", n)

	// SampleRowKeys: where the table's tablets end.
	samples, err := tbl.SampleRowKeys(ctx)
	if err != nil {
		return fmt.Errorf("bigtable: sample row keys: %w", err)
	}
	if len(samples) == 0 || !slices.IsSorted(samples) {
		return fmt.Errorf("bigtable: SampleRowKeys = %q, want sorted keys", samples)
	}
	t.printf("SampleRowKeys → %q (tablet boundaries, for splitting work)", samples)

	// Drop the rows with prefix order001 (orders 10 … 19).
	if err := adm.DropRowRange(ctx, table, "order001"); err != nil {
		return fmt.Errorf("bigtable: drop row range: %w", err)
	}
	var left []string
	if err := tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		left = append(left, r.Key())
		return true
	}, bigtable.RowFilter(bigtable.StripValueFilter())); err != nil {
		return fmt.Errorf("bigtable: read rows: %w", err)
	}
	if len(left) != 10 || left[len(left)-1] != orderKey(9) {
		return fmt.Errorf("bigtable: after DropRowRange order001 the table holds %v, want orders 0 … 9", left)
	}
	t.printf("DropRowRange prefix order001 → %d rows left, %s … %s", len(left), left[0], left[len(left)-1])

	// Delete the table.
	if err := adm.DeleteTable(ctx, table); err != nil {
		return fmt.Errorf("bigtable: delete table: %w", err)
	}
	tables, err := adm.Tables(ctx)
	if err != nil {
		return fmt.Errorf("bigtable: list tables: %w", err)
	}
	if slices.Contains(tables, table) {
		return fmt.Errorf("bigtable: table %s still listed after DeleteTable: %v", table, tables)
	}
	t.printf("DeleteTable %q → tables now %v", table, tables)
	done()
	return nil
}

func orderKey(i int) string { return fmt.Sprintf("order%04d", i) }

// cellValue is the newest value of fam:qual in row ("" if none).
func cellValue(row bigtable.Row, fam, qual string) string {
	for _, it := range row[fam] {
		if it.Column == fam+":"+qual {
			return string(it.Value)
		}
	}
	return ""
}
