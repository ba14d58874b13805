package obs

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAdvertisedHTTPAddr(t *testing.T) {
	for _, tc := range []struct{ http, grpc, want string }{
		{"", "10.0.0.1:7051", ""},
		{"127.0.0.1:8051", "127.0.0.1:7051", "127.0.0.1:8051"},
		{":8051", "10.0.0.1:7051", "10.0.0.1:8051"},
		{"[::]:8051", "host-a:7051", "host-a:8051"},
		{"0.0.0.0:8051", "0.0.0.0:7051", "localhost:8051"},
		{"host-b:8051", "host-a:7051", "host-b:8051"},
	} {
		if got := AdvertisedHTTPAddr(tc.http, tc.grpc); got != tc.want {
			t.Errorf("AdvertisedHTTPAddr(%q, %q) = %q, want %q", tc.http, tc.grpc, got, tc.want)
		}
	}
}

func TestShowKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"row-1", "row-1"},
		{"<b>", "<b>"}, // the template escapes it
		{"a\x00b", `"a\x00b"`},
		{"\xff", `"\xff"`},
	} {
		if got := ShowKey([]byte(tc.in)); got != tc.want {
			t.Errorf("ShowKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRenderLayout: a page has the viewport tag and the common CSS, and a
// template error is a 500 with no partial page.
func TestRenderLayout(t *testing.T) {
	page := NewPage("t", `{{define "title"}}T {{.Name}}{{end}}{{define "body"}}<p>{{.Name}}</p>{{end}}`)
	w := httptest.NewRecorder()
	Render(w, nil, page, struct{ Name, Generated string }{"<x>", "now"})
	body := w.Body.String()
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	for _, want := range []string{`<meta name="viewport" content="width=device-width, initial-scale=1">`, ".scroll{overflow-x:auto",
		"<title>T &lt;x&gt;</title>", "<p>&lt;x&gt;</p>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	w = httptest.NewRecorder()
	Render(w, nil, page, struct{ Generated string }{"now"}) // no Name: an execution error
	if w.Code != 500 || strings.Contains(w.Body.String(), "<html") {
		t.Errorf("a failing template gave %d:\n%s", w.Code, w.Body.String())
	}
}
