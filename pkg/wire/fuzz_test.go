package wire

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// update rewrites the committed fuzz seeds:
//
//	go test -run TestWriteFuzzSeeds -update ./pkg/wire
var update = flag.Bool("update", false, "rewrite the fuzz seeds in testdata/fuzz/wire")

// seedDir holds the repository's wire seeds. Go reads a fuzz target's own
// corpus only from pkg/wire/testdata/fuzz/<Target>/; ours lives at the top
// of the repository, next to the other fixtures, and is added with f.Add.
var seedDir = filepath.Join("..", "..", "testdata", "fuzz", "wire")

// TestWriteFuzzSeeds checks the committed seeds, or rewrites them with
// -update: one valid encoding of each sample message.
func TestWriteFuzzSeeds(t *testing.T) {
	msgs := sampleMessages(t)
	if *update {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(seedDir, "*.bin"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range msgs {
			if err := os.WriteFile(filepath.Join(seedDir, name+".bin"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Map keys are encoded in Go's map order, so the committed bytes need
	// not equal a fresh encoding; each must still decode as its type.
	for name := range msgs {
		b, err := os.ReadFile(filepath.Join(seedDir, name+".bin"))
		if err != nil {
			t.Fatalf("seed %s: %v (run with -update)", name, err)
		}
		if err := decodeAs(name, b); err != nil {
			t.Errorf("seed %s: %v (run with -update)", name, err)
		}
	}
}

// decodeAs decodes b as the message type that the seed name begins with.
func decodeAs(name string, b []byte) error {
	var err error
	switch {
	case strings.HasPrefix(name, "runrequest"):
		_, err = Decode[RunRequest](b)
	case strings.HasPrefix(name, "work"):
		_, err = Decode[Work](b)
	case strings.HasPrefix(name, "event"):
		_, err = Decode[Event](b)
	case strings.HasPrefix(name, "runrecord"):
		_, err = Decode[RunRecord](b)
	case strings.HasPrefix(name, "lease"):
		_, err = Decode[Lease](b)
	case strings.HasPrefix(name, "cancelreply"):
		_, err = Decode[CancelReply](b)
	default:
		err = errors.New("no message type for this name")
	}
	return err
}

// addSeeds adds every committed seed (whatever its type: a seed of one type
// is a good mutation start for another) and a few hostile inputs.
func addSeeds(f *testing.F) {
	f.Helper()
	entries, err := os.ReadDir(seedDir)
	if err != nil {
		f.Fatalf("read seeds: %v", err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".bin" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(seedDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		n++
	}
	if n == 0 {
		f.Fatalf("no seeds in %s", seedDir)
	}
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01})
	f.Add([]byte{0x81, 0xa1, 'v', 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'})
	f.Add(bytes.Repeat([]byte{0x91}, MaxDepth+2))
	f.Add([]byte{0x82, 0xa1, 'v', 0x01, 0xa7, 'r', 'u', 'n', 't', 'i', 'm', 'e', 0x81, 0xa1, 'k', 0xd6, 0xff, 0, 0, 0, 1})
}

// checkDecodeErr fails unless err matches exactly one decoding sentinel.
func checkDecodeErr(t *testing.T, err error) {
	t.Helper()
	n := 0
	for _, s := range []error{ErrMalformed, ErrTooLarge, ErrVersion} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v matches %d of ErrMalformed, ErrTooLarge, ErrVersion; want 1", err, n)
	}
}

func fuzzDecode[T Versioned](f *testing.F, also ...func(t *testing.T, b []byte)) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, check := range also {
			check(t, b)
		}
		v, err := Decode[T](b)
		if err != nil {
			checkDecodeErr(t, err)
			return
		}
		if err := Scan(b); err != nil {
			t.Fatalf("Decode accepted what Scan refuses: %v", err)
		}
		out, err := Marshal(v)
		if err != nil {
			if errors.Is(err, ErrTooLarge) && len(b) > MaxMessageSize-1024 {
				return // re-encoding may add the fields the input omitted
			}
			t.Fatalf("re-Marshal of a decoded %T: %v", v, err)
		}
		if _, err := Decode[T](out); err != nil {
			t.Fatalf("Decode of the re-encoding of a decoded %T: %v", v, err)
		}
	})
}

// FuzzDecodeRunRequest is fuzzDecode for run requests, and also holds
// Decode's fast path for requests to the reflective decoder wherever it
// takes the input (requestSameAsReflective).
func FuzzDecodeRunRequest(f *testing.F) {
	fuzzDecode[RunRequest](f, func(t *testing.T, b []byte) { requestSameAsReflective(t, b) })
}

// FuzzDecodeEvent is fuzzDecode for events, and also holds Decode's fast
// path for chunk events to the reflective decoder wherever it takes the
// input (eventSameAsReflective).
func FuzzDecodeEvent(f *testing.F) {
	fuzzDecode[Event](f, func(t *testing.T, b []byte) { eventSameAsReflective(t, b) })
}

func FuzzDecodeWork(f *testing.F) { fuzzDecode[Work](f) }

func FuzzScan(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := Scan(b); err != nil {
			checkDecodeErr(t, err)
			return
		}
		// What Scan accepts is exactly one msgpack value: the msgpack
		// library can skip it and finds nothing after it.
		r := bytes.NewReader(b)
		d := msgpack.NewDecoder(r)
		if err := d.Skip(); err != nil {
			t.Fatalf("Scan accepted % x, msgpack cannot skip it: %v", b, err)
		}
		if r.Len() != 0 {
			t.Fatalf("Scan accepted % x, msgpack left %d bytes", b, r.Len())
		}
	})
}
