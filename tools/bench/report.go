package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency is the distribution of one kind of call's latencies: exact
// order statistics of every recorded call (nearest rank), not bucketed.
type Latency struct {
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// latencyOf sorts lat and takes its percentiles.
func latencyOf(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		return lat[min(len(lat)-1, max(i, 0))]
	}
	return Latency{P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: lat[len(lat)-1]}
}

// OpStats is one kind of operation of a mixed phase (the YCSB
// workloads): how many completed and their latencies.
type OpStats struct {
	Kind  string `json:"kind"`
	Count int64  `json:"count"`
	Latency
}

// Result is one phase's measurement.
type Result struct {
	Phase string `json:"phase"`
	// Calls is the number of completed client calls (a Put, a Get, an
	// ApplyBulk, a scan, a ping); Rows the rows they handled; Bytes the
	// key, qualifier and value bytes they moved.
	Calls   int64         `json:"calls"`
	Rows    int64         `json:"rows"`
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Latency of one call (a YCSB read-modify-write is its Get and Put
	// together; a full scan is one pass).
	Latency
	// Floor is the pings/s of the floor probe just before the phase (the
	// ping phase's own rate for ping, and for every phase when probes are
	// off); FloorRatio is the phase's rows/s over it: 1 for ping itself,
	// above 1 when one call moves several rows (bulk, scans).
	Floor      float64 `json:"floor_per_sec"`
	FloorRatio float64 `json:"floor_ratio"`
	// Ops splits a mixed phase by kind of operation (nil otherwise).
	Ops []OpStats `json:"ops,omitempty"`
	// Load is the 1-minute load average when the phase ended (-1 unknown).
	Load float64 `json:"load"`
	// CPU is the CPU time of the client (this process) and of each of
	// Report.Procs over the phase's timed window (a process unreadable
	// then is missing). CoresBusy is their sum over Elapsed; MachineBusy
	// the busy time of all the machine's CPUs over Elapsed, whoever used
	// it (-1 unknown).
	CPU         []ProcCPU `json:"cpu,omitempty"`
	CoresBusy   float64   `json:"cores_busy"`
	MachineBusy float64   `json:"machine_cores_busy"`
}

// ProcCPU is one process's CPU time over a phase.
type ProcCPU struct {
	// Role is RoleClient or a Proc's role.
	Role string `json:"role"`
	Pid  int    `json:"pid,omitempty"`
	// CPU is its user + system time.
	CPU time.Duration `json:"cpu_ns"`
	// PerOp is CPU in µs per row of the phase (Result.Rows: a call of
	// Put, Get, ping, increment or checkAndMutate, a YCSB operation, a
	// row of a bulk batch or a scan), so PerOp × rows/s / 1e6 is the
	// cores it kept busy.
	PerOp float64 `json:"us_per_op"`
}

// CPUOf returns the CPU time of the process of role over the phase.
func (r Result) CPUOf(role string) (ProcCPU, bool) {
	for _, c := range r.CPU {
		if c.Role == role {
			return c, true
		}
	}
	return ProcCPU{}, false
}

// cpuLine is the CPU figures of r: µs per row of each of roles ("-"
// where unknown) and the cores busy.
func (r Result) cpuLine(roles []string, cores int) string {
	var parts []string
	for _, role := range roles {
		parts = append(parts, role+" "+r.perOp(role))
	}
	return fmt.Sprintf("cpu µs/op: %s; cores busy %s", strings.Join(parts, ", "), r.busy(cores))
}

// perOp is the µs per row of role, or "-".
func (r Result) perOp(role string) string {
	if c, ok := r.CPUOf(role); ok {
		return strconv.FormatFloat(c.PerOp, 'f', 1, 64)
	}
	return "-"
}

// busy is "1.57 of 2", with the machine's figure when known.
func (r Result) busy(cores int) string {
	s := fmt.Sprintf("%.2f of %d", r.CoresBusy, cores)
	if r.MachineBusy >= 0 {
		s += fmt.Sprintf(" (machine %.2f)", r.MachineBusy)
	}
	return s
}

// MarshalJSON adds the rates to the stored fields.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		RowsPerSec  float64 `json:"rows_per_sec"`
		CallsPerSec float64 `json:"calls_per_sec"`
		MBPerSec    float64 `json:"mb_per_sec"`
	}{plain(r), r.RowsPerSec(), r.CallsPerSec(), r.MBPerSec()})
}

