package e2e_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
)

// officialClients dials Google's official Go admin and data clients to
// addr (a frontend, or a tserver serving the API) through
// BIGTABLE_EMULATOR_HOST, as the clients' users do; both close with the
// test, and the variable is restored after it.
func officialClients(t *testing.T, ctx context.Context, addr, project, instance string) (*bigtable.AdminClient, *bigtable.Client) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	adm, err := bigtable.NewAdminClient(ctx, project, instance)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	bt, err := bigtable.NewClientWithConfig(ctx, project, instance, bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bt.Close() })
	return adm, bt
}
