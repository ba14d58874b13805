package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one phase's measurement.
type Result struct {
	Phase string `json:"phase"`
	// Calls is the number of completed client calls (a Put, a Get, an
	// ApplyBulk, a scan pass); Rows the rows they handled; Bytes the key,
	// qualifier and value bytes they moved.
	Calls   int64         `json:"calls"`
	Rows    int64         `json:"rows"`
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Latencies of one call (zero for scans).
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	// Load is the 1-minute load average when the phase ended (-1 unknown).
	Load float64 `json:"load"`
}

// RowsPerSec is the phase's throughput in rows (= operations for Put and
// Get) per second.
func (r Result) RowsPerSec() float64 { return perSec(float64(r.Rows), r.Elapsed) }

// MBPerSec is the phase's throughput in MB (10^6 bytes) per second.
func (r Result) MBPerSec() float64 { return perSec(float64(r.Bytes)/1e6, r.Elapsed) }

func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

func (r *Result) setLatencies(lat []time.Duration) {
	if len(lat) == 0 || strings.HasPrefix(r.Phase, PhaseScan) {
		return
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	r.P50, r.P99, r.P999 = q(0.50), q(0.99), q(0.999)
}

func (r Result) String() string {
	s := fmt.Sprintf("%-9s %9.0f rows/s %7.1f MB/s", r.Phase, r.RowsPerSec(), r.MBPerSec())
	if r.P50 > 0 {
		s += fmt.Sprintf("  p50 %v p99 %v p99.9 %v", round(r.P50), round(r.P99), round(r.P999))
	}
	return s + fmt.Sprintf("  (%d rows in %v, load %.1f)", r.Rows, r.Elapsed.Round(time.Millisecond), r.Load)
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
	API         string `json:"api"`
	Seed        uint64 `json:"seed"`
	Keys        int    `json:"keys"`
	ValueSize   int    `json:"value_size"`
	Concurrency int    `json:"concurrency"`
	Tablets     int    `json:"tablets"`
	CacheBytes  int64  `json:"cache_bytes"`
	// TSFileBytes and TSFiles describe the table after the checkpoint
	// before the reads; HotRows is get-warm's hot range.
	TSFileBytes int64    `json:"tsfile_bytes"`
	TSFiles     int      `json:"tsfiles"`
	HotRows     int      `json:"hot_rows"`
	Results     []Result `json:"results"`
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
// normalised to the median rate). Load is the median load.
func Median(runs []*Report) *Report {
	if len(runs) == 0 {
		return nil
	}
	out := *runs[0]
	out.Results = nil
	for _, first := range runs[0].Results {
		var rs []Result
		for _, run := range runs {
			if x, ok := run.Result(first.Phase); ok {
				rs = append(rs, x)
			}
		}
		m := Result{Phase: first.Phase, Elapsed: time.Second}
		m.Rows = int64(median(rs, func(r Result) float64 { return r.RowsPerSec() }))
		m.Bytes = int64(median(rs, func(r Result) float64 { return r.MBPerSec() * 1e6 }))
		m.Calls = int64(median(rs, func(r Result) float64 { return perSec(float64(r.Calls), r.Elapsed) }))
		m.P50 = time.Duration(median(rs, func(r Result) float64 { return float64(r.P50) }))
		m.P99 = time.Duration(median(rs, func(r Result) float64 { return float64(r.P99) }))
		m.P999 = time.Duration(median(rs, func(r Result) float64 { return float64(r.P999) }))
		m.Load = median(rs, func(r Result) float64 { return r.Load })
		out.Results = append(out.Results, m)
	}
	out.TSFileBytes = int64(medianOf(runs, func(r *Report) float64 { return float64(r.TSFileBytes) }))
	out.TSFiles = int(medianOf(runs, func(r *Report) float64 { return float64(r.TSFiles) }))
	return &out
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

// targets are issue 9's goals, in rows/s or MB/s.
var targets = map[string]string{
	PhasePut:     "≥ 28 000/s",
	PhaseGetWarm: "≥ 34 000/s",
	PhaseGetCold: "≥ 34 000/s",
	PhaseScan:    "≥ 440 MB/s",
}

// Print writes the report as an aligned table.
func (r *Report) Print(w io.Writer, title string) error {
	fmt.Fprintf(w, "\n%s, api %s: %d keys × %d B values, %d tablets, %d goroutines, block cache %.0f MB; table %.0f MB in %d TSFiles\n",
		title, r.API, r.Keys, r.ValueSize, r.Tablets, r.Concurrency, mb(r.CacheBytes), mb(r.TSFileBytes), r.TSFiles)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\trows/s\tMB/s\tp50\tp99\tp99.9\tload\ttarget\t")
	for _, x := range r.Results {
		lat := func(d time.Duration) string {
			if d == 0 {
				return "-"
			}
			return round(d).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%.1f\t%s\t\n", x.Phase, thousands(x.RowsPerSec()), x.MBPerSec(),
			lat(x.P50), lat(x.P99), lat(x.P999), x.Load, targets[x.Phase])
	}
	return tw.Flush()
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
	PhasePut:     0.8,
	PhaseGetWarm: 0.8,
	PhaseGetCold: 0.8,
	PhaseScan:    0.9,
}

// PrintRatios writes the two APIs' rates side by side with the ratio
// bigtable/native of each phase (MB/s for scans, rows/s otherwise) and
// the target ratio where there is one.
func PrintRatios(w io.Writer, native, bt *Report) error {
	if native == nil || bt == nil {
		return nil
	}
	fmt.Fprintf(w, "\nbigtable API vs native client\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tunit\tnative\tbigtable\tratio\ttarget\tmet\t")
	for _, n := range native.Results {
		b, ok := bt.Result(n.Phase)
		if !ok {
			continue
		}
		unit, nv, bv := "rows/s", n.RowsPerSec(), b.RowsPerSec()
		if strings.HasPrefix(n.Phase, PhaseScan) {
			unit, nv, bv = "MB/s", n.MBPerSec(), b.MBPerSec()
		}
		ratio := 0.0
		if nv > 0 {
			ratio = bv / nv
		}
		target, met := "", ""
		if t, ok := apiTargets[n.Phase]; ok {
			target = fmt.Sprintf("≥ %.1f×", t)
			met = "yes"
			if ratio < t {
				met = "NO"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f×\t%s\t%s\t\n", n.Phase, unit, thousands(nv), thousands(bv), ratio, target, met)
	}
	return tw.Flush()
}
