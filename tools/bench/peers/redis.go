package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// redisKey is row i's key as redis-benchmark's -r names it: "key:" and
// 12 digits (16 bytes, as Bighive's 16-digit keys).
func redisKey(i int) string { return fmt.Sprintf("key:%012d", i) }

// runRedis starts redis-server (Debian's redis-server package) on a
// loopback port with every write fsynced to the append-only file before
// it is acknowledged, and measures it with redis-benchmark, the tool
// Redis users know, at the same concurrency and value size:
//
//	randomWrite     redis-benchmark -t set -d VALUE -r KEYS
//	bulk            redis-benchmark MSET of BATCH random keys per request
//	                (-r KEYS), rows/s = requests/s × BATCH
//	randomReadWarm  redis-benchmark -t get -r HOT after every key is set
//	randomRead      redis-benchmark -t get -r KEYS
//
// redis-benchmark runs a request count, not a time: a short probe run
// measures the rate, and the timed run gets the count that lasts about
// --duration at that rate. Between bulk and the reads, every key of the
// keyspace is set (pipelined MSETs, untimed) so that each GET finds its
// key. Redis has no ordered scan: no scan figure.
func runRedis(ctx context.Context, o options, p *procs, dir string, seed uint64) (figures, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logPath := filepath.Join(dir, "redis.log")
	cmd := exec.Command(o.redisBin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--daemonize", "no", "--protected-mode", "yes", "--logfile", "")
	exited, _, err := p.start(cmd, logPath)
	if err != nil {
		return nil, err
	}
	defer p.stop(cmd, 10*time.Second)
	if err := waitReady(ctx, "redis-server", exited, logPath, 30*time.Second, func(ctx context.Context) error {
		reply, err := redisCommand(ctx, addr, "PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %q", reply)
		}
		return err
	}); err != nil {
		return nil, err
	}
	rb := redisBench{o: o, p: p, bin: o.redisBenchBin, addr: addr, port: port, log: filepath.Join(dir, "redis-benchmark.log")}
	lg := logf("redis")
	out := figures{}
	keys := strconv.Itoa(o.keys)

	lg("%s: redis-benchmark SET, -c %d -d %d -r %d", phaseWrite, o.concurrency, o.valueSize, o.keys)
	if out[phaseWrite], err = rb.timed(ctx, 1, "-t", "set", "-d", strconv.Itoa(o.valueSize), "-r", keys); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseWrite, err)
	}

	value := make([]byte, o.valueSize)
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range value {
		value[i] = 'a' + byte(rng.IntN(26))
	}
	mset := []string{"-r", keys, "MSET"}
	for range o.batch {
		mset = append(mset, "key:__rand_int__", string(value))
	}
	lg("%s: redis-benchmark MSET of %d random keys, -c %d -r %d", phaseBulk, o.batch, o.concurrency, o.keys)
	if out[phaseBulk], err = rb.timed(ctx, o.batch, mset...); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseBulk, err)
	}

	start := time.Now()
	if err := redisFill(ctx, addr, o, value); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	n, err := redisCommand(ctx, addr, "DBSIZE")
	if err != nil {
		return nil, fmt.Errorf("DBSIZE: %w", err)
	}
	if n != keys {
		return nil, fmt.Errorf("fill: DBSIZE is %s, want %d", n, o.keys)
	}
	lg("fill: set all %d keys in %v", o.keys, time.Since(start).Round(time.Millisecond))

	hot := hotRows(o)
	lg("%s: redis-benchmark GET, -c %d -r %d", phaseReadWarm, o.concurrency, hot)
	if out[phaseReadWarm], err = rb.timed(ctx, 1, "-t", "get", "-r", strconv.Itoa(hot)); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseReadWarm, err)
	}
	lg("%s: redis-benchmark GET, -c %d -r %d", phaseRead, o.concurrency, o.keys)
	if out[phaseRead], err = rb.timed(ctx, 1, "-t", "get", "-r", keys); err != nil {
		return nil, fmt.Errorf("%s: %w", phaseRead, err)
	}
	return out, nil
}

// redisBench runs redis-benchmark against one server.
type redisBench struct {
	o    options
	p    *procs
	bin  string
	addr string
	port int
	log  string
}

