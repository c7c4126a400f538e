package wire

import (
	"errors"
	"testing"
)

// A message is written in the lowest version that has its fields, a v1
// reader's bytes stay v1, and a v1 message may not carry a v2 field.
func TestContractVersions(t *testing.T) {
	ws := &WorkspaceSource{Git: &GitSource{URL: "file:///srv/repo.git", Ref: "main"}}
	arts := &Artifacts{Patch: &ArtifactRef{Name: "t/r/patch", SHA256: "ab", Size: 2}}
	if v := VersionOf(&RunRequest{RunID: "r"}); v != Version {
		t.Fatalf("VersionOf(a v1 request) = %d", v)
	}
	if v := VersionOf(&RunRequest{Workspace: ws}); v != 2 {
		t.Fatalf("VersionOf(a request with a workspace) = %d", v)
	}
	if v := VersionOf(&Work{Workspace: ws}); v != 2 {
		t.Fatalf("VersionOf(work with a workspace) = %d", v)
	}
	if v := VersionOf(&Event{Kind: KindStatus, Status: &Status{State: StateSucceeded}}); v != Version {
		t.Fatalf("VersionOf(a v1 status) = %d", v)
	}
	for _, s := range []Status{{State: StateSucceeded, Artifacts: arts}, {State: StateRunning, Sandbox: SandboxOff}} {
		if v := VersionOf(&Event{Kind: KindStatus, Status: &s}); v != 2 {
			t.Fatalf("VersionOf(%+v) = %d", s, v)
		}
	}
	for _, tt := range []struct {
		name string
		ev   Event
		err  error
	}{
		{"v2 status in v2", Event{V: 2, RunID: "r", Seq: 1, Kind: KindStatus, Status: &Status{State: StateSucceeded, Artifacts: arts}}, nil},
		{"v1 status in v2", Event{V: 2, RunID: "r", Seq: 1, Kind: KindStatus, Status: &Status{State: StateSucceeded}}, nil},
		{"v2 status in v1", Event{V: 1, RunID: "r", Seq: 1, Kind: KindStatus, Status: &Status{State: StateSucceeded, Artifacts: arts}}, ErrVersion},
		{"sandbox in v1", Event{V: 1, RunID: "r", Seq: 1, Kind: KindStatus, Status: &Status{State: StateRunning, Sandbox: SandboxOff}}, ErrVersion},
	} {
		b, err := Marshal(&tt.ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode[Event](b); !errors.Is(err, tt.err) && (tt.err != nil || err != nil) {
			t.Errorf("%s: Decode = %v, want %v", tt.name, err, tt.err)
		}
	}
	for _, q := range []RunRequest{{V: 1, RunID: "r", Tenant: "t", Workspace: ws}} {
		b, err := Marshal(&q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode[RunRequest](b); !errors.Is(err, ErrVersion) {
			t.Errorf("Decode(a v1 request with a workspace) = %v, want ErrVersion", err)
		}
		q.V = 2
		if b, err = Marshal(&q); err != nil {
			t.Fatal(err)
		}
		if got, err := Decode[RunRequest](b); err != nil || got.Workspace == nil || got.Workspace.Git.Ref != "main" {
			t.Errorf("Decode(a v2 request) = %+v, %v", got, err)
		}
	}
}

// TestSessionChunksNeedV3: an event carrying a chunk type of sessions,
// alone or in a batch, is written in v3, and one that claims an earlier
// version is refused; the chunk types of v1 stay v1.
func TestSessionChunksNeedV3(t *testing.T) {
	for _, typ := range []ChunkType{ChunkInput, ChunkTurnEnd, ChunkPlan, ChunkPermissionRequested, ChunkPermissionResolved} {
		one := Event{RunID: "r", Seq: 1, TS: 1, Kind: KindChunk, Chunk: &Chunk{Type: typ}}
		batch := Event{RunID: "r", Seq: 1, Last: 2, TS: 1, Kind: KindChunks, Chunks: []Chunk{{Type: ChunkText, Content: "a"}, {Type: typ}}}
		for _, ev := range []Event{one, batch} {
			if got := VersionOf(&ev); got != 3 {
				t.Errorf("%s in a %s event: VersionOf = %d, want 3", typ, ev.Kind, got)
			}
			ev.V = 2
			b, err := Marshal(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode[Event](b); !errors.Is(err, ErrVersion) {
				t.Errorf("%s in a v2 %s event: Decode = %v, want ErrVersion", typ, ev.Kind, err)
			}
		}
		if !typ.Valid() || typ.Version() != 3 {
			t.Errorf("%s: Valid %t, Version %d", typ, typ.Valid(), typ.Version())
		}
	}
	// The batch encoder stamps the version its chunks need, the held
	// chunk's carried to the next batch.
	var b ChunkBatch
	for _, c := range []Chunk{{Type: ChunkText, Content: "a"}, {Type: ChunkTurnEnd}} {
		if _, err := b.Add(&c, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode("r", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := Decode[Event](enc); err != nil || ev.V != 3 {
		t.Errorf("a batch with a turn_end: v=%d, %v", ev.V, err)
	}
	b.Reset()
	if _, err := b.Add(&Chunk{Type: ChunkText, Content: "b"}, 1<<20); err != nil {
		t.Fatal(err)
	}
	if enc, err = b.Encode("r", 3, 1); err != nil {
		t.Fatal(err)
	}
	if ev, err := Decode[Event](enc); err != nil || ev.V != Version {
		t.Errorf("a text batch after it: v=%d, %v", ev.V, err)
	}
	ev := Event{RunID: "r", Seq: 1, TS: 1, Kind: KindChunk, Chunk: &Chunk{Type: ChunkText, Content: "a"}}
	if got := VersionOf(&ev); got != Version {
		t.Errorf("a text chunk event: VersionOf = %d, want %d", got, Version)
	}
	if ChunkType("plan2").Valid() {
		t.Error("an unknown chunk type is valid")
	}
}

// TestBatchesAreV2: an event of a batch kind is written in BatchVersion
// at least, so a v1 reader, which knows only status and chunk events,
// refuses it by its version instead of skipping a kind it does not know;
// a batch stamped v1, as writers stamped them before this rule, still
// decodes.
func TestBatchesAreV2(t *testing.T) {
	chunks := Event{RunID: "r", Seq: 3, Last: 4, TS: 1, Kind: KindChunks, Chunks: []Chunk{{Type: ChunkText, Content: "a"}, {Type: ChunkText, Content: "b"}}}
	statuses := Event{RunID: "r", Seq: 1, Last: 2, TS: 1, Kind: KindStatuses, Statuses: []Status{{State: StateAccepted}, {State: StateRouted}}}
	for _, ev := range []Event{chunks, statuses} {
		if got := VersionOf(&ev); got != BatchVersion {
			t.Errorf("VersionOf(a %s event) = %d, want %d", ev.Kind, got, BatchVersion)
		}
		ev.V = Version
		b, err := Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode[Event](b); err != nil || got.V != Version || got.LastSeq() != ev.Last {
			t.Errorf("a %s event stamped v1 (written before batches were v2): %+v, %v", ev.Kind, got, err)
		}
	}
	var b ChunkBatch
	for i := range chunks.Chunks {
		if _, err := b.Add(&chunks.Chunks[i], 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode("r", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Decode[Event](enc)
	if err != nil || ev.Kind != KindChunks || ev.V != BatchVersion {
		t.Errorf("an encoded batch of text chunks: %s v=%d, %v; want chunks v=%d", ev.Kind, ev.V, err, BatchVersion)
	}
	// Expanded, each is the v1 event a v1 writer writes for its seq.
	for e := range ev.Expand() {
		if e.Kind != KindChunk || e.V != Version {
			t.Errorf("seq %d of the batch expands to a %s event of v%d, want a chunk event of v%d", e.Seq, e.Kind, e.V, Version)
		}
	}
	one := Event{RunID: "r", Seq: 1, TS: 1, Kind: KindChunk, Chunk: &Chunk{Type: ChunkText, Content: "a"}}
	if got := VersionOf(&one); got != Version {
		t.Errorf("VersionOf(a single text chunk) = %d, want %d", got, Version)
	}
}
