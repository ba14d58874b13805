package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// A build of one command, once per process.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{}
)

// Binary returns the path of the binary of ./cmd/<name> in the module that
// holds the working directory, building it the first time it is asked for.
func Binary(name string) (string, error) {
	buildsMu.Lock()
	b, ok := builds[name]
	if !ok {
		b = &build{}
		builds[name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(name) })
	return b.path, b.err
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("cluster: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("cluster: not inside a Go module (go env GOMOD is %q)", mod)
	}
	return filepath.Dir(mod), nil
}

func goBuild(name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bighive-e2e-bin-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	final := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".build-*")
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	tmp.Close()
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/"+name)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("cluster: go build ./cmd/%s: %w\n%s", name, err, out.Bytes())
	}
	// Rename is atomic: another test binary running the old file keeps it.
	if err := os.Rename(tmp.Name(), final); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("cluster: %w", err)
	}
	return final, nil
}
