package hosts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAllBricksConnected: a mount is ready only once its client's log
// names every brick connected, whatever else it logs in between.
func TestAllBricksConnected(t *testing.T) {
	const (
		up0   = "[2026-12-06 05:10:21.606793 +0000] I [MSGID: 114046] [client-handshake.c:856:client_setvolume_cbk] 0-bighive-e407fbc6-client-0: Connected, attached to remote volume [{conn-name=bighive-e407fbc6-client-0}]\n"
		up2   = "[2026-12-06 05:10:21.606561 +0000] I [MSGID: 114046] [client-handshake.c:856:client_setvolume_cbk] 0-bighive-e407fbc6-client-2: Connected, attached to remote volume [{conn-name=bighive-e407fbc6-client-2}]\n"
		up1   = "[2026-12-06 05:10:21.607000 +0000] I [MSGID: 114046] [client-handshake.c:856:client_setvolume_cbk] 0-bighive-e407fbc6-client-1: Connected, attached to remote volume [{conn-name=bighive-e407fbc6-client-1}]\n"
		other = "[2026-12-06 05:10:21.606819 +0000] I [MSGID: 108002] [afr-common.c:6417:afr_notify] 0-bighive-e407fbc6-replicate-0: Client-quorum is met\n"
	)
	for _, tc := range []struct {
		name  string
		log   string
		n     int
		ready bool
	}{
		{"nothing logged yet", "", 1, false},
		{"one brick of one", up0, 1, true},
		{"a quorum of three", up0 + other + up2, 3, false},
		{"the same brick twice", up0 + up0 + up2, 3, false},
		{"every brick of three", up2 + other + up0 + up1, 3, true},
	} {
		f := filepath.Join(t.TempDir(), "client.log")
		if err := os.WriteFile(f, []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := allBricksConnected(f, tc.n); (err == nil) != tc.ready {
			t.Errorf("%s: allBricksConnected = %v, want ready %v", tc.name, err, tc.ready)
		}
	}
}
