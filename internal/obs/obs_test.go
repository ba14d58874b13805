package obs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

func TestDefaultHTTPAddr(t *testing.T) {
	for _, tc := range []struct {
		grpc, want string
		bad        bool
	}{
		{grpc: "127.0.0.1:7100", want: "127.0.0.1:8100"},
		{grpc: ":8086", want: ":9086"},
		{grpc: "[::1]:7200", want: "[::1]:8200"},
		{grpc: "127.0.0.1:0", want: "127.0.0.1:0"},
		{grpc: "127.0.0.1:65000", bad: true},
		{grpc: "127.0.0.1", bad: true},
		{grpc: "host:http", bad: true},
	} {
		got, err := DefaultHTTPAddr(tc.grpc)
		if tc.bad {
			if err == nil {
				t.Errorf("DefaultHTTPAddr(%q) = %q, want an error", tc.grpc, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DefaultHTTPAddr(%q) = %q, %v; want %q", tc.grpc, got, err, tc.want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("hello", "k", 7)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "hello" || rec["k"] != float64(7) {
		t.Fatalf("json log line %q: %v", b.String(), err)
	}
	b.Reset()
	if log, err = NewLogger(&b, "text", "debug"); err != nil {
		t.Fatal(err)
	}
	log.Debug("shown")
	if !strings.Contains(b.String(), "level=DEBUG msg=shown") {
		t.Fatalf("text log line %q", b.String())
	}
	for _, bad := range [][2]string{{"yaml", "info"}, {"json", "loud"}} {
		if _, err := NewLogger(&b, bad[0], bad[1]); err == nil {
			t.Errorf("NewLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

// TestHTTPServer: /metrics serves the server's own registry (runtime and
// process collectors included), /debug/pprof/ answers, and Handle adds a
// page while serving.
func TestHTTPServer(t *testing.T) {
	reg := NewRegistry()
	NewGRPCMetrics(reg).observe("/x.Y/Z", testNow(), nil)
	h, err := ListenHTTP("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + h.Addr()
	m := get(t, base+"/metrics")
	for _, want := range []string{"go_goroutines ", "process_open_fds ", `bighive_grpc_server_requests_total{code="OK",method="/x.Y/Z"} 1`,
		`bighive_grpc_server_request_duration_seconds_count{method="/x.Y/Z"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if p := get(t, base+"/debug/pprof/"); !strings.Contains(p, "heap") {
		t.Errorf("/debug/pprof/ lists no heap profile")
	}
	h.Handle("/status", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "all good") }))
	if s := get(t, base+"/status"); s != "all good" {
		t.Errorf("/status = %q", s)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Errorf("the HTTP port still answers after Close")
	}
	// Two servers in one process have registries of their own.
	reg2 := NewRegistry()
	NewGRPCMetrics(reg2)
}

func TestVersion(t *testing.T) {
	v := Version("master")
	if !strings.HasPrefix(v, "master ") || !strings.Contains(v, "go1.") {
		t.Fatalf("Version = %q", v)
	}
}

func testNow() time.Time { return time.Now() }

// TestCommandMetrics checks that a stream's commands are counted by method
// and code, each code's series made on its first command, and timed.
func TestCommandMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewGRPCMetrics(reg).Command("/svc/Stream/Cmd")
	began := time.Now()
	for _, c := range []codes.Code{codes.OK, codes.OK, codes.NotFound, codes.Code(99)} {
		m.Observe(began, c)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	var observed uint64
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] != "/svc/Stream/Cmd" {
				t.Errorf("%s: method %q", f.GetName(), labels["method"])
			}
			switch f.GetName() {
			case "bighive_grpc_server_requests_total":
				counts[labels["code"]] = metric.GetCounter().GetValue()
			case "bighive_grpc_server_request_duration_seconds":
				observed = metric.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{"OK": 2, "NotFound": 1, codes.Code(99).String(): 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts by code %v, want %v", counts, want)
	}
	if observed != 4 {
		t.Errorf("%d commands timed, want 4", observed)
	}
}
