package cli

import (
	"context"
	"fmt"
	"strconv"

	"bighive/internal/obs"
)

// statusCommands are `bighive status` and `bighive version`.
func statusCommands() []Command {
	return []Command{
		{Name: "status", Summary: "cluster summary: masters and the leader, tservers and their liveness, tables, unassigned tablets, WAL and cache totals",
			Example: "status\nstatus --masters 10.0.0.1:7100,10.0.0.2:7100,10.0.0.3:7100 --json", Run: runStatus},
		{Name: "version", Summary: "print the version of this binary (module version, VCS revision, Go version)",
			Example: "version\nversion --json", Run: runVersion},
	}
}

func runVersion(ctx context.Context, env *Env, args []string) error {
	fs := env.FlagSet()
	if _, err := env.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	if env.JSON {
		b := obs.ReadBuild()
		return env.object(map[string]any{"module": b.Module, "version": b.Version, "revision": b.Revision,
			"vcs_time": b.Time, "modified": b.Modified, "go": b.Go})
	}
	_, err := fmt.Fprintln(env.Stdout, obs.Version("bighive"))
	return err
}

// statusSummary is what `bighive status` gathers.
type statusSummary struct {
	Masters    []map[string]any `json:"masters"`
	Leader     string           `json:"leader"`
	TServers   []map[string]any `json:"tservers"`
	Live       int              `json:"live_tservers"`
	Dead       int              `json:"dead_tservers"`
	Tables     int              `json:"tables"`
	Tablets    int              `json:"tablets"`
	Unassigned int              `json:"unassigned_tablets"`
	Totals     map[string]int64 `json:"totals"`
}

// statusTotals are the tserver counters `bighive status` adds up.
var statusTotals = []string{"wal_appends", "wal_bytes", "wal_syncs", "cache_hits", "cache_misses", "cache_bytes", "cache_capacity_bytes"}

func runStatus(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, _, err := env.session(ctx, args, 0, 0, nil)
	if err != nil {
		return err
	}
	defer done()
	sum := statusSummary{Totals: map[string]int64{}}
	var mrows [][]string
	for _, addr := range env.Masters {
		ms, err := c.MasterStatus(ctx, addr)
		if err != nil {
			sum.Masters = append(sum.Masters, map[string]any{"address": addr, "error": describe(err)})
			mrows = append(mrows, []string{addr, "-", "unreachable: " + describe(err), "-", "-", "-"})
			continue
		}
		if ms.LeaderAddress != "" && sum.Leader == "" {
			sum.Leader = ms.LeaderID + " (" + ms.LeaderAddress + ")"
		}
		sum.Masters = append(sum.Masters, map[string]any{"address": addr, "id": ms.ID, "raft_state": ms.RaftState,
			"leader": ms.LeaderID, "term": ms.Term, "applied_index": ms.AppliedIndex, "version": ms.Version})
		mrows = append(mrows, []string{addr, ms.ID, ms.RaftState, ms.LeaderID,
			strconv.FormatUint(ms.Term, 10), strconv.FormatUint(ms.AppliedIndex, 10)})
	}

	servers, err := c.TServers(ctx)
	if err != nil {
		return err
	}
	var trows [][]string
	for _, s := range servers {
		row := map[string]any{"address": s.Address, "uuid": s.UUID, "live": s.Live, "tablets": s.Tablets}
		cols := []string{s.Address, strconv.FormatBool(s.Live), strconv.Itoa(s.Tablets), "-", "-", "-"}
		if s.Live {
			sum.Live++
			if st, err := c.TServerStatus(ctx, s.Address); err == nil {
				row["counters"] = st.Counters
				for _, k := range statusTotals {
					sum.Totals[k] += st.Counters[k]
				}
				cols[3] = strconv.FormatInt(st.Counters["wal_appends"], 10)
				cols[4] = humanBytes(st.Counters["wal_bytes"])
				cols[5] = cacheString(st.Counters["cache_hits"], st.Counters["cache_misses"], st.Counters["cache_bytes"])
			} else {
				row["error"] = describe(err)
			}
		} else {
			sum.Dead++
		}
		sum.TServers = append(sum.TServers, row)
		trows = append(trows, cols)
	}

	tables, err := c.ListTables(ctx)
	if err != nil {
		return err
	}
	sum.Tables = len(tables)
	for _, t := range tables {
		tablets, err := c.Tablets(ctx, t)
		if err != nil {
			return err
		}
		sum.Tablets += len(tablets)
		for _, tb := range tablets {
			if tb.State == "unassigned" {
				sum.Unassigned++
			}
		}
	}

	if env.JSON {
		return env.object(sum)
	}
	w := env.Stdout
	leader := sum.Leader
	if leader == "" {
		leader = "none known"
	}
	fmt.Fprintf(w, "leader: %s\n\n", leader)
	if err := env.Table([]string{"MASTER", "ID", "RAFT STATE", "LEADER", "TERM", "APPLIED"}, mrows); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntservers: %d live, %d dead\n", sum.Live, sum.Dead)
	if len(trows) > 0 {
		if err := env.Table([]string{"TSERVER", "LIVE", "TABLETS", "WAL APPENDS", "WAL BYTES", "CACHE"}, trows); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\ntables: %d, tablets: %d, unassigned tablets: %d\n", sum.Tables, sum.Tablets, sum.Unassigned)
	fmt.Fprintf(w, "wal: %d appends, %s, %d syncs\n", sum.Totals["wal_appends"], humanBytes(sum.Totals["wal_bytes"]), sum.Totals["wal_syncs"])
	_, err = fmt.Fprintf(w, "cache: %s of %s\n", cacheString(sum.Totals["cache_hits"], sum.Totals["cache_misses"], sum.Totals["cache_bytes"]),
		humanBytes(sum.Totals["cache_capacity_bytes"]))
	return err
}

// cacheString is "H hits, M misses (P% hit), B".
func cacheString(hits, misses, bytes int64) string {
	ratio := "-"
	if hits+misses > 0 {
		ratio = fmt.Sprintf("%.1f%%", 100*float64(hits)/float64(hits+misses))
	}
	return fmt.Sprintf("%d hits, %d misses (%s hit), %s", hits, misses, ratio, humanBytes(bytes))
}
