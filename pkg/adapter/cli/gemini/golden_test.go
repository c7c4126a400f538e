package gemini

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goldenCase is one stdout stream with its exit status: a real transcript
// (testdata/cli/gemini/<name>.stdout.ndjson with .exit and .stderr.txt) or a
// hand-written case (testdata/normalize/gemini/<name>/stdout.jsonl with an
// optional exit file) for grammar the transcripts do not show.
type goldenCase struct {
	name   string
	stdout string // path
	stderr string // path, may not exist
	exit   int
}

func goldenCases(t testing.TB) []goldenCase {
	t.Helper()
	var cases []goldenCase
	outs, err := filepath.Glob(filepath.Join(transcriptsDir, "*.stdout.ndjson"))
	if err != nil || len(outs) == 0 {
		t.Fatalf("no transcripts in %s (%v)", transcriptsDir, err)
	}
	for _, out := range outs {
		base := strings.TrimSuffix(out, ".stdout.ndjson")
		cases = append(cases, goldenCase{
			name: filepath.Base(base), stdout: out, stderr: base + ".stderr.txt",
			exit: readExit(t, base+".exit"),
		})
	}
	extra, err := filepath.Glob(filepath.Join(normalizeDir, "*", "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range extra {
		dir := filepath.Dir(out)
		c := goldenCase{name: filepath.Base(dir), stdout: out, stderr: filepath.Join(dir, "stderr.txt")}
		if _, err := os.Stat(filepath.Join(dir, "exit")); err == nil {
			c.exit = readExit(t, filepath.Join(dir, "exit"))
		}
		cases = append(cases, c)
	}
	return cases
}

func readExit(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

func readOptional(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func wantPath(name string) string { return filepath.Join(normalizeDir, name, "want.jsonl") }

// TestGolden replays every transcript, and every hand-written case, through
// the framing and the parser and compares the normalized chunks with
// testdata/normalize/gemini/<case>/want.jsonl. -update rewrites them.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			stdout, err := os.ReadFile(tc.stdout)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := replay(t, stdout, tc.exit, readOptional(tc.stderr))
			if err := checkStream(chunks); err != nil {
				t.Errorf("stream rules: %v", err)
			}
			got := strings.Join(normalized(t, chunks, err), "\n") + "\n"
			if *update {
				if err := os.MkdirAll(filepath.Dir(wantPath(tc.name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(wantPath(tc.name), []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath(tc.name))
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("normalized %s:\ngot:\n%s\nwant:\n%s", tc.name, got, want)
			}
		})
	}
}
