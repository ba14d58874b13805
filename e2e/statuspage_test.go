package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"bighive/client"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// browser starts headless Chromium for chromedp. A missing chromium fails
// the test (.ci/run installs Debian's package): the status pages are
// checked in a real browser or not at all.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (%v): install it (Debian: apt-get install chromium; .ci/run does) to run the status page test", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI containers run as root, where Chromium's sandbox refuses to start
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(412, 915), // a phone's viewport
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return bctx
}

// bytesCell parses a size cell of a status page, "1234 B (1.2 KiB)".
func bytesCell(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "B" {
		return 0, fmt.Errorf("size cell %q is not \"N B ...\"", s)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// TestStatusPagesInBrowser: a real cluster's master status page, read in
// headless Chromium, shows a pre-split table's tablet count and a
// tablet's size as the client reports it; clicking the tablet's tserver
// opens that tserver's page, which shows the tablet with TSFile and buffer
// bytes adding up to the same size, and links back to the master.
func TestStatusPagesInBrowser(t *testing.T) {
	skipShort(t, "status pages in headless Chromium")
	const tablets = 4
	c, cl := startCluster(t, cluster.Options{Masters: 1, TServers: 2, Heartbeat: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tbl := createTable(t, ctx, c, cl, "web", tablets)
	for i := 0; i < 300; i++ {
		if err := tbl.Put(ctx, rowKey(i*33), "cf", "v", value(i)); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	if _, err := cl.CheckpointAll(ctx); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	bctx := browser(t, ctx)

	// The client's view: the tablet count and the largest tablet, once its
	// post-checkpoint size reached the master.
	var target client.TabletInfo
	var masterText, sizeCell string
	wait.For(t, time.Minute, "the master page to show the largest tablet's size", func() error {
		infos, err := cl.Tablets(ctx, "web")
		if err != nil {
			t.Fatalf("tablets: %v", err)
		}
		if len(infos) != tablets {
			t.Fatalf("the client lists %d tablets of web, want %d", len(infos), tablets)
		}
		target = infos[0]
		for _, ti := range infos {
			if ti.SizeBytes > target.SizeBytes {
				target = ti
			}
		}
		// Files in the report: the post-checkpoint one (an earlier
		// report counts the write buffer, whose size the files do not
		// keep).
		if target.SizeBytes > 0 && target.Space.FileBytes > 0 {
			err := chromedp.Do(bctx,
				chromedp.Navigate("http://"+c.MasterHTTPAddr(0)+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#table-web`)))
			if err == nil {
				masterText, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
			}
			if err == nil {
				sizeCell, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`[id="tablet-`+target.ID+`"] td.size`)))
			}
			if err != nil {
				t.Fatalf("master page: %v", err)
			}
			if got, err := bytesCell(sizeCell); err == nil && got == target.SizeBytes {
				return nil
			}
		}
		return fmt.Errorf("tablet %s's size %d B (client); its cell reads %q; page:\n%s",
			target.ID, target.SizeBytes, sizeCell, masterText)
	})
	if want := fmt.Sprintf("web: %d tablets", tablets); !strings.Contains(masterText, want) {
		t.Errorf("master page lacks %q:\n%s", want, masterText)
	}
	for _, want := range []string{"Raft peers", "m1", "Tservers (2)", "table web created with 4 tablets"} {
		if !strings.Contains(masterText, want) {
			t.Errorf("master page lacks %q:\n%s", want, masterText)
		}
	}

	// Follow the link of the tablet's tserver, by a click.
	ts := -1
	for i := 0; i < c.NumTServers(); i++ {
		if c.TServerAddr(i) == target.TServer {
			ts = i
		}
	}
	if ts < 0 {
		t.Fatalf("tablet %s is on %q, which is no tserver of the cluster", target.ID, target.TServer)
	}
	link := chromedp.CSS(`[id="tablet-` + target.ID + `"] a`)
	qctx, qcancel := context.WithTimeout(bctx, 15*time.Second) // a query waits for its element to appear
	href, err := chromedp.Run(qctx, chromedp.AttributeValue(link, "href"))
	qcancel()
	if err != nil {
		t.Fatalf("master page: no link to the tserver of tablet %s (does registration carry its HTTP address?): %v\n%s",
			target.ID, err, masterText)
	}
	if err := chromedp.Do(bctx, chromedp.Click(link), chromedp.WaitVisible(chromedp.CSS(`#tserver-tablets`))); err != nil {
		t.Fatalf("follow the tserver link %q of tablet %s: %v", href.Value, target.ID, err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("tserver page: %s: %v", sel, err)
		}
		return v
	}
	url, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatalf("location: %v", err)
	}
	tsText := text(`body`)
	bufCell := text(`[id="tablet-` + target.ID + `"] td.buffer`)
	filesCell := text(`[id="tablet-` + target.ID + `"] td.tsfile-bytes`)
	masterHref, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#master`), "href"))
	if err != nil {
		t.Fatalf("tserver page: the master link: %v", err)
	}
	if want := "http://" + c.TServerHTTPAddr(ts) + "/"; url != want {
		t.Fatalf("the link of tablet %s's tserver led to %q, want tserver %d's page %q", target.ID, url, ts, want)
	}
	if !strings.Contains(tsText, "Bighive tserver") || !strings.Contains(tsText, "web") {
		t.Errorf("tserver page lacks its title or table web:\n%s", tsText)
	}
	buf, err1 := bytesCell(bufCell)
	files, err2 := bytesCell(filesCell)
	if err1 != nil || err2 != nil {
		t.Fatalf("tserver page cells: %v %v", err1, err2)
	}
	if files <= 0 || buf+files != target.SizeBytes {
		t.Errorf("tserver page: tablet %s has %d B of TSFiles and %d B of buffer, want them to add up to %d B (the client's size) with files > 0",
			target.ID, files, buf, target.SizeBytes)
	}
	if want := "http://" + c.MasterHTTPAddr(0) + "/"; masterHref.Value != want {
		t.Errorf("tserver page links to the master at %q, want %q", masterHref.Value, want)
	}
	if t.Failed() {
		t.Logf("master page:\n%s\ntserver page:\n%s", masterText, tsText)
	}
}
