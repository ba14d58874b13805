// Package tlstest makes certificate authorities and certificates for
// tests and local clusters with crypto/x509: a CA, server certificates
// with the server role (SAN URI bighive://server) valid for 127.0.0.1 and
// localhost, client certificates whose CN is the principal, expired ones,
// and the PEM files the --tls-* flags read. Keys are ECDSA P-256, so
// generating one takes well under a millisecond.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"bighive/internal/tlsconf"
)

// CA is a certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Cert is an issued certificate and its key.
type Cert struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Spec describes a certificate to issue.
type Spec struct {
	// CommonName is the subject CN (a client's principal).
	CommonName string
	// Server gives the certificate the server role and the SANs of
	// Loopback.
	Server bool
	// Loopback makes the certificate valid for 127.0.0.1, ::1 and
	// localhost.
	Loopback bool
	// NotBefore and NotAfter default to an hour ago and a day ahead.
	NotBefore, NotAfter time.Time
}

// NewCA makes a self-signed CA named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA certificate: %w", err)
	}
	return &CA{Cert: c, CertPEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

var serialLimit = new(big.Int).Lsh(big.NewInt(1), 62)

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, serialLimit)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Issue signs a certificate as spec says.
func (ca *CA) Issue(spec Spec) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlstest: key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.CommonName},
		NotBefore:    spec.NotBefore,
		NotAfter:     spec.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	if spec.Server {
		role, err := url.Parse(tlsconf.RoleURI)
		if err != nil {
			return nil, fmt.Errorf("tlstest: %w", err)
		}
		tmpl.URIs = []*url.URL{role}
	}
	if spec.Server || spec.Loopback {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("tlstest: certificate %q: %w", spec.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlstest: certificate %q: %w", spec.CommonName, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tlstest: key: %w", err)
	}
	return &Cert{Cert: c, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", kder)}, nil
}

// Server issues a server certificate (the server role, valid for the
// loopback addresses and localhost) named cn.
func (ca *CA) Server(cn string) (*Cert, error) { return ca.Issue(Spec{CommonName: cn, Server: true}) }

// Client issues a client certificate whose CN is principal.
func (ca *CA) Client(principal string) (*Cert, error) { return ca.Issue(Spec{CommonName: principal}) }

// ExpiredServer issues a server certificate that expired an hour ago.
func (ca *CA) ExpiredServer(cn string) (*Cert, error) {
	now := time.Now()
	return ca.Issue(Spec{CommonName: cn, Server: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
}

// WriteCA writes the CA certificate to dir/name.crt and returns its path.
func (ca *CA) WriteCA(dir, name string) (string, error) {
	p := filepath.Join(dir, name+".crt")
	if err := writeFile(p, ca.CertPEM, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// Write writes the certificate to dir/name.crt and its key to
// dir/name.key, each replaced atomically (a rename), and returns the
// paths.
func (c *Cert) Write(dir, name string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writeFile(keyPath, c.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeFile(certPath, c.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tlstest: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("tlstest: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tlstest: %w", err)
	}
	return nil
}

// Files writes the CA, and c unless nil, into dir under name and returns
// them as the files of the --tls-* flags.
func Files(ca *CA, c *Cert, dir, name string) (tlsconf.Files, error) {
	caPath, err := ca.WriteCA(dir, "ca")
	if err != nil {
		return tlsconf.Files{}, err
	}
	f := tlsconf.Files{CA: caPath}
	if c != nil {
		if f.Cert, f.Key, err = c.Write(dir, name); err != nil {
			return tlsconf.Files{}, err
		}
	}
	return f, nil
}
