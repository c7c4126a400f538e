package replay_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServesSequenceAndCuts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "seq.json"), []byte(`{"responses":[{"status":500,"body":"{\"error\":\"boom\"}"},{"body":"data: ok\n\n"},{"body":"0123456789","cut_after":4}]}`), 0o644)
	s, err := replay.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func() (int, string, error) {
		resp, err := http.Post(s.URL()+"/seq/v1/x", "application/json", strings.NewReader(`{"q":1}`))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if code, _, _ := get(); code != 500 {
		t.Fatalf("first = %d", code)
	}
	if code, body, _ := get(); code != 200 || body != "data: ok\n\n" {
		t.Fatalf("second = %d %q", code, body)
	}
	if _, body, err := get(); err == nil || body != "0123" {
		t.Fatalf("cut = %q, %v; want 4 bytes and an error", body, err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Case != "seq" || reqs[0].Path != "/v1/x" || string(reqs[0].Body) != `{"q":1}` {
		t.Fatalf("requests = %+v", reqs)
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].At.IsZero() || reqs[i].At.Before(reqs[i-1].At) {
			t.Errorf("request %d arrived at %v, before request %d at %v", i, reqs[i].At, i-1, reqs[i-1].At)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
