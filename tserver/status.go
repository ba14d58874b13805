package tserver

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"time"

	"bighive/internal/obs"
	"bighive/storage/wal"
)

// The tserver's status page, served at "/" of its HTTP port: its lease,
// its tablets with their write buffer and TSFile sizes, the WAL files, the
// block cache and the checkpoint and compaction running now.

// StatusPage is what the tserver's status page shows.
type StatusPage struct {
	UUID, Address, Prefix string
	Version               string
	MasterHTTP            string // the leader's HTTP address, "" when unknown
	LeaseValid            bool
	LeaseLeft             string
	BufferBytes           int64
	Tablets               []StatusTablet
	WALFiles              []StatusWALFile
	WALBytes              int64
	Cache                 StatusCache
	Running               []string
	Err                   string
	Generated             string
}

// StatusTablet is one tablet held here.
type StatusTablet struct {
	ID, Table, Start, End string
	Epoch                 int64
	Serving               bool
	BufferBytes           int64
	Files                 int
	FileBytes             int64
	Rows                  int64 // rows over the TSFiles (a row in two files counts twice)
}

// StatusWALFile is one file of this tserver's write-ahead log.
type StatusWALFile struct {
	Name string
	Size int64
}

// StatusCache is the block cache's figures.
type StatusCache struct {
	Hits, Misses, Inserts, Evictions int64
	HitRatio                         string
	Charge, Capacity, Entries        int64
	Low, Medium, High                int64
}

var tserverPage = obs.NewPage("tserver", `{{define "title"}}Bighive tserver {{.UUID}}{{end}}
{{define "body"}}
<h1>Bighive tserver {{.UUID}}</h1>
<p>gRPC <code>{{.Address}}</code> · WAL prefix <code>{{.Prefix}}</code> · {{.Version}}</p>
<p>Lease: {{if .LeaseValid}}<span class="ok">valid</span>, {{.LeaseLeft}} left{{else}}<span class="bad">none</span>{{end}} ·
{{if .MasterHTTP}}<a id="master" href="http://{{.MasterHTTP}}/">master status</a>{{else}}master status page unknown (no heartbeat answered yet){{end}}</p>
{{with .Err}}<p class="bad">{{.}}</p>{{end}}

<h2>Tablets ({{len .Tablets}}), write buffers {{bytes .BufferBytes}}</h2>
<div class="scroll"><table id="tserver-tablets">
<tr><th>tablet</th><th>table</th><th>start</th><th>end</th><th>epoch</th><th>state</th><th>buffer</th><th>TSFiles</th><th>TSFile bytes</th><th>rows in files</th></tr>
{{range .Tablets}}<tr class="tablet" id="tablet-{{.ID}}"><td>{{.ID}}</td><td>{{.Table}}</td><td>{{.Start}}</td><td>{{.End}}</td><td class="n">{{.Epoch}}</td>
<td>{{if .Serving}}serving{{else}}loading{{end}}</td><td class="n buffer">{{.BufferBytes}} B</td><td class="n">{{.Files}}</td>
<td class="n tsfile-bytes">{{.FileBytes}} B ({{bytes .FileBytes}})</td><td class="n">{{.Rows}}</td></tr>
{{else}}<tr><td colspan="10">none</td></tr>
{{end}}</table></div>

<h2>Running</h2>
{{range .Running}}<p>{{.}}</p>{{else}}<p>no checkpoint or compaction is running</p>{{end}}

<h2>WAL files ({{len .WALFiles}}, {{bytes .WALBytes}})</h2>
<div class="scroll"><table>
<tr><th>file</th><th>size</th></tr>
{{range .WALFiles}}<tr><td><code>{{.Name}}</code></td><td class="n">{{.Size}} B ({{bytes .Size}})</td></tr>
{{end}}</table></div>

<h2>Block cache</h2>
<div class="scroll"><table>
<tr><th>hits</th><th>misses</th><th>hit ratio</th><th>inserts</th><th>evictions</th><th>pages</th><th>bytes</th><th>capacity</th><th>low</th><th>medium</th><th>high</th></tr>
{{with .Cache}}<tr><td class="n">{{.Hits}}</td><td class="n">{{.Misses}}</td><td class="n">{{.HitRatio}}</td><td class="n">{{.Inserts}}</td><td class="n">{{.Evictions}}</td>
<td class="n">{{.Entries}}</td><td class="n">{{bytes .Charge}}</td><td class="n">{{bytes .Capacity}}</td><td class="n">{{bytes .Low}}</td><td class="n">{{bytes .Medium}}</td><td class="n">{{bytes .High}}</td></tr>{{end}}
</table></div>
{{end}}`)

