package tlsconf

import (
	"flag"
	"log/slog"
	"os"
)

// Environment variables the CLI reads its files from when the flags are
// not given.
const (
	EnvCert = "BIGHIVE_TLS_CERT"
	EnvKey  = "BIGHIVE_TLS_KEY"
	EnvCA   = "BIGHIVE_TLS_CA"
)

// AddFlags defines --tls-cert, --tls-key and --tls-ca on fs, with f's
// values as defaults, filling f when parsed.
func AddFlags(fs *flag.FlagSet, f *Files) {
	fs.StringVar(&f.Cert, "tls-cert", f.Cert, "PEM `file` of this process's certificate (with --tls-key and --tls-ca: TLS 1.3 on every connection)")
	fs.StringVar(&f.Key, "tls-key", f.Key, "PEM `file` of the certificate's private key")
	fs.StringVar(&f.CA, "tls-ca", f.CA, "PEM `file` of the cluster CA every peer is verified against")
}

// FromEnv is the files named by BIGHIVE_TLS_CERT, BIGHIVE_TLS_KEY and
// BIGHIVE_TLS_CA (the CLI's defaults).
func FromEnv() Files {
	return Files{Cert: os.Getenv(EnvCert), Key: os.Getenv(EnvKey), CA: os.Getenv(EnvCA)}
}

// OpenServer is a server's start: with files it validates and loads them
// (a server needs all three); without, it logs the one warning line that
// the process runs plaintext and unauthenticated and returns nil, the
// plaintext mode.
func OpenServer(f Files, log *slog.Logger) (*Source, error) {
	if !f.Enabled() {
		log.Warn("no --tls-cert/--tls-key/--tls-ca: serving plaintext; connections are unencrypted and callers unauthenticated")
		return nil, nil
	}
	if err := f.Validate(true); err != nil {
		return nil, err
	}
	src, err := Load(f, log)
	if err != nil {
		return nil, err
	}
	leaf := src.Leaf()
	if !HasServerRole(leaf) {
		log.Warn("tls: this certificate lacks the server role; other servers will refuse its internal calls",
			"cert", f.Cert, "cn", leaf.Subject.CommonName, "want_san_uri", RoleURI)
	}
	log.Info("tls: TLS 1.3 on", "cert", f.Cert, "cn", leaf.Subject.CommonName, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter, "ca", f.CA)
	return src, nil
}
