package obs

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Flags are the observability flags every server binary has:
// --http-listen, --log-format, --log-level and --version.
type Flags struct {
	fs         *flag.FlagSet
	name       string
	httpListen *string
	logFormat  *string
	logLevel   *string
	version    *bool
}

// AddFlags defines the flags on fs for the binary name.
func AddFlags(fs *flag.FlagSet, name string) *Flags {
	return &Flags{
		fs:         fs,
		name:       name,
		httpListen: fs.String("http-listen", "", "HTTP `host:port` of /metrics and /debug/pprof/ (default: the gRPC host, port + 1000; \"\" disables it)"),
		logFormat:  fs.String("log-format", "text", "log format: text or json"),
		logLevel:   fs.String("log-level", "info", "debug, info, warn or error"),
		version:    fs.Bool("version", false, "print the version and exit"),
	}
}

// HandleVersion prints the version to w and exits when --version was given.
func (f *Flags) HandleVersion(w io.Writer) {
	if *f.version {
		fmt.Fprintln(w, Version(f.name))
		os.Exit(0)
	}
}

// Logger is the logger the flags ask for; a bad flag exits with status 2.
func (f *Flags) Logger(w io.Writer) *slog.Logger {
	log, err := NewLogger(w, *f.logFormat, *f.logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", f.name, err)
		os.Exit(2)
	}
	return log
}

// HTTPListen is the HTTP address: --http-listen when given ("" when given
// empty: no HTTP port), else DefaultHTTPAddr(grpcAddr). A bad address
// exits with status 2.
func (f *Flags) HTTPListen(grpcAddr string) string {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "http-listen" })
	if set {
		return *f.httpListen
	}
	addr, err := DefaultHTTPAddr(grpcAddr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", f.name, err)
		os.Exit(2)
	}
	return addr
}
