package master

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"bighive/internal/obs"
	"bighive/meta"
)

// The master's status page, served at "/" of its HTTP port: this master
// and its raft peers, then (on the leader, which holds the leases and the
// reported sizes) the tservers, the tables with their tablets, and the
// recent events.

// StatusPage is what the master's status page shows.
type StatusPage struct {
	ID, Address, RaftState string
	LeaderID, LeaderAddr   string
	Term, Applied          uint64
	IsLeader               bool
	Version                string
	Peers                  []StatusPeer
	TServers               []StatusTServer
	Tables                 []StatusTable
	Events                 []StatusEvent
	Err                    string // what could not be read, "" when all was
	Generated              string
}

// StatusPeer is one raft member.
type StatusPeer struct {
	ID, RaftAddr, Suffrage string
	Leader, Self           bool
}

// StatusTServer is one registered tserver as the leader sees it.
type StatusTServer struct {
	UUID, Address, HTTPAddr string
	Incarnation             int64
	Live, Dead, Heard       bool
	LeaseAge                string // since the last heartbeat
	Tablets                 int
	MemstoreBytes           int64
	WritesPerSec            int64
	ReadsPerSec             int64
}

// StatusTable is one table and its tablets in row order.
type StatusTable struct {
	Name    string
	Tablets []StatusTablet
}

// StatusTablet is one tablet; Size is -1 when no size was reported.
type StatusTablet struct {
	ID, Start, End, State string
	TServer, TServerHTTP  string
	Epoch                 int64
	Size                  int64
}

// StatusEvent is one recent event.
type StatusEvent struct {
	At         time.Time
	Kind, Text string
}

var masterPage = obs.NewPage("master", `{{define "title"}}Bighive master {{.ID}}{{end}}
{{define "body"}}
<h1>Bighive master {{.ID}}</h1>
<p>{{if .IsLeader}}<span class="ok">leader</span>{{else}}{{.RaftState}}{{end}} · gRPC <code>{{.Address}}</code> · term {{.Term}} · applied index {{.Applied}} · {{.Version}}</p>
{{if not .IsLeader}}<p class="bad">This master is not the ready leader{{if .LeaderID}}; the leader is {{.LeaderID}} (gRPC <code>{{.LeaderAddr}}</code>){{end}}. Tservers, tablet sizes and live events are the leader's: open its status page.</p>{{end}}
{{with .Err}}<p class="bad">{{.}}</p>{{end}}

<h2>Raft peers</h2>
<div class="scroll"><table>
<tr><th>id</th><th>raft address</th><th>suffrage</th><th>role</th></tr>
{{range .Peers}}<tr><td>{{.ID}}{{if .Self}} (this){{end}}</td><td><code>{{.RaftAddr}}</code></td><td>{{.Suffrage}}</td><td>{{if .Leader}}<b>leader</b>{{else}}follower{{end}}</td></tr>
{{end}}</table></div>

<h2>Tservers ({{len .TServers}})</h2>
<div class="scroll"><table>
<tr><th>uuid</th><th>address</th><th>live</th><th>lease age</th><th>tablets</th><th>write buffers</th><th>writes/s</th><th>reads/s</th></tr>
{{range .TServers}}<tr><td>{{if .HTTPAddr}}<a class="tserver" href="http://{{.HTTPAddr}}/">{{.UUID}}</a>{{else}}{{.UUID}}{{end}}</td><td><code>{{.Address}}</code></td>
<td>{{if .Live}}<span class="ok">live</span>{{else if .Dead}}<span class="bad">dead</span>{{else}}<span class="bad">no lease</span>{{end}}</td>
<td class="n">{{.LeaseAge}}</td><td class="n">{{.Tablets}}</td><td class="n">{{bytes .MemstoreBytes}}</td><td class="n">{{.WritesPerSec}}</td><td class="n">{{.ReadsPerSec}}</td></tr>
{{end}}</table></div>

<h2>Tables ({{len .Tables}})</h2>
{{range .Tables}}<h3 id="table-{{.Name}}">{{.Name}}: <span class="tablet-count">{{len .Tablets}} tablets</span></h3>
<div class="scroll"><table>
<tr><th>tablet</th><th>start</th><th>end</th><th>state</th><th>tserver</th><th>epoch</th><th>size</th></tr>
{{range .Tablets}}<tr class="tablet" id="tablet-{{.ID}}"><td>{{.ID}}</td><td>{{.Start}}</td><td>{{.End}}</td><td>{{.State}}</td>
<td>{{if .TServerHTTP}}<a href="http://{{.TServerHTTP}}/">{{.TServer}}</a>{{else}}{{.TServer}}{{end}}</td>
<td class="n">{{.Epoch}}</td><td class="n size">{{if ge .Size 0}}{{.Size}} B ({{bytes .Size}}){{else}}-{{end}}</td></tr>
{{end}}</table></div>
{{end}}

<h2>Recent events</h2>
<p><small>Recorded in memory by this master while it leads (at most 256, newest first); a restarted master starts empty.</small></p>
<div class="scroll"><table>
<tr><th>time (UTC)</th><th>kind</th><th>event</th></tr>
{{range .Events}}<tr><td>{{time .At}}</td><td>{{.Kind}}</td><td>{{.Text}}</td></tr>
{{else}}<tr><td colspan="3">none</td></tr>
{{end}}</table></div>
{{end}}`)

