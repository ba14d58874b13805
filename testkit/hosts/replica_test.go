package hosts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"bighive/testkit/wait"
)

// TestGlusterReplicasAndMount runs README's GlusterFS deployment on one
// machine: a volume of three replicas with the coherent options, mounted
// in a host with README's command (the glusterfs client with
// CoherentClientArgs, as a daemon: mount -t glusterfs cannot pass
// fopen-keep-cache=off, its helper script turns the value into "=off",
// which the client refuses). A file written while one brick is stopped is
// on the other two, and on the third once it is started again and
// healed.
func TestGlusterReplicasAndMount(t *testing.T) {
	skipWithoutGluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	n, err := NewNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vol *Volume
	var h *Host
	shared := filepath.Join(dir, "shared")
	t.Cleanup(func() {
		if h != nil {
			uctx, ucancel := context.WithTimeout(context.Background(), 30*time.Second)
			h.Run(uctx, "umount", "-l", shared) // the mount's client exits with it
			ucancel()
		}
		if err := n.Close(); err != nil {
			t.Errorf("network close: %v", err)
		}
		if vol != nil {
			if err := vol.Close(); err != nil {
				t.Errorf("volume close: %v", err)
			}
		}
	})
	var bricks []string
	for i := 0; i < 3; i++ {
		bricks = append(bricks, filepath.Join(dir, fmt.Sprintf("brick%d", i)))
	}
	if vol, err = NewReplicatedVolume(ctx, n.HostAddr(), bricks, CoherentVolumeOptions...); err != nil {
		t.Fatal(err)
	}
	if h, err = n.AddHost(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	// README's command, the server and volume names aside.
	args := append(append([]string{"--volfile-server=" + vol.Server, "--volfile-id=" + vol.Name}, CoherentClientArgs...), shared)
	if _, err := h.Run(ctx, "glusterfs", args...); err != nil {
		t.Fatal(err)
	}
	if err := wait.Until(ctx, func() error {
		_, err := h.Run(ctx, "mountpoint", "-q", shared)
		return err
	}); err != nil {
		t.Fatalf("%s not mounted: %v", shared, err)
	}

	write := func(name string) {
		t.Helper()
		if _, err := h.Run(ctx, "sh", "-c", "echo "+name+" > "+filepath.Join(shared, name)+" && sync"); err != nil {
			t.Fatal(err)
		}
	}
	inBrick := func(i int, name string) bool {
		b, err := os.ReadFile(filepath.Join(bricks[i], name))
		return err == nil && string(b) == name+"\n"
	}
	write("before")
	if err := vol.StopBrick(ctx, 2); err != nil {
		t.Fatal(err)
	}
	write("during")
	if !inBrick(0, "during") || !inBrick(1, "during") || inBrick(2, "during") {
		t.Errorf("written with brick 2 stopped: in the bricks %v %v %v, want on 0 and 1 only", inBrick(0, "during"), inBrick(1, "during"), inBrick(2, "during"))
	}
	started := time.Now()
	if err := vol.StartBrick(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := wait.Until(ctx, func() error {
		pending, err := vol.HealPending(ctx)
		if err == nil && (pending > 0 || !inBrick(2, "during")) {
			// Ask for an index heal rather than wait for the daemon's
			// next crawl; it fails while the daemon has not yet
			// reconnected to the brick, and is asked again.
			_, herr := gluster(ctx, "volume", "heal", vol.Name)
			err = fmt.Errorf("%d entries to heal, the file on brick 2: %v (heal: %v)", pending, inBrick(2, "during"), herr)
		}
		return err
	}); err != nil {
		t.Fatalf("brick 2 not healed: %v", err)
	}
	t.Logf("brick 2 healed %v after its restart", time.Since(started).Round(time.Millisecond))
}
