package bench

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestDriveCallsEachWorkerOnce: a phase whose duration ran out before its
// workers started (here: none at all) still makes one call per worker,
// so a floor probe on a loaded machine measures something.
func TestDriveCallsEachWorkerOnce(t *testing.T) {
	r := &runner{opts: Options{Seed: 1}, rep: &Report{}}
	const conc = 4
	var calls [conc]atomic.Int64
	res, err := r.drive(context.Background(), "probe", conc, 0, 0, func(_ context.Context, w *worker, _ int64) (int64, int64, error) {
		calls[w.id].Add(1)
		return 1, 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != conc || res.Rows != conc {
		t.Fatalf("%d calls, %d rows, want %d of each", res.Calls, res.Rows, conc)
	}
	for w := range calls {
		if n := calls[w].Load(); n != 1 {
			t.Errorf("worker %d made %d calls, want 1", w, n)
		}
	}
}
