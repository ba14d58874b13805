package client

import (
	"crypto/tls"

	"google.golang.org/grpc/credentials"

	"bighive/internal/tlsconf"
)

// WithTLS secures every connection of the client with TLS 1.3 under cfg:
// the servers are verified against cfg.RootCAs (nil: the system roots)
// and, unless cfg sets VerifyConnection itself, must present a
// certificate with Bighive's server role (the SAN URI bighive://server).
// cfg.Certificates, when set, is the client certificate, whose subject CN
// is the caller's principal. Without WithTLS (or
// WithTransportCredentials) the client speaks plaintext.
func WithTLS(cfg *tls.Config) Option {
	c := cfg.Clone()
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	if c.VerifyConnection == nil {
		c.VerifyConnection = tlsconf.VerifyServerRole
	}
	return WithTransportCredentials(credentials.NewTLS(c))
}

// WithTransportCredentials secures every connection of the client with
// creds (for credentials that re-read rotated certificates: the frontend
// and the servers use those of the --tls-* files).
func WithTransportCredentials(creds credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = creds }
}

// transportCredentials are the configured credentials, plaintext without.
func (o *options) transportCredentials() credentials.TransportCredentials {
	if o.creds == nil {
		return tlsconf.Credentials(nil)
	}
	return o.creds
}