// RowsPerSec is the phase's throughput in rows (= operations for Put and
// Get) per second.
func (r Result) RowsPerSec() float64 { return perSec(float64(r.Rows), r.Elapsed) }

// CallsPerSec is the phase's completed calls per second.
func (r Result) CallsPerSec() float64 { return perSec(float64(r.Calls), r.Elapsed) }

// MBPerSec is the phase's throughput in MB (10^6 bytes) per second.
func (r Result) MBPerSec() float64 { return perSec(float64(r.Bytes)/1e6, r.Elapsed) }

// Op returns the stats of one kind of operation of a mixed phase.
func (r Result) Op(kind string) (OpStats, bool) {
	for _, o := range r.Ops {
		if o.Kind == kind {
			return o, true
		}
	}
	return OpStats{}, false
}

func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

func (r Result) String() string {
	s := fmt.Sprintf("%-15s %9.0f rows/s %7.1f MB/s", r.Phase, r.RowsPerSec(), r.MBPerSec())
	if r.FloorRatio > 0 {
		s += fmt.Sprintf(" %6.2f× floor (%.0f/s)", r.FloorRatio, r.Floor)
	}
	if r.P50 > 0 {
		s += fmt.Sprintf("  p50 %v p90 %v p99 %v p99.9 %v max %v", round(r.P50), round(r.P90), round(r.P99), round(r.P999), round(r.Max))
	}
	s += fmt.Sprintf("  (%d rows in %v, load %.1f)", r.Rows, r.Elapsed.Round(time.Millisecond), r.Load)
	if len(r.CPU) > 0 {
		var roles []string
		for _, c := range r.CPU {
			roles = append(roles, c.Role)
		}
		s += "\n    " + r.cpuLine(roles, runtime.NumCPU())
	}
	for _, o := range r.Ops {
		s += fmt.Sprintf("\n    %-15s %8d  p50 %v p99 %v max %v", o.Kind, o.Count, round(o.P50), round(o.P99), round(o.Max))
	}
	return s
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// Report is one run's results plus what shaped them.
type Report struct {
	// API is the client the data calls went through (APINative or
	// APIBigtable).
	API string `json:"api"`
	// TLS reports whether the cluster and the client ran with TLS (bench
	// --tls).
	TLS bool `json:"tls,omitempty"`
	// Run is the run's index (1, 2, …; 0 for a median); Runs the number
	// of runs a median combines (0 for one run).
	Run          int    `json:"run,omitempty"`
	Runs         int    `json:"runs,omitempty"`
	Seed         uint64 `json:"seed"`
	Keys         int    `json:"keys"`
	ValueSize    int    `json:"value_size"`
	Concurrency  int    `json:"concurrency"`
	Tablets      int    `json:"tablets"`
	CacheBytes   int64  `json:"cache_bytes"`
	Distribution string `json:"distribution"`
	// TSFileBytes and TSFiles describe the table after the checkpoint
	// before the reads; HotRows is randomReadWarm's hot range.
	TSFileBytes int64 `json:"tsfile_bytes"`
	TSFiles     int   `json:"tsfiles"`
	HotRows     int   `json:"hot_rows"`
	// Cores is the CPUs this process may run on (the "of" of cores busy).
	Cores int `json:"cores"`
	// Procs are the server processes whose CPU time each phase reports
	// besides the client's; Unmeasured says which servers are not among
	// them and why (another machine, this process, …).
	Procs      []Proc   `json:"procs,omitempty"`
	Unmeasured []string `json:"unmeasured,omitempty"`
	Results    []Result `json:"results"`
}

// roles are the processes of the CPU figures: the client, then Procs.
func (r *Report) roles() []string {
	roles := []string{RoleClient}
	for _, p := range r.Procs {
		roles = append(roles, p.Role)
	}
	return roles
}

// Result returns the result of phase, if the run has one.
func (r *Report) Result(phase string) (Result, bool) {
	for _, x := range r.Results {
		if x.Phase == phase {
			return x, true
		}
	}
	return Result{}, false
}

// Median combines runs phase by phase: each figure is the median of that
// figure over the runs that have the phase (throughputs through Elapsed
// normalised to 1 s, so Rows, Calls and Bytes are the median rates, and
// each process's CPU its median CPU time per second; the floor ratio,
// the CPU per row and the cores busy are the medians of each run's own).
// Load is the median load. The pids of Procs are the first run's.
func Median(runs []*Report) *Report {
	if len(runs) == 0 {
		return nil
	}
	out := *runs[0]
	out.Run, out.Runs = 0, len(runs)
	out.Results = nil
	for _, first := range runs[0].Results {
		var rs []Result
		for _, run := range runs {
			if x, ok := run.Result(first.Phase); ok {
				rs = append(rs, x)
			}
		}
		m := Result{Phase: first.Phase, Elapsed: time.Second}
		m.Rows = int64(median(rs, Result.RowsPerSec))
		m.Bytes = int64(median(rs, func(r Result) float64 { return r.MBPerSec() * 1e6 }))
		m.Calls = int64(median(rs, Result.CallsPerSec))
		m.Latency = medianLatency(rs, func(r Result) Latency { return r.Latency })
		m.Floor = median(rs, func(r Result) float64 { return r.Floor })
		m.FloorRatio = median(rs, func(r Result) float64 { return r.FloorRatio })
		m.Load = median(rs, func(r Result) float64 { return r.Load })
		m.CoresBusy = median(rs, func(r Result) float64 { return r.CoresBusy })
		m.MachineBusy = median(rs, func(r Result) float64 { return r.MachineBusy })
		for _, c := range first.CPU {
			var has []Result
			for _, r := range rs {
				if _, ok := r.CPUOf(c.Role); ok {
					has = append(has, r)
				}
			}
			m.CPU = append(m.CPU, ProcCPU{Role: c.Role,
				CPU:   time.Duration(median(has, func(r Result) float64 { x, _ := r.CPUOf(c.Role); return perSec(float64(x.CPU), r.Elapsed) })),
				PerOp: median(has, func(r Result) float64 { x, _ := r.CPUOf(c.Role); return x.PerOp })})
		}
		for _, op := range first.Ops {
			o := OpStats{Kind: op.Kind}
			o.Count = int64(median(rs, func(r Result) float64 { x, _ := r.Op(op.Kind); return perSec(float64(x.Count), r.Elapsed) }))
			o.Latency = medianLatency(rs, func(r Result) Latency { x, _ := r.Op(op.Kind); return x.Latency })
			m.Ops = append(m.Ops, o)
		}
		out.Results = append(out.Results, m)
	}
	out.TSFileBytes = int64(medianOf(runs, func(r *Report) float64 { return float64(r.TSFileBytes) }))
	out.TSFiles = int(medianOf(runs, func(r *Report) float64 { return float64(r.TSFiles) }))
	return &out
}

func medianLatency(rs []Result, f func(Result) Latency) Latency {
	d := func(g func(Latency) time.Duration) time.Duration {
		return time.Duration(median(rs, func(r Result) float64 { return float64(g(f(r))) }))
	}
	return Latency{
		P50:  d(func(l Latency) time.Duration { return l.P50 }),
		P90:  d(func(l Latency) time.Duration { return l.P90 }),
		P99:  d(func(l Latency) time.Duration { return l.P99 }),
		P999: d(func(l Latency) time.Duration { return l.P999 }),
		Max:  d(func(l Latency) time.Duration { return l.Max }),
	}
}

func median(rs []Result, f func(Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return mid(v)
}

func medianOf(rs []*Report, f func(*Report) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return mid(v)
}

// mid is the median (mean of the middle two for an even count).
func mid(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// targets are the fast-path goals (64 callers, 1000-byte values), in
// rows/s or MB/s.
var targets = map[string]string{
	PhaseRandomWrite:    "≥ 30 000/s",
	PhaseBulk:           "≥ 150 000/s",
	PhaseRandomReadWarm: "≥ 50 000/s",
	PhaseRandomRead:     "≥ 30 000/s",
	PhaseScan:           "≥ 650 MB/s",
}

// Print writes the report as an aligned table.
func (r *Report) Print(w io.Writer, title string) error {
	fmt.Fprintf(w, "\n%s, api %s: %d keys × %d B values, %d tablets, %d goroutines, %s keys, block cache %.0f MB; table %.0f MB in %d TSFiles\n",
		title, r.API, r.Keys, r.ValueSize, r.Tablets, r.Concurrency, r.Distribution, mb(r.CacheBytes), mb(r.TSFileBytes), r.TSFiles)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\trows/s\tMB/s\tfloor/s\t× floor\tp50\tp90\tp99\tp99.9\tmax\tload\ttarget\t")
	lat := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return round(d).String()
	}
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t\n", x.Phase, thousands(x.RowsPerSec()), x.MBPerSec(),
			thousands(x.Floor), x.FloorRatio, lat(x.P50), lat(x.P90), lat(x.P99), lat(x.P999), lat(x.Max), x.Load, targets[x.Phase])
		for _, o := range x.Ops {
			fmt.Fprintf(tw, "  %s\t%s\t\t\t\t%s\t%s\t%s\t%s\t%s\t\t\t\n", o.Kind, thousands(perSec(float64(o.Count), x.Elapsed)),
				lat(o.P50), lat(o.P90), lat(o.P99), lat(o.P999), lat(o.Max))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.printCPU(w)
}

// printCPU writes each phase's CPU µs per row of each process and the
// cores busy, as a table, and the servers not measured.
func (r *Report) printCPU(w io.Writer) error {
	fmt.Fprintf(w, "\ncpu µs/op (user + system time over the timed window, per row), cores busy of %d\n", r.Cores)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	roles := r.roles()
	fmt.Fprintf(tw, "phase\t%s\tcores busy\tmachine\t\n", strings.Join(roles, "\t"))
	for _, x := range r.Results {
		cells := []string{x.Phase}
		for _, role := range roles {
			cells = append(cells, x.perOp(role))
		}
		machine := "-"
		if x.MachineBusy >= 0 {
			machine = fmt.Sprintf("%.2f", x.MachineBusy)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t\n", strings.Join(cells, "\t"), x.CoresBusy, machine)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Unmeasured {
		fmt.Fprintf(w, "not measured: %s\n", m)
	}
	return nil
}

// JSONOutput is what `bighive bench --json` writes: every run of every
// API in order, and with more than one run the medians of each API.
type JSONOutput struct {
	Runs    []*Report `json:"runs"`
	Medians []*Report `json:"medians,omitempty"`
}

// WriteJSON writes out as one indented JSON document.
func WriteJSON(w io.Writer, out JSONOutput) error {
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode the results: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
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

// loadAvg is the 1-minute load average, -1 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// apiTargets are the Bigtable API's goals as a fraction of the native
// client's rate: rows/s for Put and Get, MB/s for scans.
var apiTargets = map[string]float64{
	PhaseRandomWrite:    0.8,
	PhaseRandomReadWarm: 0.8,
	PhaseRandomRead:     0.8,
	PhaseScan:           0.9,
}

// PrintRatios writes the two APIs' rates side by side with the ratio
// bigtable/native of each phase (MB/s for scans, rows/s otherwise) and
// the target ratio where there is one.
func PrintRatios(w io.Writer, native, bt *Report) error {
	return printComparison(w, "bigtable API vs native client", "native", "bigtable", native, bt, apiTargets)
}

// tlsTargets are TLS's goals as a fraction of the plaintext rate.
var tlsTargets = map[string]float64{
	PhaseRandomWrite:    0.85,
	PhaseRandomReadWarm: 0.85,
	PhaseRandomRead:     0.85,
}

// PrintTLSRatios writes the rates of a run in plaintext and one with TLS
// side by side, with the ratio tls/plaintext of each phase.
func PrintTLSRatios(w io.Writer, plain, tls *Report) error {
	title := "TLS vs plaintext"
	if plain != nil {
		title += " (api " + plain.API + ")"
	}
	return printComparison(w, title, "plaintext", "tls", plain, tls, tlsTargets)
}

// printComparison writes the rates of reports a and b (named an and bn)
// side by side with the ratio b/a of each phase and its target.
func printComparison(w io.Writer, title, an, bn string, native, bt *Report, targets map[string]float64) error {
	if native == nil || bt == nil {
		return nil
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tunit\t%s\t%s\tratio\ttarget\tmet\t\n", an, bn)
	for _, n := range native.Results {
		b, ok := bt.Result(n.Phase)
		if !ok {
			continue
		}
		unit, nv, bv := "rows/s", n.RowsPerSec(), b.RowsPerSec()
		if isFullScan(n.Phase) {
			unit, nv, bv = "MB/s", n.MBPerSec(), b.MBPerSec()
		}
		ratio := 0.0
		if nv > 0 {
			ratio = bv / nv
		}
		target, met := "", ""
		if t, ok := targets[n.Phase]; ok {
			target = fmt.Sprintf("≥ %.2g×", t)
			met = "yes"
			if ratio < t {
				met = "NO"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f×\t%s\t%s\t\n", n.Phase, unit, thousands(nv), thousands(bv), ratio, target, met)
	}
	return tw.Flush()
}
