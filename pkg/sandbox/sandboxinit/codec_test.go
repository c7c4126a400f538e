package sandboxinit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func sample() Config {
	return Config{V: Version, Root: "/run/x/root", Socket: "/run/agentmesh/egress.sock", Dir: "/ws/a", Path: "/usr/bin/claude",
		Args: []string{"claude", "-p", "hi\x00there"}, Env: []string{"PATH=/usr/bin", "EMPTY="}, Procs: 1024, Memory: 4 << 30,
		WallTime: 2 * time.Hour,
		Mounts: []Mount{{Kind: "tmpfs", Dst: "/etc", Data: "mode=0755", RO: true}, {Kind: "robind", Src: "/usr", Dst: "/usr"},
			{Kind: "write", Dst: "/etc/hosts", Data: "127.0.1.1\tapi.anthropic.com\n"}},
		Listen:  []Listener{{Addr: "127.0.1.1:443", Target: "api.anthropic.com:443"}},
		Seccomp: []BPF{{Code: 0x20, K: 4}, {Code: 0x15, Jt: 1, K: 0xc000003e}, {Code: 0x6, K: 0x7fff0000}}}
}

// TestCodec: a config survives the frame, read from a stream that holds
// the go-ahead byte after it; a frame cut short, or with bytes after its
// fields, is an ErrConfig.
func TestCodec(t *testing.T) {
	want := sample()
	b := Encode(want)
	got, err := ReadConfig(bytes.NewReader(append(bytes.Clone(b), Go)))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadConfig(Encode(c)) = %+v, %v; want %+v", got, err, want)
	}
	if got, err := Decode(Encode(Config{})); err != nil || !reflect.DeepEqual(got, Config{}) {
		t.Errorf("the zero config = %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"empty":     nil,
		"truncated": b[:len(b)-3],
		"trailing":  append(bytes.Clone(b), 0),
		"huge list": append(bytes.Clone(b[:4+8+4*4+len(want.Root)+len(want.Socket)+len(want.Dir)+len(want.Path)]), 0xff, 0xff, 0xff, 0xff),
	} {
		if _, err := Decode(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Decode = %v, want ErrConfig", name, err)
		}
	}
}

// FuzzDecode: whatever the bytes, Decode never panics, and what it
// decodes encodes back to the same bytes. Seeds are
// testdata/fuzz/sandboxinit.
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 60s ./pkg/sandbox/sandboxinit
func FuzzDecode(f *testing.F) {
	seeds, err := filepath.Glob("../../../testdata/fuzz/sandboxinit/*.bin")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := Decode(b); err != nil {
			f.Fatalf("seed %s: %v", name, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Decode(b)
		if err != nil {
			return
		}
		if again := Encode(cfg); !bytes.Equal(again, b) {
			t.Fatalf("Decode then Encode: % x, want % x", again, b)
		}
	})
}

// TestSeed: the fuzz seed is the sample config's frame (regenerate with
// SANDBOXINIT_WRITE_SEED=1 when the format changes).
func TestSeed(t *testing.T) {
	path := "../../../testdata/fuzz/sandboxinit/sample.bin"
	if os.Getenv("SANDBOXINIT_WRITE_SEED") != "" {
		if err := os.WriteFile(path, Encode(sample()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, Encode(sample())) {
		t.Errorf("%s is not the sample's frame: SANDBOXINIT_WRITE_SEED=1 go test -run TestSeed ./pkg/sandbox/sandboxinit", path)
	}
}
