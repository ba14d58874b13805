package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The table of the emulator: one family "cf" keeping one version, column
// "cf:v", as Bighive's bench creates.
const (
	btProject  = "bench"
	btInstance = "bench"
	btTable    = "bench"
	btFamily   = "cf"
	btColumn   = "v"
)

// emulatorPaths are where cbtemulator is looked for: PATH, then where
// Debian's google-cloud-cli-bigtable-emulator package puts it.
var emulatorPaths = []string{"cbtemulator", "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"}

// findEmulator returns the cbtemulator binary: --emulator, else PATH or
// the google-cloud-cli package's place, else one built from this module's
// cloud.google.com/go/bigtable (its cmd/emulator is the same program).
func findEmulator(o options, tmp string) (string, error) {
	if o.emulator != "" {
		return findBinary(o.emulator)
	}
	if p, err := findBinary(emulatorPaths...); err == nil {
		return p, nil
	}
	bin := filepath.Join(tmp, "cbtemulator")
	fmt.Fprintln(logOut, "peers: cbtemulator not found; building cloud.google.com/go/bigtable/cmd/emulator of this module")
	cmd := exec.Command("go", "build", "-o", bin, "cloud.google.com/go/bigtable/cmd/emulator")
	cmd.Dir = o.moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no cbtemulator (install google-cloud-cli-bigtable-emulator or pass --emulator), and building one failed: %v\n%s", err, out)
	}
	return bin, nil
}

// emulatorVersion tells which google-cloud-go revision the binary was
// built from, as its Go build information records it.
func emulatorVersion(bin string) string {
	out := commandOutput("go", "version", "-m", bin)
	var goVer, rev, date, btVer string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && strings.HasSuffix(f[0], ":"):
			goVer = f[1]
		case len(f) >= 3 && f[0] == "dep" && f[1] == "cloud.google.com/go/bigtable":
			btVer = f[2]
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "-ldflags="):
			if i := strings.Index(l, "main.revision="); i >= 0 {
				rev = strings.Trim(strings.Fields(l[i+len("main.revision="):])[0], `"\`)
			}
			if i := strings.Index(l, "main.revisionDate="); i >= 0 {
				date = strings.Trim(l[i+len("main.revisionDate="):], `"\ `)
				date = strings.Fields(date)[0]
			}
		}
	}
	s := "cbtemulator"
	if btVer != "" && btVer != "(devel)" {
		s += " bigtable " + btVer
	}
	if rev != "" {
		s += " google-cloud-go " + rev
	}
	if date != "" {
		s += " of " + date
	}
	if goVer != "" {
		s += ", " + goVer
	}
	if pkg := commandOutput("dpkg-query", "-W", "-f=${Version}", "google-cloud-cli-bigtable-emulator"); pkg != "" && !strings.Contains(pkg, "no packages") {
		s += ", google-cloud-cli " + pkg
	}
	return s
}

// runEmulator starts Google's Bigtable emulator on a loopback port and
// drives it through the official Go client, as Bighive's bench drives a
// frontend with --api bigtable.
func runEmulator(ctx context.Context, o options, p *procs, dir string, seed uint64) (figures, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logPath := filepath.Join(dir, "emulator.log")
	cmd := exec.Command(o.emulatorBin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	exited, _, err := p.start(cmd, logPath)
	if err != nil {
		return nil, err
	}
	defer p.stop(cmd, 5*time.Second)
	if err := waitReady(ctx, "cbtemulator", exited, logPath, 30*time.Second, dialReady(addr)); err != nil {
		return nil, err
	}
	grpcOpts := []option.ClientOption{
		option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20))),
	}
	adm, err := bigtable.NewAdminClient(ctx, btProject, btInstance, grpcOpts...)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer adm.Close()
	if err := adm.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: btTable,
		Families: map[string]bigtable.GCPolicy{btFamily: bigtable.MaxVersionsPolicy(1)}}); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	// The data client as Bighive's bench makes it (its default pool of
	// connections), without Google authentication, as with
	// BIGTABLE_EMULATOR_HOST.
	c, err := bigtable.NewClientWithConfig(ctx, btProject, btInstance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, grpcOpts...)
	if err != nil {
		return nil, fmt.Errorf("data client: %w", err)
	}
	defer c.Close()
	return runKV(ctx, o, btStore{c.Open(btTable)}, seed, logf("emulator"))
}

// btStore is kvStore over the official Cloud Bigtable Go client: the same
// calls as Bighive's bench makes through it.
type btStore struct{ tbl *bigtable.Table }

func (s btStore) put(ctx context.Context, k string, v []byte) error {
	m := bigtable.NewMutation()
	m.Set(btFamily, btColumn, bigtable.ServerTime, v)
	return s.tbl.Apply(ctx, k, m)
}

func (s btStore) bulk(ctx context.Context, keys []string, v []byte) error {
	ts := bigtable.Now()
	ms := make([]*bigtable.Mutation, len(keys))
	for i := range keys {
		ms[i] = bigtable.NewMutation()
		ms[i].Set(btFamily, btColumn, ts, v)
	}
	errs, err := s.tbl.ApplyBulk(ctx, keys, ms)
	if err != nil {
		return err
	}
	for i, e := range errs {
		if e != nil {
			return fmt.Errorf("row %s: %w", keys[i], e)
		}
	}
	return nil
}

// latest is the length of the newest cell's value (the emulator applies
// MaxVersions(1) in a background pass every 0.5–1.5 s, so a row written
// twice may briefly hold two cells, newest first).
func latest(row bigtable.Row) int {
	items := row[btFamily]
	if len(items) == 0 {
		return -1
	}
	return len(items[0].Value)
}

func (s btStore) get(ctx context.Context, k string) (int, error) {
	row, err := s.tbl.ReadRow(ctx, k)
	if err != nil {
		return 0, err
	}
	return latest(row), nil
}

func (s btStore) scan(ctx context.Context, f func(string, int) error) error {
	var ferr error
	err := s.tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
		ferr = f(row.Key(), latest(row))
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}
