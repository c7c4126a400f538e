// Package replay serves recorded model-API responses over real HTTP
// on loopback, so remote adapters are tested through their real HTTP path.
// Users can point a profile's base_url at it for their own tests.
//
// A fixture file is JSON: one response, or a sequence of responses served
// in order (the last one repeats), one per request:
//
//	{"responses": [
//	  {"status": 200, "headers": {"Content-Type": "text/event-stream"},
//	   "body": "event: message_start\ndata: {...}\n\n...",
//	   "cut_after": 120}
//	]}
//
// cut_after > 0 closes the connection after that many body bytes, a
// transport failure in mid-stream. A request selects a fixture by its path:
// the server's URL for case NAME is URL()+"/"+NAME, and the rest of the
// path is the provider's (…/NAME/v1/messages).
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Response is one recorded response.
type Response struct {
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     string            `json:"body"`
	CutAfter int               `json:"cut_after,omitempty"`
}

type file struct {
	Responses []Response `json:"responses"`
	Response
}

// Request is a request the server received.
type Request struct {
	Case, Path string
	Header     http.Header
	Body       []byte
	// At is when the server read the request: the gap between two
	// attempts' requests is at least the wait the runner chose between them.
	At time.Time
}

// Server serves the fixtures of one directory. Safe for concurrent use.
type Server struct {
	dir  string
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu   sync.Mutex
	next map[string]int
	reqs []Request
}

// Start serves dir on a random loopback port until Close.
func Start(dir string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, ln: ln, next: map[string]int{}, done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { defer close(s.done); _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL; a case's base URL is URL()+"/"+name.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	at := time.Now()
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Case: name, Path: "/" + rest, Header: r.Header.Clone(), Body: body, At: at})
	i := s.next[name]
	s.next[name]++
	s.mu.Unlock()
	resp, err := s.load(name, i)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	resp.Write(w)
}

// Write answers with the recorded response: its headers, its status (0:
// 200) and its body, cut (the connection closed) after CutAfter bytes
// when that is set. A test server of its own (one that picks the response
// by what the request holds) serves a fixture file's responses with Load
// and Write.
func (resp Response) Write(w http.ResponseWriter) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	b := []byte(resp.Body)
	if resp.CutAfter > 0 && resp.CutAfter < len(b) {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(status)
		_, _ = w.Write(b[:resp.CutAfter])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// load returns the i-th response of case name (the last one repeats).
func (s *Server) load(name string, i int) (Response, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return Response{}, errors.New("replay: no such case")
	}
	rs, err := Load(filepath.Join(s.dir, name+".json"))
	if err != nil {
		return Response{}, fmt.Errorf("replay: case %s: %w", name, err)
	}
	return rs[min(i, len(rs)-1)], nil
}

// Load reads a fixture file (one response, or a sequence) strictly and
// returns its responses, at least one.
func Load(path string) ([]Response, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if len(f.Responses) == 0 {
		return []Response{f.Response}, nil
	}
	return f.Responses, nil
}
