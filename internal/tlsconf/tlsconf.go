package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// RoleURI is the SAN URI that gives a certificate the server role.
const RoleURI = "bighive://server"

// ReloadInterval is the least time between two checks of the files.
var ReloadInterval = time.Second

// Files names the PEM files of the --tls-cert, --tls-key and --tls-ca
// flags.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is named: TLS is on.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Validate checks the combination: the CA is required once any file is
// named, cert and key come together, and a server (needCert) needs both.
func (f Files) Validate(needCert bool) error {
	if !f.Enabled() {
		return nil
	}
	switch {
	case f.CA == "":
		return errors.New("tlsconf: --tls-ca is required with --tls-cert or --tls-key")
	case (f.Cert == "") != (f.Key == ""):
		return errors.New("tlsconf: --tls-cert and --tls-key go together")
	case needCert && f.Cert == "":
		return errors.New("tlsconf: a server needs --tls-cert and --tls-key besides --tls-ca")
	}
	return nil
}

// material is one loaded generation of the files.
type material struct {
	cert *tls.Certificate // nil: no certificate (a client with only a CA)
	pool *x509.CertPool
}

type stamp struct {
	size int64
	mod  time.Time
}

// Source is the loaded files, re-read when they change. Safe for
// concurrent use.
type Source struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[material]

	mu        sync.Mutex
	stamps    [3]stamp
	lastCheck time.Time
}

// Load reads the files (f.Enabled must be true; Validate first).
func Load(f Files, log *slog.Logger) (*Source, error) {
	if !f.Enabled() {
		return nil, errors.New("tlsconf: no TLS files given")
	}
	if err := f.Validate(false); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Source{files: f, log: log}
	st, err := s.stat()
	if err != nil {
		return nil, err
	}
	m, err := f.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.stamps, s.lastCheck = st, time.Now()
	return s, nil
}

// Files are the files the source reads.
func (s *Source) Files() Files { return s.files }

// HasCert reports whether a certificate is loaded (servers always have
// one; a client may have only the CA).
func (s *Source) HasCert() bool { return s.current().cert != nil }

// Leaf is the loaded certificate, nil without one.
func (s *Source) Leaf() *x509.Certificate {
	if c := s.current().cert; c != nil {
		return c.Leaf
	}
	return nil
}

func (s *Source) stat() ([3]stamp, error) {
	var st [3]stamp
	for i, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return st, fmt.Errorf("tlsconf: %w", err)
		}
		st[i] = stamp{fi.Size(), fi.ModTime()}
	}
	return st, nil
}

// current returns the material, first re-reading the files if they
// changed since the last check (at most once per ReloadInterval).
func (s *Source) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.lastCheck) < ReloadInterval {
		return s.cur.Load()
	}
	s.lastCheck = time.Now()
	st, err := s.stat()
	if err != nil {
		s.log.Warn("tls: cannot check the certificate files; keeping the loaded ones", "err", err)
		return s.cur.Load()
	}
	if st == s.stamps {
		return s.cur.Load()
	}
	m, err := s.files.load()
	if err != nil {
		// The stamps stay old, so the next check tries again (a rotation
		// may be half-way: the new certificate written, the key not yet).
		s.log.Warn("tls: changed certificate files do not load; keeping the loaded ones", "err", err)
		return s.cur.Load()
	}
	s.cur.Store(m)
	s.stamps = st
	attrs := []any{"ca", s.files.CA}
	if m.cert != nil {
		attrs = append(attrs, "cert", s.files.Cert, "serial", m.cert.Leaf.SerialNumber.String(), "not_after", m.cert.Leaf.NotAfter)
	}
	s.log.Info("tls: reloaded certificate files", attrs...)
	return m
}

func (f Files) load() (*material, error) {
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("tlsconf: CA file %s holds no PEM certificate", f.CA)
	}
	m := &material{pool: pool}
	if f.Cert == "" {
		return m, nil
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	m.cert = &pair
	return m, nil
}

// HasServerRole reports whether c carries the SAN URI RoleURI.
func HasServerRole(c *x509.Certificate) bool {
	for _, u := range c.URIs {
		if sameURI(u, RoleURI) {
			return true
		}
	}
	return false
}

func sameURI(u *url.URL, want string) bool { return u != nil && u.String() == want }

// requireServerRole is a VerifyConnection check: the peer's verified
// leaf certificate has the server role.
func requireServerRole(what string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return fmt.Errorf("tlsconf: %s presented no verified certificate; a server certificate (SAN URI %s) is required", what, RoleURI)
		}
		leaf := cs.VerifiedChains[0][0]
		if !HasServerRole(leaf) {
			return fmt.Errorf("tlsconf: %s certificate %q lacks the server role (SAN URI %s)", what, leaf.Subject.CommonName, RoleURI)
		}
		return nil
	}
}

// VerifyServerRole is a tls.Config.VerifyConnection check of a dialing
// side: the server's verified certificate has the server role.
var VerifyServerRole = requireServerRole("the server")

// ServerConfig is the configuration of a listener, re-reading the files
// at each handshake: TLS 1.3, the loaded certificate, and client
// certificates verified against the CA when given. nextProtos are the
// ALPN protocols offered ("h2" for gRPC, "http/1.1" for HTTP).
func (s *Source) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.serverConfig(s.current(), tls.VerifyClientCertIfGiven, nextProtos), nil
		},
	}
}

// HTTPConfig is the TLS configuration of an HTTP port (ServerConfig
// offering HTTP/1.1), nil in plaintext (nil src).
func HTTPConfig(src *Source) *tls.Config {
	if src == nil {
		return nil
	}
	return src.ServerConfig("http/1.1")
}

func (s *Source) serverConfig(m *material, auth tls.ClientAuthType, nextProtos []string) *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientCAs:  m.pool,
		ClientAuth: auth,
		NextProtos: nextProtos,
	}
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	return c
}

// ClientConfig is the configuration of one outgoing connection with the
// files as they are now: TLS 1.3, the peer verified against the CA and
// required to hold the server role, and this side's certificate (when it
// has one) presented.
func (s *Source) ClientConfig() *tls.Config {
	return s.clientConfig(s.current())
}

func (s *Source) clientConfig(m *material) *tls.Config {
	c := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		RootCAs:          m.pool,
		VerifyConnection: VerifyServerRole,
	}
	if m.cert != nil {
		// Always presented, also when the server names other acceptable
		// CAs: a certificate of the wrong CA then fails the handshake
		// loudly instead of the call going out without a certificate.
		cert := m.cert
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return c
}
