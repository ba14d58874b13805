package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"bighive/client"
)

// checkAndPutCommand is `checkandput TABLE ROW FAM:COL=EXPECTED
// FAM:COL=NEW`: one conditional mutation. Whether it applied is the
// output, not the exit status (0 either way), as with HBase's
// checkAndPut, which returns true or false.
var checkAndPutCommand = Command{
	Name: "checkandput", Args: "TABLE ROW FAMILY:QUALIFIER=EXPECTED FAMILY:QUALIFIER=NEW",
	Summary: "write NEW (server timestamp) iff the latest value of the first column is exactly EXPECTED, atomically; prints applied or not applied (exit status 0 either way)",
	Example: "checkandput t lock#job1 cf:owner=free cf:owner=worker7\ncheckandput t order#9 cf:state=paid cf:shipped=yes",
	Run:     runCheckAndPut,
}

// runCheckAndPut evaluates "the latest cell of the column holds exactly
// EXPECTED" on the tserver and sets the new cell in the same atomic step.
// It is not retried after it may have reached a tserver.
func runCheckAndPut(ctx context.Context, env *Env, args []string) error {
	ctx, done, c, pos, err := env.session(ctx, args, 4, 4, nil)
	if err != nil {
		return err
	}
	defer done()
	var cols [2]struct{ fam, qual, val string }
	for i, a := range pos[2:] {
		col, val, ok := strings.Cut(a, "=")
		fam, qual, ok2 := strings.Cut(col, ":")
		if !ok || !ok2 || fam == "" {
			return Usagef("%q is not FAMILY:QUALIFIER=VALUE", a)
		}
		cols[i].fam, cols[i].qual, cols[i].val = fam, qual, val
	}
	check, put := cols[0], cols[1]
	cond := client.ChainFilters(
		client.FamilyFilter(regexp.QuoteMeta(check.fam)),
		client.ColumnFilter(regexp.QuoteMeta(check.qual)),
		client.LatestNFilter(1),
		client.ValueFilter(regexp.QuoteMeta(check.val)))
	m := client.NewMutation()
	m.Set(put.fam, put.qual, client.ServerTime, []byte(put.val))
	tbl, err := openTable(ctx, c, pos[0])
	if err != nil {
		return err
	}
	var applied bool
	if err := tbl.Apply(ctx, pos[1], client.NewCondMutation(cond, m, nil), client.GetCondMutationResult(&applied)); err != nil {
		return err
	}
	text := "applied"
	if !applied {
		text = fmt.Sprintf("not applied: the latest value of %s:%s is not %q", check.fam, check.qual, check.val)
	}
	return env.result(map[string]any{"row": pos[1], "applied": applied}, "%s", text)
}
