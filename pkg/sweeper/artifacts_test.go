package sweeper_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
)

var errDelete = errors.New("injected byte delete failure")

// failingDeletes fails the first n deletes before they reach Bytes.
type failingDeletes struct {
	exports.Bytes
	n atomic.Int32
}

func (f *failingDeletes) Delete(ctx context.Context, name string) error {
	if f.n.Add(-1) >= 0 {
		return errDelete
	}
	return f.Bytes.Delete(ctx, name)
}

// The sweeper sweeps runs' artifacts as a second origin beside the
// trajectories, through their own byte store: a withdrawn run's artifact
// whose byte delete fails keeps its record, and the next sweep removes
// both.
func TestSweepArtifacts(t *testing.T) {
	ctx := context.Background()
	var bytes failingDeletes
	f := start(t, sweeper.Config{ArtifactBytes: &bytes})
	store, err := artifacts.Open(ctx, f.js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	bytes.Bytes = store.Bytes()
	bytes.n.Store(1)
	ref, err := store.Put(ctx, "acme", "run-1", "patch", strings.NewReader("the change"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "acme", "run-2", "patch", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sw.SweepExports(ctx); err == nil {
		t.Fatal("a sweeper without exports swept exports")
	}
	if res, err := f.sw.SweepArtifacts(ctx); err != nil || res != (exports.Result{Kept: 2}) {
		t.Fatalf("sweep before any expired = %+v, %v; want both kept", res, err)
	}
	if err := store.Withdraw(ctx, "acme", "run-1"); err != nil {
		t.Fatal(err)
	}
	res, err := f.sw.SweepArtifacts(ctx)
	if !errors.Is(err, errDelete) || res != (exports.Result{Failed: 1, Pending: 1, Kept: 1}) {
		t.Fatalf("sweep with a failing delete = %+v, %v; want one failed, one kept", res, err)
	}
	if recs, err := store.Records(ctx); err != nil || len(recs) != 2 {
		t.Fatalf("records after the failed delete = %+v, %v; want both kept", recs, err)
	}
	if res, err := f.sw.SweepArtifacts(ctx); err != nil || res != (exports.Result{Swept: 1, Kept: 1}) {
		t.Fatalf("next sweep = %+v, %v; want the withdrawn one swept", res, err)
	}
	if ok, err := store.Bytes().Exists(ctx, ref.Name); err != nil || ok {
		t.Fatalf("withdrawn bytes exist = %v, %v; want gone", ok, err)
	}
	if recs, err := store.Records(ctx); err != nil || len(recs) != 1 || recs[0].RunID != "run-2" {
		t.Fatalf("records = %+v, %v; want run-2's only", recs, err)
	}
}
