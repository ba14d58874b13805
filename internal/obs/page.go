package obs

import (
	"bytes"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// pageLayout is the frame of every status page: a viewport meta tag and
// plain CSS so that a phone shows it readably, and tables inside a
// horizontally scrolling box. A page template defines "title" and
// "body".
const pageLayout = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{template "title" .}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;padding:0.5em 1em;max-width:80em;color:#222;line-height:1.4}
h1{font-size:1.3em;margin:0.4em 0}
h2{font-size:1.1em;margin:1.2em 0 0.3em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:0.8em 0 0.2em}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-size:0.9em;white-space:nowrap}
th,td{border:1px solid #ddd;padding:0.2em 0.5em;text-align:left}
th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00}
.ok{color:#070}
nav a{margin-right:1em}
code{font-size:0.95em}
</style>
</head>
<body>
<nav><a href="/">status</a><a href="/metrics">metrics</a><a href="/debug/pprof/">pprof</a></nav>
{{template "body" .}}
<p><small>{{.Generated}}</small></p>
</body>
</html>
`

// PageFuncs are the template functions every status page may use.
var PageFuncs = template.FuncMap{
	"bytes": HumanBytes,
	"ago":   Ago,
	"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") },
}

// NewPage parses a status page: body is a template defining "title" and
// "body", rendered inside the common layout. The data given to Render
// must have a Generated field (or method) for the page's footer.
func NewPage(name, body string) *template.Template {
	t := template.Must(template.New(name).Funcs(PageFuncs).Parse(pageLayout))
	return template.Must(t.Parse(body))
}

// Render executes page with data into w as text/html. It renders into a
// buffer first so that a template error becomes a 500, not half a page.
func Render(w http.ResponseWriter, log *slog.Logger, page *template.Template, data any) {
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		if log != nil {
			log.Error("obs: status page", "page", page.Name(), "err", err)
		}
		http.Error(w, "obs: status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// HumanBytes formats n bytes with binary units: "512 B", "1.5 KiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Ago formats the time since t to a tenth of a second ("1.3s ago"), "-"
// for the zero time.
func Ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(100*time.Millisecond).String() + " ago"
}

// AdvertisedHTTPAddr is the HTTP address other processes should link to:
// httpAddr, with an unspecified host (":8080", "[::]:8080") replaced by
// the host of grpcAddr. "" when httpAddr is "".
func AdvertisedHTTPAddr(httpAddr, grpcAddr string) string {
	if httpAddr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return httpAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return httpAddr
	}
	if gh, _, err := net.SplitHostPort(grpcAddr); err == nil && gh != "" {
		if ip := net.ParseIP(gh); ip == nil || !ip.IsUnspecified() {
			return net.JoinHostPort(gh, port)
		}
	}
	if _, err := strconv.Atoi(port); err != nil {
		return httpAddr
	}
	return net.JoinHostPort("localhost", port)
}

// ShowKey formats a row key for a page: as is when it is printable
// UTF-8, Go-quoted otherwise; `""` for the empty key. The template
// escapes the result for HTML.
func ShowKey(b []byte) string {
	s := string(b)
	if s == "" {
		return `""`
	}
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
