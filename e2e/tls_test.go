package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/limits"
	"bighive/internal/tlsconf"
	"bighive/internal/tlsconf/tlstest"
	pb "bighive/proto/bighivepb"
	"bighive/testkit/cluster"
	"bighive/testkit/wait"
)

// rawConn dials addr with one connection under src (nil: plaintext), so
// a refusal surfaces as the code of one call, without the client
// library's retries.
func rawConn(t *testing.T, addr string, src *tlsconf.Source) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, limits.GRPCDialOptions(tlsconf.Credentials(src))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func loadTLS(t *testing.T, f tlsconf.Files) *tlsconf.Source {
	t.Helper()
	src, err := tlsconf.Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// issued writes a certificate c of ca (nil c: none) with ca as the trusted CA.
func issued(t *testing.T, ca *tlstest.CA, c *tlstest.Cert) *tlsconf.Source {
	t.Helper()
	f, err := tlstest.Files(ca, c, t.TempDir(), "cert")
	if err != nil {
		t.Fatal(err)
	}
	return loadTLS(t, f)
}

// withCA is src's certificate trusting the CA of trust instead.
func withCA(t *testing.T, src tlsconf.Files, trust tlsconf.Files) *tlsconf.Source {
	t.Helper()
	return loadTLS(t, tlsconf.Files{Cert: src.Cert, Key: src.Key, CA: trust.CA})
}

// servedSerial is the serial of the certificate a new TLS connection to
// addr is served, or the handshake's error.
func servedSerial(addr string, src *tlsconf.Source) (string, error) {
	cfg := src.ClientConfig()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestTLS is the transport half of the security matrix against one TLS
// cluster of real processes: each refused caller gets its exact code,
// the right CA and certificate read and write, and a certificate rotated
// on disk is served without a restart.
func TestTLS(t *testing.T) {
	skipShort(t, "TLS test")
	c := cluster.New(t, cluster.Options{Masters: 1, TServers: 1, TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	master, tserver := c.MasterAddrs()[0], c.TServerAddr(0)
	clientFiles := c.TLSFiles("client")
	other, err := tlstest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("plaintext client refused", func(t *testing.T) {
		_, err := pb.NewMasterClient(rawConn(t, master, nil)).ListTables(ctx, &pb.ListTablesRequest{})
		wantCode(t, "plaintext ListTables", err, codes.Unavailable, "")
		_, err = pb.NewTServerClient(rawConn(t, tserver, nil)).Ping(ctx, &pb.PingRequest{})
		wantCode(t, "plaintext Ping", err, codes.Unavailable, "")
	})
	t.Run("client trusting another CA refused", func(t *testing.T) {
		_, err := pb.NewMasterClient(rawConn(t, master, issued(t, other, nil))).ListTables(ctx, &pb.ListTablesRequest{})
		wantCode(t, "ListTables trusting another CA", err, codes.Unavailable, "certificate")
	})
	t.Run("rogue tserver cannot register", func(t *testing.T) {
		rogue, err := other.Server("rogue")
		if err != nil {
			t.Fatal(err)
		}
		f, err := tlstest.Files(other, rogue, t.TempDir(), "rogue")
		if err != nil {
			t.Fatal(err)
		}
		// It trusts the cluster's CA, so it accepts the master; the master
		// refuses its certificate in the handshake.
		src := withCA(t, f, clientFiles)
		_, err = pb.NewMasterClient(rawConn(t, master, src)).RegisterTServer(ctx,
			&pb.RegisterTServerRequest{Address: "127.0.0.1:1"})
		wantCode(t, "RegisterTServer with another CA's certificate", err, codes.Unavailable, "")
		servers, err := tlsClient(t, c).TServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if s.Address == "127.0.0.1:1" {
				t.Fatalf("the rogue tserver is listed: %+v", s)
			}
		}
	})
	t.Run("rogue tserver process cannot register", func(t *testing.T) {
		rogue, err := other.Server("rogue")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		f, err := tlstest.Files(other, rogue, dir, "rogue")
		if err != nil {
			t.Fatal(err)
		}
		bin, err := cluster.Binary("tserver")
		if err != nil {
			t.Fatal(err)
		}
		addr, err := cluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(dir, "rogue.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		// The rogue trusts the cluster CA (so it would accept the master)
		// and presents a certificate of another CA.
		cmd := exec.Command(bin, "--listen", addr, "--masters", master, "--fs-root", filepath.Join(dir, "root"),
			"--http-listen", "", "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", clientFiles.CA)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		wait.ForCtx(t, ctx, "the rogue tserver's registration refused", func() error {
			b, _ := os.ReadFile(logPath)
			if strings.Contains(string(b), "register failed") {
				return nil
			}
			return fmt.Errorf("the rogue tserver's log has no failed registration:\n%s", b)
		})
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "registered with the master") {
			t.Fatalf("the rogue tserver registered:\n%s", b)
		}
		servers, err := tlsClient(t, c).TServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if s.Address == addr {
				t.Fatalf("the rogue tserver is listed: %+v", s)
			}
		}
	})
	t.Run("client certificate cannot call internal methods", func(t *testing.T) {
		cc := rawConn(t, master, loadTLS(t, clientFiles))
		_, err := pb.NewMasterClient(cc).Heartbeat(ctx, &pb.HeartbeatRequest{})
		wantCode(t, "Heartbeat with a client certificate", err, codes.PermissionDenied, pb.Master_Heartbeat_FullMethodName)
		_, err = pb.NewTServerClient(rawConn(t, tserver, loadTLS(t, clientFiles))).UpdateSchema(ctx, &pb.UpdateSchemaRequest{})
		wantCode(t, "UpdateSchema with a client certificate", err, codes.PermissionDenied, pb.TServer_UpdateSchema_FullMethodName)
		// Without a certificate: Unauthenticated.
		caOnly := loadTLS(t, tlsconf.Files{CA: clientFiles.CA})
		_, err = pb.NewMasterClient(rawConn(t, master, caOnly)).Heartbeat(ctx, &pb.HeartbeatRequest{})
		wantCode(t, "Heartbeat without a certificate", err, codes.Unauthenticated, pb.Master_Heartbeat_FullMethodName)
		// A client call is open to both.
		if _, err := pb.NewMasterClient(rawConn(t, master, caOnly)).ListTables(ctx, &pb.ListTablesRequest{}); err != nil {
			t.Fatalf("ListTables with the CA only: %v", err)
		}
	})
	t.Run("right CA and certificate", func(t *testing.T) {
		cl := tlsClient(t, c)
		tbl := createTable(t, ctx, c, cl, "tls", 2)
		for i := range 10 {
			if err := tbl.Put(ctx, fmt.Sprintf("row%02d", i), "cf", "q", []byte(fmt.Sprint(i))); err != nil {
				t.Fatalf("put: %v", err)
			}
		}
		if v, _ := getValue(ctx, tbl, "row03"); v != "3" {
			t.Fatalf("get row03: %q", v)
		}
		n := 0
		if err := tbl.Scan(ctx, "", "", func(r client.Row) bool { n++; return true }); err != nil {
			t.Fatalf("scan: %v", err)
		}
		if n != 10 {
			t.Fatalf("scan saw %d rows, want 10", n)
		}
		// client.WithTLS with a plain tls.Config works too.
		pool := x509.NewCertPool()
		pool.AddCert(c.CA().Cert)
		cl2, err := client.Dial(ctx, c.MasterAddrs(), client.WithTLS(&tls.Config{RootCAs: pool}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl2.Close()
		tbl2, err := cl2.Open(ctx, "tls")
		if err != nil {
			t.Fatalf("open through WithTLS: %v", err)
		}
		if v, err := getValue(ctx, tbl2, "row07"); v != "7" {
			t.Fatalf("get row07 through WithTLS: %v %q", err, v)
		}
	})
	t.Run("Bigtable API over TLS", func(t *testing.T) {
		// dialBT connects the official client; it primes its connections,
		// so a refused transport may fail here already.
		dialBT := func(ctx context.Context, src *tlsconf.Source) (*bigtable.Client, error) {
			bt, err := bigtable.NewClientWithConfig(ctx, "p", "i",
				bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}},
				option.WithEndpoint(c.BigtableAddr()), option.WithoutAuthentication(),
				option.WithGRPCDialOption(grpc.WithTransportCredentials(tlsconf.Credentials(src))))
			if err == nil {
				t.Cleanup(func() { bt.Close() })
			}
			return bt, err
		}
		bt, err := dialBT(ctx, loadTLS(t, tlsconf.Files{CA: clientFiles.CA}))
		if err != nil {
			t.Fatal(err)
		}
		row, err := bt.Open("tls").ReadRow(ctx, "row03")
		if err != nil {
			t.Fatalf("ReadRow through the frontend over TLS: %v", err)
		}
		if got := row["cf"]; len(got) != 1 || string(got[0].Value) != "3" {
			t.Fatalf("ReadRow row03 through the frontend: %+v, want cf:q = 3", row)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if bt, err = dialBT(pctx, nil); err == nil {
			_, err = bt.Open("tls").ReadRow(pctx, "row03")
		}
		if err == nil || !strings.Contains(err.Error(), "Unavailable") && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("plaintext ReadRow through a TLS frontend: %v, want Unavailable", err)
		}
	})
	t.Run("HTTP port serves TLS only", func(t *testing.T) {
		addr := c.MasterHTTPAddr(0)
		// Go's TLS server answers a plain HTTP request with a 400 of its
		// own; the metrics are not served.
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plain HTTP to the status port: %s, want a refusal", resp.Status)
			}
		}
		cfg := loadTLS(t, clientFiles).ClientConfig()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get("https://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("HTTPS to the status port: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
			t.Fatalf("HTTPS /metrics: %s, %d bytes", resp.Status, len(body))
		}
	})
	t.Run("expired, then rotated certificate without restart", func(t *testing.T) {
		src := loadTLS(t, clientFiles)
		first, err := servedSerial(tserver, src)
		if err != nil {
			t.Fatal(err)
		}
		files := c.TLSFiles("ts0")
		expired, err := c.CA().ExpiredServer("ts0")
		if err != nil {
			t.Fatal(err)
		}
		rotate(t, expired, files)
		// The tserver re-reads its files at the next handshake, at most a
		// second after the change.
		wait.ForCtx(t, ctx, "the expired certificate served", func() error {
			_, err := pb.NewTServerClient(rawConn(t, tserver, src)).Ping(ctx, &pb.PingRequest{})
			if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "expired") {
				return nil
			}
			return fmt.Errorf("Ping against an expired certificate: %v", err)
		})
		fresh, err := c.CA().Server("ts0")
		if err != nil {
			t.Fatal(err)
		}
		rotate(t, fresh, files)
		want := fresh.Cert.SerialNumber.String()
		wait.ForCtx(t, ctx, "the fresh certificate served", func() error {
			got, err := servedSerial(tserver, src)
			if err == nil && got != want {
				err = fmt.Errorf("served serial %s, want %s (first %s)", got, want, first)
			}
			return err
		})
		if _, err := pb.NewTServerClient(rawConn(t, tserver, src)).Ping(ctx, &pb.PingRequest{}); err != nil {
			t.Fatalf("Ping after the rotation: %v", err)
		}
	})
}

