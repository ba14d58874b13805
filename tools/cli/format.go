package cli

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"bighive/client"
)

type flagSet = *flag.FlagSet

// object writes v as one line of JSON.
func (e *Env) object(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.Stdout, "%s\n", b)
	return err
}

// result writes a command's outcome: obj as JSON, or the message.
func (e *Env) result(obj map[string]any, format string, args ...any) error {
	if e.JSON {
		return e.object(obj)
	}
	_, err := fmt.Fprintf(e.Stdout, format+"\n", args...)
	return err
}

var cellHeader = []string{"ROW", "COLUMN", "TIMESTAMP", "VALUE"}

func cellRows(rows [][]string, r client.Row) [][]string {
	for _, c := range r.Cells {
		rows = append(rows, []string{show(r.Key), show(c.Family + ":" + c.Qualifier), timestamp(c.Timestamp), show(string(c.Value))})
	}
	return rows
}

// timestamp shows a cell timestamp as UTC time when it looks like one
// (after 2000), else as the raw microseconds.
func timestamp(us int64) string {
	if us < 946684800_000000 {
		return strconv.FormatInt(us, 10)
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// show prints bytes as they are when they are printable UTF-8 without
// tabs or newlines (which would break the table), else Go-quoted.
func show(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// jsonBytes puts b under key as a string if it is valid UTF-8, else
// base64 under key+"_base64".
func jsonBytes(m map[string]any, key string, b []byte) {
	if utf8.Valid(b) {
		m[key] = string(b)
	} else {
		m[key+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

func rowObject(r client.Row) map[string]any {
	obj := map[string]any{}
	jsonBytes(obj, "row", []byte(r.Key))
	cells := make([]map[string]any, 0, len(r.Cells))
	for _, c := range r.Cells {
		cm := map[string]any{"family": c.Family, "timestamp": c.Timestamp}
		jsonBytes(cm, "qualifier", []byte(c.Qualifier))
		jsonBytes(cm, "value", c.Value)
		cells = append(cells, cm)
	}
	obj["cells"] = cells
	return obj
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
