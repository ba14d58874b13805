package auth

import (
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	good := "# tokens\n\n  0123456789abcdef-alice  alice \nfedcba9876543210-bob\tbob@example\n# end\n"
	tok, err := ParseTokens("tokens.txt", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tok.Len())
	}
	for _, c := range []struct{ token, want string }{
		{"0123456789abcdef-alice", "alice"},
		{"fedcba9876543210-bob", "bob@example"},
	} {
		if got, ok := tok.Lookup(c.token); !ok || got != c.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.token, got, ok, c.want)
		}
	}

	bad := []struct{ name, text, want string }{
		{"one field", "0123456789abcdef-alice\n", "tokens.txt:1: want \"TOKEN PRINCIPAL\", got 1 fields"},
		{"three fields", "# c\n0123456789abcdef-alice alice extra\n", "tokens.txt:2: want \"TOKEN PRINCIPAL\", got 3 fields"},
		{"short token", "\n\nshort alice\n", "tokens.txt:3: token of principal \"alice\" has 5 characters"},
		{"duplicate", "0123456789abcdef-alice alice\n0123456789abcdef-alice bob\n", "tokens.txt:2: the token of line 1 again"},
		{"bad principal", "0123456789abcdef-alice al\x01ice\n", "tokens.txt:1: principal"},
		{"empty", "# nothing\n", "tokens.txt has no token"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTokens("tokens.txt", strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestLoadTokensMissingFile(t *testing.T) {
	_, err := LoadTokens(t.TempDir() + "/absent")
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

// TestLookupConstantTime checks what the constant-time lookup promises
// that can be checked without a clock: only the hash is kept, and a token
// that shares all but its last byte, a prefix, or an extension of a stored
// token matches nothing.
func TestLookupConstantTime(t *testing.T) {
	const secret = "0123456789abcdef-alice"
	tok, err := ParseTokens("t", strings.NewReader(secret+" alice\n0123456789abcdef-carol carol\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range tok.hashes {
		if strings.Contains(string(h[:]), "alice") {
			t.Fatal("a stored hash contains the token's text")
		}
	}
	for _, probe := range []string{secret[:len(secret)-1] + "f", secret[:10], secret + "x", "", strings.ToUpper(secret)} {
		if p, ok := tok.Lookup(probe); ok {
			t.Errorf("Lookup(%q) matched %q", probe, p)
		}
	}
	// The last entry matches too (the loop does not stop at the first).
	if p, ok := tok.Lookup("0123456789abcdef-carol"); !ok || p != "carol" {
		t.Errorf("Lookup(carol's token) = %q, %v", p, ok)
	}
}
