package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdPage is the keys one range request of a scan covers.
const etcdPage = 1000

// runEtcd starts a one-node etcd (Debian's etcd-server) on loopback ports
// under dir and drives it through the official Go client, one client
// (one gRPC connection) shared by all callers.
func runEtcd(ctx context.Context, o options, p *procs, dir string, seed uint64) (figures, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if peerPort == clientPort {
		return nil, fmt.Errorf("etcd: got port %d twice", peerPort)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	logPath := filepath.Join(dir, "etcd.log")
	cmd := exec.Command(o.etcdBin,
		"--name", "bench",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "bench="+peerURL, "--initial-cluster-state", "new",
		// Every overwrite keeps a revision (no compaction here): room for
		// the keyspace several times over.
		"--quota-backend-bytes", strconv.FormatInt(8<<30, 10),
		"--max-request-bytes", strconv.Itoa(max(2<<20, 2*o.batch*(o.valueSize+64))),
		"--max-txn-ops", strconv.Itoa(max(128, o.batch)),
		"--logger", "zap", "--log-level", "warn")
	exited, _, err := p.start(cmd, logPath)
	if err != nil {
		return nil, err
	}
	defer p.stop(cmd, 10*time.Second)

	c, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{clientURL},
		DialTimeout:        5 * time.Second,
		Logger:             zap.NewNop(),
		MaxCallRecvMsgSize: 256 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	if err := waitReady(ctx, "etcd", exited, logPath, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Get(ctx, "ready")
		return err
	}); err != nil {
		return nil, err
	}
	return runKV(ctx, o, etcdStore{c, o.keys}, seed, logf("etcd"))
}

// etcdStore is kvStore over etcd's Go client. Gets and the scan's range
// requests are linearizable (etcd's default).
type etcdStore struct {
	c    *clientv3.Client
	keys int // the keyspace: key(0) … key(keys-1)
}

func (s etcdStore) put(ctx context.Context, k string, v []byte) error {
	_, err := s.c.Put(ctx, k, string(v))
	return err
}

// bulk is one transaction of a Put per key: one raft entry, one fsync.
func (s etcdStore) bulk(ctx context.Context, keys []string, v []byte) error {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpPut(k, string(v))
	}
	_, err := s.c.Txn(ctx).Then(ops...).Commit()
	return err
}

func (s etcdStore) get(ctx context.Context, k string) (int, error) {
	r, err := s.c.Get(ctx, k)
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) == 0 {
		return -1, nil
	}
	return len(r.Kvs[0].Value), nil
}

// scan reads the keyspace in range requests of etcdPage keys each,
// bounded by key ([key(i), key(i+etcdPage))), all at the revision of the
// first. Not pages of an open range with a limit: etcd 3.4 walks the
// whole rest of an open range on every request (to count it), which makes
// such paging quadratic (a 500 000-row pass took about a minute).
func (s etcdStore) scan(ctx context.Context, f func(string, int) error) error {
	rev := int64(0)
	for lo := 0; lo < s.keys; lo += etcdPage {
		opts := []clientv3.OpOption{clientv3.WithRange(key(min(lo+etcdPage, s.keys)))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := s.c.Get(ctx, key(lo), opts...)
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		for _, kv := range r.Kvs {
			if err := f(string(kv.Key), len(kv.Value)); err != nil {
				return err
			}
		}
	}
	return nil
}
