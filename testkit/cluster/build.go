package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BinDirEnv names the environment variable that points at a directory
// holding the server binaries (master, tserver, frontend). When it is set,
// Binaries takes them from there and nowhere else.
const BinDirEnv = "BIGHIVE_BIN_DIR"

// ErrBinaryNotFound is wrapped by the error Binaries returns when a server
// binary cannot be found or built.
var ErrBinaryNotFound = errors.New("cluster: server binaries missing")

// modulePath is the module whose ./cmd/<name> Binaries builds.
const modulePath = "bighive"

// Binary returns the path of one server binary; see Binaries.
func Binary(name string) (string, error) {
	paths, err := Binaries(name)
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// Binaries returns the paths of the named server binaries ("master",
// "tserver", "frontend"), in order. It is the one place that decides where
// the harness, `bighive demo` and `bighive bench` get them:
//
//  1. $BIGHIVE_BIN_DIR/<name>, when BIGHIVE_BIN_DIR is set (and nothing else);
//  2. inside a checkout of the bighive module (the working directory is in
//     it and `go` is installed), `go build ./cmd/<name>`, once per process;
//  3. otherwise, <name> beside the running executable, then on PATH.
//
// When any is missing, the error (wrapping ErrBinaryNotFound) names every
// missing binary, the places searched and how to provide them. Builds
// (case 2) of several names run together.
func Binaries(names ...string) ([]string, error) {
	return defaultLocator().locate(names)
}

// locator holds what Binaries looks at, so tests can vary it.
type locator struct {
	binDir     string                       // BIGHIVE_BIN_DIR; "" when unset
	executable string                       // the running binary; "" when unknown
	lookPath   func(string) (string, error) // exec.LookPath
	moduleRoot func() (string, error)       // the bighive checkout holding the working directory
	build      func(root, name string) (string, error)
}

func defaultLocator() locator {
	exe, err := os.Executable()
	if err == nil {
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
	} else {
		exe = ""
	}
	binDir := os.Getenv(BinDirEnv)
	if binDir != "" {
		// Absolute, so that a process started in another directory finds it.
		if abs, err := filepath.Abs(binDir); err == nil {
			binDir = abs
		}
	}
	return locator{
		binDir:     binDir,
		executable: exe,
		lookPath:   exec.LookPath,
		moduleRoot: moduleRoot,
		build:      cachedBuild,
	}
}

func (l locator) locate(names []string) ([]string, error) {
	paths := make([]string, len(names))
	var missing []string
	switch {
	case l.binDir != "":
		for i, name := range names {
			p := filepath.Join(l.binDir, name)
			if isExecutable(p) {
				paths[i] = p
			} else {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%w: %s (not in %s=%s). Put them there (in a bighive checkout: go build -o %s %s) or unset %s",
				ErrBinaryNotFound, strings.Join(missing, ", "), BinDirEnv, l.binDir, l.binDir, cmdPackages(missing), BinDirEnv)
		}
		return paths, nil
	}
	root, rootErr := l.moduleRoot()
	if rootErr == nil {
		// The builds run together: each is mostly its link, one core each.
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Go(func() { paths[i], errs[i] = l.build(root, name) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return paths, nil
	}
	var beside string
	if l.executable != "" {
		beside = filepath.Dir(l.executable)
	}
	for i, name := range names {
		if beside != "" {
			if p := filepath.Join(beside, name); isExecutable(p) {
				paths[i] = p
				continue
			}
		}
		if p, err := l.lookPath(name); err == nil {
			paths[i] = p
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		where := "not on PATH"
		if beside != "" {
			where = fmt.Sprintf("not beside %s, not on PATH", l.executable)
		}
		return nil, fmt.Errorf("%w: %s (%s; not built: %v). "+
			"Put them beside this binary or on PATH (in a bighive checkout: go build -o DIR %s), or set %s to their directory",
			ErrBinaryNotFound, strings.Join(missing, ", "), where, rootErr, cmdPackages(missing), BinDirEnv)
	}
	return paths, nil
}

// cmdPackages lists the packages of the named commands, for a go build line.
func cmdPackages(names []string) string {
	pkgs := make([]string, len(names))
	for i, n := range names {
		pkgs[i] = "./cmd/" + n
	}
	return strings.Join(pkgs, " ")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// moduleRoot returns the root of the bighive module checkout that holds the
// working directory, or an error saying why there is none.
func moduleRoot() (string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return "", errors.New("the go command is not installed")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("the working directory is not inside the bighive module")
	}
	name, err := moduleName(mod)
	if err != nil {
		return "", err
	}
	if name != modulePath {
		return "", fmt.Errorf("the working directory is inside module %q, not %q", name, modulePath)
	}
	return filepath.Dir(mod), nil
}

// moduleName reads the module path from the module line of a go.mod file.
func moduleName(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", gomod, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", gomod, err)
	}
	return "", fmt.Errorf("%s has no module line: %w", gomod, fs.ErrInvalid)
}

// A build of one command of one checkout, once per process.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*build{} // by root + "\x00" + name
)

// cachedBuild builds ./cmd/<name> of the checkout at root the first time
// it is asked for, and returns the same binary afterwards.
func cachedBuild(root, name string) (string, error) {
	key := root + "\x00" + name
	buildsMu.Lock()
	b, ok := builds[key]
	if !ok {
		b = &build{}
		builds[key] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(root, name) })
	return b.path, b.err
}

func goBuild(root, name string) (string, error) {
	// One directory per checkout: a test that restarts a process runs the
	// file again, and another checkout's build must not have replaced it.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bighive-e2e-bin-%d-%08x", os.Getuid(), crc32.ChecksumIEEE([]byte(root))))
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
		return "", fmt.Errorf("cluster: go build ./cmd/%s in %s: %w\n%s", name, root, err, out.Bytes())
	}
	// Rename is atomic: another test binary running the old file keeps it.
	if err := os.Rename(tmp.Name(), final); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("cluster: %w", err)
	}
	return final, nil
}
