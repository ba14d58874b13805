package tserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"bighive/client"
	"bighive/internal/obs/pagetest"
	"bighive/testkit/inproc"
	"bighive/tserver"
)

// cellBytes reads a "1234 B ..." cell of class class in row.
func cellBytes(t *testing.T, row *html.Node, class string) int64 {
	t.Helper()
	cells := pagetest.Find(row, func(n *html.Node) bool {
		return n.Data == "td" && strings.Contains(" "+pagetest.Attr(n, "class")+" ", " "+class+" ")
	})
	if len(cells) != 1 {
		t.Fatalf("row has %d %s cells", len(cells), class)
	}
	f := strings.Fields(pagetest.Text(cells[0]))
	if len(f) < 2 || f[1] != "B" {
		t.Fatalf("%s cell %q", class, pagetest.Text(cells[0]))
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("%s cell %q: %v", class, pagetest.Text(cells[0]), err)
	}
	return v
}

// TestTServerStatusPage: after writes and a checkpoint the tserver's page
// lists its tablet with the TSFile bytes the master was told, the WAL
// files, and the cache; a write after it shows in the buffer column.
func TestTServerStatusPage(t *testing.T) {
	t.Parallel()
	c := inproc.Start(t, inproc.Options{MemLimit: 64 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTable(ctx, client.TableSpec{Name: "sp", Families: []client.FamilySpec{{Name: "cf", Compression: client.CompressionNone}}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	defer cl.Close()
	tbl, err := cl.Open(ctx, "sp")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := tbl.Put(ctx, fmt.Sprintf("r%03d", i), "cf", "q", []byte(strings.Repeat("v", 100))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Put(ctx, "r999", "cf", "q", []byte("after")); err != nil {
		t.Fatal(err)
	}
	infos, err := cl.Tablets(ctx, "sp")
	if err != nil || len(infos) != 1 {
		t.Fatalf("tablets: %v %v", infos, err)
	}
	id := infos[0].ID

	srv := httptest.NewServer(c.TServer(0).StatusHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s\n%s", resp.Status, b)
	}
	doc := pagetest.Parse(t, string(b))
	rows := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "tr" && pagetest.Attr(n, "id") == "tablet-"+id })
	if len(rows) != 1 {
		t.Fatalf("%d rows for tablet %s:\n%s", len(rows), id, b)
	}
	// Stored uncompressed (CompressionNone), so the file holds at least the values.
	if files := cellBytes(t, rows[0], "tsfile-bytes"); files <= 50*100 {
		t.Errorf("tablet %s: %d B of TSFiles after 50 rows of 100 B were checkpointed", id, files)
	}
	if buf := cellBytes(t, rows[0], "buffer"); buf <= 0 {
		t.Errorf("tablet %s: buffer %d B after a write since the checkpoint", id, buf)
	}
	all := pagetest.Text(doc)
	for _, want := range []string{"Bighive tserver", "sp", "serving", "Lease: valid", "WAL files (", ".log", "Block cache",
		"no checkpoint or compaction is running"} {
		if !strings.Contains(all, want) {
			t.Errorf("page lacks %q:\n%s", want, all)
		}
	}
}

// TestTServerStatusEscaping renders made-up figures with markup in every
// string: it stays text.
func TestTServerStatusEscaping(t *testing.T) {
	const evil = `<script>alert(1)</script>`
	w := httptest.NewRecorder()
	tserver.RenderTServerStatus(w, &tserver.StatusPage{UUID: evil, MasterHTTP: `x/"><script>`,
		Tablets:  []tserver.StatusTablet{{ID: "t1", Table: evil, Start: evil, End: "∞", Serving: true, FileBytes: 10}},
		WALFiles: []tserver.StatusWALFile{{Name: evil, Size: 3}}, Running: []string{evil}})
	body := w.Body.String()
	if strings.Contains(body, "<script>") {
		t.Fatalf("markup reached the page:\n%s", body)
	}
	doc := pagetest.Parse(t, body)
	if s := pagetest.Find(doc, func(n *html.Node) bool { return n.Data == "script" }); len(s) != 0 {
		t.Fatalf("the page has %d script elements", len(s))
	}
	if n := strings.Count(pagetest.Text(doc), evil); n < 5 {
		t.Errorf("the text shows %q %d times, want at least 5 (title, heading, table, start, WAL, running)", evil, n)
	}
}
