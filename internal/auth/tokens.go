package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Tokens is the parsed tokens file: the SHA-256 of each token with its
// principal. It is immutable.
type Tokens struct {
	hashes     [][sha256.Size]byte
	principals []string
}

// LoadTokens reads the tokens file at path.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: tokens file: %w", err)
	}
	defer f.Close()
	return ParseTokens(path, f)
}

// ParseTokens parses a tokens file: one "TOKEN PRINCIPAL" per line,
// separated by spaces or tabs; blank lines and lines starting with # are
// skipped. name is used in errors, which name name:line.
func ParseTokens(name string, r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("auth: %s:%d: want \"TOKEN PRINCIPAL\", got %d fields", name, n, len(f))
		}
		if len(f[0]) < MinTokenLen {
			return nil, fmt.Errorf("auth: %s:%d: token of principal %q has %d characters, want at least %d", name, n, f[1], len(f[0]), MinTokenLen)
		}
		if err := ValidPrincipal(f[1]); err != nil {
			return nil, fmt.Errorf("auth: %s:%d: %w", name, n, err)
		}
		h := sha256.Sum256([]byte(f[0]))
		if prev, ok := seen[h]; ok {
			return nil, fmt.Errorf("auth: %s:%d: the token of line %d again", name, n, prev)
		}
		seen[h] = n
		t.hashes = append(t.hashes, h)
		t.principals = append(t.principals, f[1])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: read %s: %w", name, err)
	}
	if len(t.hashes) == 0 {
		return nil, fmt.Errorf("auth: %s has no token", name)
	}
	return t, nil
}

// MinTokenLen is the shortest token the file accepts.
const MinTokenLen = 16

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.hashes) }

// Lookup returns the principal of token. It compares the token's hash with
// every stored hash in constant time and visits all of them whatever
// matches.
func (t *Tokens) Lookup(token string) (principal string, ok bool) {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.hashes {
		if subtle.ConstantTimeCompare(h[:], t.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.principals[found], true
}

// ValidPrincipal checks a principal name: 1–256 printable ASCII
// characters without spaces.
func ValidPrincipal(p string) error {
	if p == "" || len(p) > 256 {
		return fmt.Errorf("principal %q: want 1 to 256 characters", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("principal %q: character %q at %d is not printable ASCII without spaces", p, c, i)
		}
	}
	return nil
}

// TokensFlag registers --auth-tokens on fs (masters, tservers, frontend).
func TokensFlag(fs *flag.FlagSet) *string {
	return fs.String("auth-tokens", "", "tokens `file` (lines \"TOKEN PRINCIPAL\"); set: every call needs a known token or client certificate and a grant")
}

// LoadOptional loads the tokens file at path; "" is nil (no authentication).
func LoadOptional(path string) (*Tokens, error) {
	if path == "" {
		return nil, nil
	}
	return LoadTokens(path)
}
