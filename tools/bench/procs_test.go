package bench

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
)

func TestParseNetTCP(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1BBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1BBC 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 20 4 30 10 -1
`
	got := parseNetTCP([]byte(table))
	if len(got) != 2 || !got[0].ip.Equal(net.IPv4(127, 0, 0, 1)) || got[0].port != 7100 || got[0].inode != 31337 ||
		!got[1].ip.IsUnspecified() || got[1].port != 80 || got[1].inode != 4242 {
		t.Errorf("listeners %+v, want 127.0.0.1:7100 inode 31337 and 0.0.0.0:80 inode 4242 (not the established one)", got)
	}
	table6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0
`
	if got := parseNetTCP([]byte(table6)); len(got) != 1 || !got[0].ip.Equal(net.IPv6loopback) || got[0].port != 8080 {
		t.Errorf("tcp6 listeners %+v, want [::1]:8080", got)
	}
}

// TestFindProcs finds this process by the ports it listens on (two
// servers of one process are one Proc), and says why it finds nothing for
// a port nobody listens on and for an address of another machine.
func TestFindProcs(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	procs, missing := findProcs(context.Background(), []server{
		{"tserver", l.Addr().String()}, {"master", closed.Addr().String()}, {"frontend", "192.0.2.1:7100"},
		{"master2", l2.Addr().String()}})
	want := Proc{Role: "tserver+master2", Pid: os.Getpid(), Addr: l.Addr().String() + "," + l2.Addr().String()}
	if len(procs) != 1 || procs[0] != want {
		t.Errorf("found %+v, want %+v", procs, want)
	}
	if len(missing) != 2 || !strings.Contains(missing[0], "no socket") || !strings.Contains(missing[1], "not an address of this machine") {
		t.Errorf("not found: %q", missing)
	}
}

func TestParseProcs(t *testing.T) {
	got, err := ParseProcs("tserver=12, master=3,frontend=4")
	if err != nil || len(got) != 3 || got[0] != (Proc{Role: "tserver", Pid: 12}) || got[1] != (Proc{Role: "master", Pid: 3}) {
		t.Errorf("ParseProcs = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "tserver", "tserver=x", "=3", "tserver=0", "tserver=1,tserver=2", "client=5"} {
		if _, err := ParseProcs(bad); err == nil {
			t.Errorf("ParseProcs(%q) succeeded", bad)
		}
	}
}
