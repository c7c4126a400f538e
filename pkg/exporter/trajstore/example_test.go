package trajstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
)

func ExampleName() {
	name, err := trajstore.Name("acme", "run-42", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
	fmt.Println(name, err)
	_, err = trajstore.Name("acme", "../etc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
	fmt.Println(errors.Is(err, trajstore.ErrInvalidName))
	// Output:
	// acme/run-42/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.json <nil>
	// true
}

// A trajectory put, put again (a redelivered export), read and deleted
// through the local directory store.
func ExampleNewDirStore() {
	tmp, err := os.MkdirTemp("", "trajstore-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(tmp)
	s, err := trajstore.NewDirStore(filepath.Join(tmp, "artifacts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	data := []byte(`{"v":1,"run_id":"run-42"}`)
	name, _ := trajstore.NameFor("acme", "run-42", data)
	fmt.Println(s.Put(ctx, name, data))
	fmt.Println(s.Put(ctx, name, data)) // the same bytes again: a no-op
	fmt.Println(errors.Is(s.Put(ctx, name, []byte("other")), trajstore.ErrConflict))
	got, err := s.Get(ctx, name)
	fmt.Println(string(got), err)
	fmt.Println(s.Delete(ctx, name), s.Delete(ctx, name)) // deleting twice is fine
	_, err = s.Get(ctx, name)
	fmt.Println(errors.Is(err, trajstore.ErrNotFound))
	// Output:
	// <nil>
	// <nil>
	// true
	// {"v":1,"run_id":"run-42"} <nil>
	// <nil> <nil>
	// true
}
