package cluster

import (
	"fmt"
	"path/filepath"

	"google.golang.org/grpc/credentials"

	"bighive/client"
	"bighive/internal/tlsconf"
	"bighive/internal/tlsconf/tlstest"
)

// ClientPrincipal is the CN of the client certificate the harness
// generates in TLS mode.
const ClientPrincipal = "e2e-client"

// pki is the TLS mode's certificates: a CA, a server certificate per
// process and a client certificate, as files under <Dir>/tls/.
type pki struct {
	dir    string
	ca     *tlstest.CA
	caPath string
	client *tlsconf.Source // the harness's own connections
}

// newPKI makes the CA and the client certificate; process certificates
// are made by files as processes are defined.
func newPKI(dir string) (*pki, error) {
	p := &pki{dir: filepath.Join(dir, "tls")}
	var err error
	if p.ca, err = tlstest.NewCA("bighive e2e CA"); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if p.caPath, err = p.ca.WriteCA(p.dir, "ca"); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cert, err := p.ca.Client(ClientPrincipal)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f, err := p.write(cert, "client")
	if err != nil {
		return nil, err
	}
	if p.client, err = tlsconf.Load(f, nil); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return p, nil
}

func (p *pki) write(c *tlstest.Cert, name string) (tlsconf.Files, error) {
	certPath, keyPath, err := c.Write(p.dir, name)
	if err != nil {
		return tlsconf.Files{}, fmt.Errorf("cluster: %w", err)
	}
	return tlsconf.Files{Cert: certPath, Key: keyPath, CA: p.caPath}, nil
}

// serverFlags issues a server certificate named name and returns the
// process's --tls-* flags; nil without TLS.
func (p *pki) serverFlags(name string) ([]string, error) {
	if p == nil {
		return nil, nil
	}
	cert, err := p.ca.Server(name)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f, err := p.write(cert, name)
	if err != nil {
		return nil, err
	}
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}, nil
}

// TLS reports whether the cluster runs in TLS mode (Options.TLS).
func (c *Cluster) TLS() bool { return c.pki != nil }

// CA is the TLS mode's CA, to issue more certificates in a test (nil
// without TLS).
func (c *Cluster) CA() *tlstest.CA {
	if c.pki == nil {
		return nil
	}
	return c.pki.ca
}

// TLSFiles are the --tls-* files of a process ("m1", "ts0", "frontend")
// or of the harness's client ("client"): its certificate, key and the CA.
// Writing new files there rotates that process's certificate. Zero
// without TLS.
func (c *Cluster) TLSFiles(name string) tlsconf.Files {
	if c.pki == nil {
		return tlsconf.Files{}
	}
	return tlsconf.Files{Cert: filepath.Join(c.pki.dir, name+".crt"), Key: filepath.Join(c.pki.dir, name+".key"), CA: c.pki.caPath}
}

// Credentials are those of the harness's own connections: TLS with the
// client certificate in TLS mode, plaintext otherwise.
func (c *Cluster) Credentials() credentials.TransportCredentials {
	if c.pki == nil {
		return tlsconf.Credentials(nil)
	}
	return tlsconf.Credentials(c.pki.client)
}

// clientOptions are the client options Client starts from.
func (c *Cluster) clientOptions() []client.Option {
	if c.pki == nil {
		return nil
	}
	return []client.Option{client.WithTransportCredentials(c.Credentials())}
}
