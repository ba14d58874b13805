// Package pagetest reads the HTML status pages in tests: parse a page,
// find elements, and read their attributes and visible text, as a
// browser shows them (entities decoded). Only tests import it.
package pagetest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Parse parses an HTML page, failing the test on a parse error.
func Parse(t testing.TB, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse page: %v", err)
	}
	return doc
}

// Find returns the elements under n for which match holds, in order.
func Find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && match(c) {
			out = append(out, c)
		}
	}
	return out
}

// Attr is the value of n's attribute key ("" when it has none).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// ByID matches the element whose id is id.
func ByID(id string) func(*html.Node) bool {
	return func(n *html.Node) bool { return Attr(n, "id") == id }
}

// Text is the text under n, as a browser shows it (entities decoded).
func Text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// Get fetches url and returns its status code and body, failing the test
// if the request fails.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}
