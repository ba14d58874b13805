package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// column is one column of the table: a peer's figures, or Bighive's floor.
type column struct {
	key, title string
}

var columns = []column{
	{peerBighive, "Bighive, native client"},
	{"floor", "ping floor (pings/s)"},
	{peerPebble, "Pebble, embedded"},
	{peerRedis, "Redis, appendfsync always"},
	{peerEtcd, "etcd, one node"},
	{peerEmulator, "emulator, official client"},
	{peerBighiveBT, "Bighive, official client"},
}

// ratios are the quotients the table ends with: numerator column over
// denominator column.
var ratios = []struct{ num, den, title string }{
	{peerBighive, peerPebble, "Bighive / Pebble"},
	{peerBighive, peerRedis, "Bighive / Redis"},
	{peerBighive, peerEtcd, "Bighive / etcd"},
	{peerBighiveBT, peerEmulator, "official client: Bighive / emulator"},
}

// workloads are the table's rows.
var workloads = []struct {
	phase, title string
	mb           bool // MB/s rather than rows/s
}{
	{phaseWrite, "durable Put, random rows", false},
	{phaseReadWarm, "Get, warm (hot range in cache)", false},
	{phaseRead, "Get, whole keyspace (Bighive: block-cache miss)", false},
	{phaseBulk, "bulk, 100-row batches (p50 of a batch)", false},
	{phaseScan, "scan, one caller (MB/s; p50 of a pass)", true},
}

// printTable writes the header lines, the markdown table and its notes.
func printTable(w io.Writer, o options, med map[string]figures, vers []string, started time.Time) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "\n%s of %d run(s), %s, %s (%d cores, load %s), %d callers, %d-byte values, %d rows, %d-row batches, %v per phase, warm range %d rows\n\n",
		map[bool]string{true: "Medians", false: "Figures"}[o.runs > 1], o.runs, started.UTC().Format("2006-01-02 15:04 UTC"),
		host, runtime.NumCPU(), loadAvg(), o.concurrency, o.valueSize, o.keys, o.batch, o.duration, hotRows(o))
	var cols []column
	for _, c := range columns {
		if med[c.key] != nil || (c.key == "floor" && med[peerBighive] != nil) {
			cols = append(cols, c)
		}
	}
	var rats []int
	for i, r := range ratios {
		if med[r.num] != nil && med[r.den] != nil {
			rats = append(rats, i)
		}
	}
	head := []string{"workload (rows/s · p50)"}
	for _, c := range cols {
		head = append(head, c.title)
	}
	for _, i := range rats {
		head = append(head, ratios[i].title)
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, strings.Repeat("| --- ", len(head))+"|")
	for _, wl := range workloads {
		row := []string{wl.title}
		for _, c := range cols {
			if c.key == "floor" {
				f, ok := med[peerBighive][wl.phase]
				row = append(row, cellIf(ok && f.Floor > 0, thousands(f.Floor)))
				continue
			}
			f, ok := med[c.key][wl.phase]
			row = append(row, cellIf(ok, cell(f, wl.mb)))
		}
		for _, i := range rats {
			a, okA := med[ratios[i].num][wl.phase]
			b, okB := med[ratios[i].den][wl.phase]
			va, vb := a.RowsPS, b.RowsPS
			if wl.mb {
				va, vb = a.MBPS, b.MBPS
			}
			row = append(row, cellIf(okA && okB && vb > 0, fmt.Sprintf("%.2f×", va/vb)))
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Durability of an acknowledged Put: Bighive, fsynced WAL (group commit); Pebble, pebble.Sync; Redis, fsync of the")
	fmt.Fprintln(w, "append-only file before the reply; etcd, raft log fsynced; the emulator keeps everything in memory (not durable).")
	fmt.Fprintln(w, "Redis has no ordered scan (—). Ping floor: Bighive's no-op RPC at the same concurrency, probed before each phase.")
	fmt.Fprintln(w)
	for _, v := range vers {
		fmt.Fprintln(w, "- "+v)
	}
}

func cellIf(ok bool, s string) string {
	if !ok {
		return "—"
	}
	return s
}

// cell is a rate and its p50: "12 345 · 4.1 ms", or "301 MB/s · 1.2 s".
func cell(f figure, mb bool) string {
	rate := thousands(f.RowsPS)
	if mb {
		rate = fmt.Sprintf("%.0f MB/s", f.MBPS)
	}
	if f.P50 <= 0 {
		return rate
	}
	return rate + " · " + dur(f.P50)
}

// dur is a latency with two or three significant digits.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/1e3)
}

// thousands formats n rounded, with spaces between groups of three digits.
func thousands(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// loadAvg is the 1-minute load average as text.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// versions names what ran: each peer's version and the clients'.
func versions(o options) []string {
	deps := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			deps[d.Path] = d.Version
		}
	}
	var v []string
	if o.want(peerBighive) || o.want(peerBighiveBT) {
		rev := commandOutput("git", "-C", o.root, "describe", "--always", "--dirty")
		v = append(v, fmt.Sprintf("Bighive %s (`bighive bench`, one master + one tserver%s, %d tablets by default, %d MB block cache)",
			rev, map[bool]string{true: " + a frontend", false: ""}[o.want(peerBighiveBT)], 8, o.cacheBytes>>20))
	}
	if o.want(peerPebble) {
		v = append(v, "Pebble "+requireVersion(o.root+"/tools/bench/pebble/go.mod", "github.com/cockroachdb/pebble/v2")+" (tools/bench/pebble, embedded, synced writes)")
	}
	if o.want(peerRedis) {
		v = append(v, redisVersion(o.redisBin)+", redis-benchmark (appendonly yes, appendfsync always, save '')")
	}
	if o.want(peerEtcd) {
		ev := strings.SplitN(commandOutput(o.etcdBin, "--version"), "\n", 2)[0]
		v = append(v, strings.Replace(ev, "etcd Version:", "etcd", 1)+", one node; client go.etcd.io/etcd/client/v3 "+deps["go.etcd.io/etcd/client/v3"]+" (linearizable Gets)")
	}
	if o.want(peerEmulator) {
		v = append(v, emulatorVersion(o.emulatorBin))
	}
	if o.want(peerEmulator) || o.want(peerBighiveBT) {
		v = append(v, "official client cloud.google.com/go/bigtable "+deps["cloud.google.com/go/bigtable"]+" (default connection pool, no authentication)")
	}
	v = append(v, runtime.Version()+" for this program")
	return v
}
