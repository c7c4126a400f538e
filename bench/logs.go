package bench

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// LogRecorder keeps the warnings and errors of the mesh's services
// (Logger) and of an embedded server (as its server.Logger: Watch), so
// that a test can assert on them. It is safe for concurrent use.
type LogRecorder struct {
	mu    sync.Mutex
	lines []string
}

var _ server.Logger = (*LogRecorder)(nil)

// Logger returns a logger that records warnings and errors, one line each
// (slog's text format), and drops the rest.
func (r *LogRecorder) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Watch makes r the logger of srv from now on; r records the server's
// warnings and errors, prefixed "server: ".
func (r *LogRecorder) Watch(srv *server.Server) { srv.SetLogger(r, false, false) }

// Write records p as one line; slog's text handler writes one record per
// call.
func (r *LogRecorder) Write(p []byte) (int, error) {
	r.add(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (r *LogRecorder) add(line string) {
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}

// Warnf records a server warning.
func (r *LogRecorder) Warnf(format string, v ...any) {
	r.add("server: [WRN] " + fmt.Sprintf(format, v...))
}

// Errorf records a server error.
func (r *LogRecorder) Errorf(format string, v ...any) {
	r.add("server: [ERR] " + fmt.Sprintf(format, v...))
}

// Fatalf records a server fatal error (the server does not exit on it
// through this logger).
func (r *LogRecorder) Fatalf(format string, v ...any) {
	r.add("server: [FTL] " + fmt.Sprintf(format, v...))
}

// Noticef, Debugf and Tracef drop the server's lesser messages.
func (r *LogRecorder) Noticef(string, ...any) {}

// Debugf drops a server debug message.
func (r *LogRecorder) Debugf(string, ...any) {}

// Tracef drops a server trace message.
func (r *LogRecorder) Tracef(string, ...any) {}

// Lines returns the recorded lines that contain substr ("" for all).
func (r *LogRecorder) Lines(substr string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Limits are the log lines of the two 1,000-runs limits of issue 11: a
// pull refused because the consumer already has MaxWaiting pulls waiting
// (409 "Exceeded MaxWaiting", which the runner logs), and a consumer
// refused because the stream has its maximum (err_code 10026).
var Limits = []string{"Exceeded MaxWaiting", "maximum consumers limit"}

// Summary counts the recorded lines and those of each of Limits, with the
// first line of each kind: "12 warnings/errors; Exceeded MaxWaiting: 10
// (first: …)".
func (r *LogRecorder) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d warnings/errors", len(r.Lines("")))
	for _, l := range Limits {
		got := r.Lines(l)
		fmt.Fprintf(&b, "; %s: %d", l, len(got))
		if len(got) > 0 {
			fmt.Fprintf(&b, " (first: %s)", got[0])
		}
	}
	return b.String()
}
