package master_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"bighive/client"
	"bighive/internal/obs/pagetest"
	"bighive/master"
	"bighive/testkit/inproc"
)

// TestMasterStatusPage: the handler shows a table with its tablets in row
// order (a split key with HTML in it escaped, shown as text), the
// tserver with its lease, the raft peer and the recent events.
func TestMasterStatusPage(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = `<script>alert("x")</script>`
	if err := c.CreateTable(ctx, client.TableSpec{Name: "pg", Families: []client.FamilySpec{{Name: "cf"}}, SplitKeys: []string{key, "m"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Master().StatusHandler())
	defer srv.Close()

	code, body := pagetest.Get(t, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, body)
	}
	if strings.Contains(body, "<script>") {
		t.Fatalf("the split key reached the page unescaped:\n%s", body)
	}
	if !strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("the split key is not on the page escaped:\n%s", body)
	}
	doc := pagetest.Parse(t, body)
	if vp := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "meta" && pagetest.Attr(n, "name") == "viewport" }); len(vp) != 1 {
		t.Errorf("%d viewport meta tags, want 1", len(vp))
	}
	h := pagetest.Find(doc, pagetest.ByID("table-pg"))
	if len(h) != 1 || !strings.Contains(pagetest.Text(h[0]), "pg: 3 tablets") {
		t.Fatalf("no heading \"pg: 3 tablets\" (found %d)", len(h))
	}
	rows := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && pagetest.Attr(n, "class") == "tablet" })
	if len(rows) != 3 {
		t.Fatalf("%d tablet rows, want 3", len(rows))
	}
	wantRanges := [][2]string{{`""`, key}, {key, "m"}, {"m", "∞"}}
	for i, r := range rows {
		cells := pagetest.Find(r, func(n *html.Node) bool { return n.Data == "td" })
		if len(cells) != 7 {
			t.Fatalf("tablet row %d has %d cells, want 7", i, len(cells))
		}
		if got := [2]string{pagetest.Text(cells[1]), pagetest.Text(cells[2])}; got != wantRanges[i] {
			t.Errorf("tablet row %d: range %q, want %q", i, got, wantRanges[i])
		}
		if got := pagetest.Text(cells[3]); got != "SERVING" {
			t.Errorf("tablet row %d: state %q, want SERVING", i, got)
		}
		if pagetest.Text(cells[4]) == "" {
			t.Errorf("tablet row %d names no tserver", i)
		}
	}
	all := pagetest.Text(doc)
	for _, want := range []string{"Bighive master m1", "Tservers (1)", "live", "m1 (this)", "leader",
		"table pg created with 3 tablets", "became the ready leader", "registered at " + c.TServerAddr(0)} {
		if !strings.Contains(all, want) {
			t.Errorf("page lacks %q:\n%s", want, all)
		}
	}
	if code, _ := pagetest.Get(t, srv.URL+"/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
}

// TestMasterStatusEscaping renders a table name no cluster accepts (the
// names are [A-Za-z0-9_.-]): whatever reaches the page is text, never
// markup.
func TestMasterStatusEscaping(t *testing.T) {
	const name = `<img src=x onerror=alert(1)>`
	w := httptest.NewRecorder()
	master.RenderMasterStatus(w, &master.StatusPage{ID: "m<1>",
		Tables:   []master.StatusTable{{Name: name, Tablets: []master.StatusTablet{{ID: "t1", Start: `""`, End: "∞", State: "SERVING", Size: 7}}}},
		TServers: []master.StatusTServer{{UUID: "u", HTTPAddr: `h" onclick="x`, Live: true}},
		Events:   []master.StatusEvent{{At: time.Now(), Kind: "table", Text: "table " + name + " created"}}})
	body := w.Body.String()
	if strings.Contains(body, "<img") || strings.Contains(body, `" onclick`) {
		t.Fatalf("markup reached the page:\n%s", body)
	}
	doc := pagetest.Parse(t, body)
	if imgs := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "img" }); len(imgs) != 0 {
		t.Fatalf("the page has %d img elements", len(imgs))
	}
	h := pagetest.Find(doc, pagetest.ByID("table-"+name))
	if len(h) != 1 || !strings.HasPrefix(pagetest.Text(h[0]), name+": 1 tablets") {
		t.Errorf("the table heading does not read %q as text", name)
	}
	if !strings.Contains(pagetest.Text(doc), "table "+name+" created") || !strings.Contains(pagetest.Text(doc), "Bighive master m<1>") {
		t.Errorf("the event or title lost its text:\n%s", pagetest.Text(doc))
	}
	links := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "a" && strings.Contains(pagetest.Attr(n, "href"), "onclick") })
	for _, a := range links {
		if pagetest.Attr(a, "onclick") != "" {
			t.Errorf("a link got an onclick attribute")
		}
	}
}
