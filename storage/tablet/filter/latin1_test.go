package filter

import (
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"errors"
	"testing"
)

// Bigtable runs every regex filter with RE2 in raw byte mode
// (RE2::Latin1): each byte of the field, and of the pattern, is one
// character, so any byte value matches and "." matches one byte (not
// "\n"), and \C matches any byte.
func TestRegexMatchesBytes(t *testing.T) {
	tests := []struct {
		pat, field string
		want       bool
	}{
		{".", "\xff", true},    // an invalid UTF-8 byte is one character
		{"..", "é", true},      // "é" is two bytes: two characters
		{".", "é", false},      // ... not one
		{"é", "é", true},       // a literal multi-byte pattern matches its bytes
		{"\xff", "\xff", true}, // a raw byte in the pattern is that byte
		{"\xff", "ÿ", false},   // not U+00FF's UTF-8 encoding
		{`\xff`, "\xff", true}, // \xHH is the byte HH
		{`\xff`, "ÿ", false},   // ...
		{`[\x80-\xff]+`, "\x80\xc3\xff", true},
		{`[^a]`, "\xfe", true},
		{"a\xe9+", "a\xe9\xe9", true}, // a repeat applies to the one byte before it
		{"\xc3\xa9+", "\xc3\xa9\xa9", true},
		{"\xc3\xa9+", "\xc3\xa9\xc3\xa9", false},
		{`.`, "\n", false}, // "." does not match a newline
		{`\C`, "\n", true}, // \C matches any byte
		{`\C\C`, "é", true},
		{`a\Cb`, "a\xffb", true},
		{`\Q\xff.\E`, `\xff.`, true},   // quoted text is literal
		{"\\Q\xff.\\E", "\xff.", true}, // also a raw byte inside \Q...\E
		{"\\Q\xff.\\E", "\xffa", false},
		{`(?i)\xe9`, "\xc9", true}, // Latin-1 case folding: é and É
		{`\\C`, `\C`, true},        // an escaped backslash before C
		{`[\\C]`, `C`, true},
		{`\pL`, "\xe9", true}, // é is a letter in Latin-1
	}
	for _, tt := range tests {
		f, err := Compile(valRE(tt.pat))
		if err != nil {
			t.Errorf("value regex %q: %v", tt.pat, err)
			continue
		}
		cells := []Cell{{Family: "f", Qualifier: []byte(tt.field), Value: []byte(tt.field)}}
		got, err := f.Apply([]byte(tt.field), cells)
		if err != nil || (len(got) == 1) != tt.want {
			t.Errorf("value regex %q on %q: matched %v (err %v), want %v", tt.pat, tt.field, len(got) == 1, err, tt.want)
		}
		for name, fl := range map[string]*Filter{"qualifier": must(t, qualRE(tt.pat)), "row key": must(t, keyRE(tt.pat))} {
			if fl == nil {
				continue
			}
			got, err := fl.Apply([]byte(tt.field), cells)
			if err != nil || (len(got) == 1) != tt.want {
				t.Errorf("%s regex %q on %q: matched %v (err %v), want %v", name, tt.pat, tt.field, len(got) == 1, err, tt.want)
			}
		}
	}
	// A backslash before a byte above 0x7f escapes nothing RE2 knows, and
	// \C has no meaning inside a character class.
	for _, pat := range []string{"\\\xe9", `[\C]`} {
		if _, err := Compile(valRE(pat)); !errors.Is(err, ErrInvalid) {
			t.Errorf("value regex %q: Compile = %v, want ErrInvalid", pat, err)
		}
	}
}

func must(t *testing.T, f *btpb.RowFilter) *Filter {
	t.Helper()
	c, err := Compile(f)
	if err != nil {
		t.Errorf("%v: %v", f, err)
		return nil
	}
	return c
}