// rotate replaces the files f with c (key first, each by a rename).
func rotate(t *testing.T, c *tlstest.Cert, f tlsconf.Files) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(f.Cert), ".crt")
	if _, _, err := c.Write(filepath.Dir(f.Cert), name); err != nil {
		t.Fatal(err)
	}
}

// tlsClient is a client of c with its TLS client certificate.
func tlsClient(t *testing.T, c *cluster.Cluster) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func getValue(ctx context.Context, tbl *client.Table, row string) (string, error) {
	r, err := tbl.Get(ctx, row)
	if err != nil {
		return "", err
	}
	v, _ := r.Value("cf", "q")
	return string(v), nil
}

// TestPlaintextWarning: without the --tls-* flags a master, a tserver
// and the frontend each log the one warning line; with them, none does.
func TestPlaintextWarning(t *testing.T) {
	skipShort(t, "plaintext warning test")
	const warning = "serving plaintext; connections are unencrypted and callers unauthenticated"
	for _, tls := range []bool{false, true} {
		c := cluster.New(t, cluster.Options{Masters: 1, TServers: 1, TLS: tls})
		want := 1
		if tls {
			want = 0
		}
		for _, name := range []string{"m1", "ts0", "frontend"} {
			b, err := os.ReadFile(filepath.Join(c.Dir(), name+".log"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(b), warning); got != want {
				t.Errorf("TLS %v: %s logged the plaintext warning %d times, want %d", tls, name, got, want)
			}
		}
	}
}