// StatusHandler serves the status page. Start adds it at "/" of the HTTP
// port; tests serve it with httptest.
func (m *Master) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		obs.Render(w, m.log, masterPage, m.statusPage())
	})
}

// RenderMasterStatus writes p as the master's status page (for tests of
// the template with data no cluster can hold).
func RenderMasterStatus(w http.ResponseWriter, p *StatusPage) { obs.Render(w, nil, masterPage, p) }

// statusPage gathers the page's figures: raft from this master, the rest
// from its metadata copy and (on the leader) the leader session.
func (m *Master) statusPage() *StatusPage {
	now := time.Now()
	r := m.node.Raft
	leaderAddr, leaderID := r.LeaderWithID()
	p := &StatusPage{
		ID: m.cfg.ID, Address: m.grpcAddr, RaftState: r.State().String(),
		LeaderID: string(leaderID), LeaderAddr: m.fwd.grpcAddrOf(leaderID),
		Applied: r.AppliedIndex(), Version: obs.Version("master"),
		Generated: "generated " + now.UTC().Format(time.RFC3339),
	}
	p.Term, _ = strconv.ParseUint(r.Stats()["term"], 10, 64)
	if f := r.GetConfiguration(); f.Error() != nil {
		p.Err = "raft configuration: " + f.Error().Error()
	} else {
		for _, s := range f.Configuration().Servers {
			p.Peers = append(p.Peers, StatusPeer{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
				Leader: s.Address == leaderAddr && leaderAddr != "", Self: string(s.ID) == m.cfg.ID})
		}
	}
	m.mu.Lock()
	ls := m.leader
	m.mu.Unlock()
	p.IsLeader = ls != nil

	httpOf := map[string]string{}
	err := m.view(func(rd *meta.Reader) error {
		tss, err := rd.TServers()
		if err != nil {
			return err
		}
		for _, ts := range tss {
			httpOf[ts.Uuid] = ts.HttpAddress
			p.TServers = append(p.TServers, StatusTServer{UUID: ts.Uuid, Address: ts.Address, HTTPAddr: ts.HttpAddress,
				Incarnation: ts.Incarnation, Tablets: len(rd.TabletIDsOf(ts.Uuid)), LeaseAge: "-"})
		}
		tables, err := rd.Tables()
		if err != nil {
			return err
		}
		for _, s := range tables {
			tablets, err := rd.TableTablets(s.Name, nil, 0)
			if err != nil {
				return err
			}
			st := StatusTable{Name: s.Name}
			for _, t := range tablets {
				end := obs.ShowKey(t.GetRange().GetEndRow())
				if len(t.GetRange().GetEndRow()) == 0 {
					end = "∞"
				}
				st.Tablets = append(st.Tablets, StatusTablet{ID: t.TabletId, Start: obs.ShowKey(t.GetRange().GetStartRow()), End: end,
					State: tabletStateName(t.State.String()), TServer: t.TserverUuid, TServerHTTP: httpOf[t.TserverUuid], Epoch: t.Epoch, Size: -1})
			}
			p.Tables = append(p.Tables, st)
		}
		return nil
	})
	if err != nil {
		p.Err = "metadata: " + err.Error()
	}
	if ls != nil {
		ls.mu.Lock()
		for i := range p.TServers {
			ts := &p.TServers[i]
			if l := ls.leases[ts.UUID]; l != nil {
				ts.Dead = l.dead && l.incarnation == ts.Incarnation
				ts.Live = !l.dead && !ls.expired(l, now) && l.incarnation == ts.Incarnation
				ts.Heard = l.heard
				ts.LeaseAge = now.Sub(l.last).Round(100 * time.Millisecond).String()
				if l.load != nil {
					ts.MemstoreBytes, ts.WritesPerSec, ts.ReadsPerSec = l.load.MemstoreBytes, l.load.WritesPerSecond, l.load.ReadsPerSecond
				}
			}
		}
		for _, t := range p.Tables {
			for i := range t.Tablets {
				if sz, ok := ls.sizes[t.Tablets[i].ID]; ok {
					t.Tablets[i].Size = sz
				}
			}
		}
		ls.mu.Unlock()
	}
	sort.Slice(p.TServers, func(i, j int) bool { return p.TServers[i].UUID < p.TServers[j].UUID })
	for _, e := range m.events.recent() {
		p.Events = append(p.Events, StatusEvent(e))
	}
	return p
}

// tabletStateName shortens "TABLET_STATE_ASSIGNED" to "ASSIGNED".
func tabletStateName(s string) string {
	const prefix = "TABLET_STATE_"
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