// StatusHandler serves the status page. Start adds it at "/" of the HTTP
// port; tests serve it with httptest.
func (s *Server) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		obs.Render(w, s.log, tserverPage, s.statusPage())
	})
}

// RenderTServerStatus writes p as a tserver's status page (for tests of
// the template with made-up data).
func RenderTServerStatus(w http.ResponseWriter, p *StatusPage) { obs.Render(w, nil, tserverPage, p) }

func (s *Server) statusPage() *StatusPage {
	now := time.Now()
	p := &StatusPage{UUID: s.uuid, Address: s.addr, Prefix: s.prefix,
		Version: obs.Version("tserver"), LeaseValid: s.leaseValid(),
		LeaseLeft:   s.lease.Remaining(now).Round(10 * time.Millisecond).String(),
		BufferBytes: s.eng.coord.MemoryUsage(),
		Generated:   "generated " + now.UTC().Format(time.RFC3339)}
	if v, ok := s.masterHTTP.Load().(string); ok {
		p.MasterHTTP = v
	}
	for _, r := range s.tablets.all() {
		end := obs.ShowKey(r.End())
		if len(r.End()) == 0 {
			end = "∞"
		}
		t := StatusTablet{ID: r.ID(), Table: r.Table(), Start: obs.ShowKey(r.Start()), End: end, Epoch: r.Epoch(),
			Serving: r.Serving(), BufferBytes: r.MemoryUsage()}
		for _, f := range r.Files() {
			t.Files++
			t.FileBytes += f.Size
			t.Rows += f.Rows
		}
		p.Tablets = append(p.Tablets, t)
	}
	sort.Slice(p.Tablets, func(i, j int) bool {
		a, b := p.Tablets[i], p.Tablets[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Start < b.Start
	})

	files, err := wal.Files(s.fs, s.opts.Root, s.prefix)
	if err != nil {
		p.Err = "WAL files: " + err.Error()
	}
	dir := wal.PrefixDir(s.opts.Root, s.prefix)
	for _, f := range files {
		name := wal.FormatFileName(f.FileTS)
		wf := StatusWALFile{Name: name, Size: -1}
		if st, err := s.fs.Stat(filepath.Join(dir, name)); err == nil {
			wf.Size = st.Size()
			p.WALBytes += wf.Size
		}
		p.WALFiles = append(p.WALFiles, wf)
	}

	bc := s.cache.Stats()
	p.Cache = StatusCache{Hits: bc.Hits, Misses: bc.Misses, Inserts: bc.Inserts, Evictions: bc.Evictions, HitRatio: "-",
		Charge: bc.Charge, Capacity: bc.Capacity, Entries: bc.Entries,
		Low: bc.ByPriority[0], Medium: bc.ByPriority[1], High: bc.ByPriority[2]}
	if n := bc.Hits + bc.Misses; n > 0 {
		p.Cache.HitRatio = fmt.Sprintf("%.1f%%", 100*float64(bc.Hits)/float64(n))
	}

	run := s.eng.coord.Running()
	if run.Checkpoint {
		p.Running = append(p.Running, fmt.Sprintf("checkpoint running for %[2]s, step %[1]d of 7 done", run.Step,
			now.Sub(run.CheckpointSince).Round(time.Millisecond)))
	}
	if run.Compaction != "" {
		kind := "merge"
		if run.Major {
			kind = "major"
		}
		p.Running = append(p.Running, fmt.Sprintf("%s compaction of tablet %s, for %s", kind, run.Compaction,
			now.Sub(run.CompactionSince).Round(time.Millisecond)))
	}
	return p
}
