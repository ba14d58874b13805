package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// StreamLayer is the network of raft over mutual TLS: it accepts only
// peers presenting a certificate signed by the CA with the server role,
// and dials presenting its own, requiring the same of the peer. It is a
// raft.StreamLayer but for Dial's address type, which the master adapts:
// this package does not import raft, so the client and the frontend,
// which use it, do not link raft. The
// handshake runs on the first read or write, in the transport's goroutine
// of that connection, so a slow or refused peer never stalls Accept.
type StreamLayer struct {
	src       *Source
	lis       net.Listener
	advertise net.Addr
}

// RaftStreamLayer listens on bind for raft traffic; advertise (nil: the
// listener's address) is what the other members dial, so it must not be
// an unspecified address.
func RaftStreamLayer(src *Source, bind string, advertise net.Addr) (*StreamLayer, error) {
	if src == nil || !src.HasCert() {
		return nil, errors.New("tlsconf: the raft transport needs a certificate with the server role")
	}
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: raft listen %s: %w", bind, err)
	}
	if advertise == nil {
		advertise = lis.Addr()
	}
	if ta, ok := advertise.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		lis.Close()
		return nil, fmt.Errorf("tlsconf: raft address %s is not advertisable", advertise)
	}
	return &StreamLayer{src: src, lis: lis, advertise: advertise}, nil
}

// Accept waits for the next raft connection.
func (l *StreamLayer) Accept() (net.Conn, error) {
	c, err := l.lis.Accept()
	if err != nil {
		return nil, err
	}
	cfg := l.src.serverConfig(l.src.current(), tls.RequireAndVerifyClientCert, nil)
	cfg.VerifyConnection = requireServerRole("the raft peer")
	return tls.Server(c, cfg), nil
}

// Close stops listening.
func (l *StreamLayer) Close() error { return l.lis.Close() }

// Addr is the advertised address.
func (l *StreamLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a raft peer and completes the handshake within timeout.
func (l *StreamLayer) Dial(address string, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: raft address %q: %w", address, err)
	}
	cfg := l.src.ClientConfig()
	cfg.ServerName = host
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	c, err := d.Dial("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: raft dial %s: %w", address, err)
	}
	return c, nil
}