// timed runs redis-benchmark twice with args: a probe of a few requests
// per connection, then as many requests as last --duration at the
// probe's rate. rowsPer is the rows one request writes or reads.
func (rb redisBench) timed(ctx context.Context, rowsPer int, args ...string) (figure, error) {
	probe := 50 * rb.o.concurrency
	if rowsPer > 1 {
		probe = 5 * rb.o.concurrency
	}
	f, err := rb.run(ctx, probe, rowsPer, args)
	if err != nil {
		return figure{}, fmt.Errorf("probe: %w", err)
	}
	n := int(f.RowsPS / float64(rowsPer) * rb.o.duration.Seconds())
	n = min(max(n, probe), 100_000_000)
	return rb.run(ctx, n, rowsPer, args)
}

// run runs redis-benchmark for n requests and reads its CSV line.
func (rb redisBench) run(ctx context.Context, n, rowsPer int, args []string) (figure, error) {
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(rb.port), "-c", strconv.Itoa(rb.o.concurrency),
		"-n", strconv.Itoa(n), "--csv"}, args...)
	out, err := rb.p.run(ctx, exec.Command(rb.bin, full...), rb.log, 3*rb.o.duration+2*time.Minute)
	if err != nil {
		return figure{}, err
	}
	rps, p50, p99, err := parseRedisCSV(out)
	if err != nil {
		return figure{}, err
	}
	rows := rps * float64(rowsPer)
	return figure{RowsPS: rows, MBPS: rows * float64(16+rb.o.valueSize) / 1e6, P50: p50, P99: p99}, nil
}

// parseRedisCSV reads redis-benchmark --csv output: a header ("test",
// "rps", "avg_latency_ms", …, "p50_latency_ms", …, "p99_latency_ms", …)
// and one line per test; it returns the last test's figures.
func parseRedisCSV(out []byte) (rps float64, p50, p99 time.Duration, err error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	recs, err := r.ReadAll()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("redis-benchmark output: %w", err)
	}
	col := map[string]int{}
	var last []string
	for _, rec := range recs {
		if len(rec) > 0 && rec[0] == "test" {
			for i, h := range rec {
				col[h] = i
			}
			continue
		}
		if len(col) > 0 && len(rec) == len(col) {
			last = rec
		}
	}
	if last == nil {
		return 0, 0, 0, fmt.Errorf("redis-benchmark printed no CSV result: %.200q", out)
	}
	num := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok {
			return 0, fmt.Errorf("redis-benchmark output has no %s column", name)
		}
		return strconv.ParseFloat(last[i], 64)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	if rps, err = num("rps"); err != nil {
		return 0, 0, 0, err
	}
	a, err := num("p50_latency_ms")
	if err != nil {
		return 0, 0, 0, err
	}
	b, err := num("p99_latency_ms")
	if err != nil {
		return 0, 0, 0, err
	}
	return rps, ms(a), ms(b), nil
}

// redisFill sets every key of the keyspace: MSETs of o.batch keys,
// pipelined over one connection (a reader takes the replies as they come).
func redisFill(ctx context.Context, addr string, o options, value []byte) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Minute)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	batches := (o.keys + o.batch - 1) / o.batch
	read := make(chan error, 1)
	go func() {
		br := bufio.NewReader(c)
		for range batches {
			line, err := br.ReadString('\n')
			if err != nil {
				read <- err
				return
			}
			if line != "+OK\r\n" {
				read <- fmt.Errorf("MSET answered %q", strings.TrimSpace(line))
				return
			}
		}
		read <- nil
	}()
	w := bufio.NewWriterSize(c, 1<<20)
	bulkStr := func(s []byte) {
		fmt.Fprintf(w, "$%d\r\n", len(s))
		w.Write(s)
		w.WriteString("\r\n")
	}
	for b := range batches {
		lo, hi := b*o.batch, min((b+1)*o.batch, o.keys)
		fmt.Fprintf(w, "*%d\r\n", 1+2*(hi-lo))
		bulkStr([]byte("MSET"))
		for i := lo; i < hi; i++ {
			bulkStr([]byte(redisKey(i)))
			bulkStr(value)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return <-read
}

// redisCommand sends one command over a new connection and returns its
// reply: a simple string, an integer or a bulk string, as text.
func redisCommand(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// redisVersion is "Redis 7.0.15" from redis-server --version.
func redisVersion(bin string) string {
	out := commandOutput(bin, "--version")
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "Redis " + v
		}
	}
	return out
}
