package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// readmeBlock is the first ```sh block of README.md's section heading,
// as its command lines: continuation lines joined, comments dropped.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	return docBlock(t, "README.md", "## "+heading)
}

// docBlock is the first ```sh block under the heading line heading (with
// its #s) of the file doc, up to the next heading of its level or above.
func docBlock(t *testing.T, doc, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	level := headingLevel(heading)
	var lines []string
	in, fence := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !fence && headingLevel(line) > 0 && headingLevel(line) <= level:
			in = line == heading
		case in && !fence && line == "```sh":
			fence = true
		case in && fence && line == "```":
			if len(lines) == 0 {
				t.Fatalf("%s: section %q has an empty block", doc, heading)
			}
			return joinContinued(lines)
		case in && fence:
			lines = append(lines, line)
		}
	}
	t.Fatalf("%s has no ```sh block under %q", doc, heading)
	return nil
}

// headingLevel is the level of a Markdown heading line (its #s), 0 for
// another line.
func headingLevel(line string) int {
	marks, _, ok := strings.Cut(line, " ")
	if !ok || marks == "" || strings.Trim(marks, "#") != "" {
		return 0
	}
	return len(marks)
}

func joinContinued(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		if rest, ok := strings.CutSuffix(l, `\`); ok {
			cur += rest
			continue
		}
		cur += l
		if w := strings.TrimSpace(cur); w != "" {
			out = append(out, w)
		}
		cur = ""
	}
	return out
}

// shellWords splits a command line as sh would for the README's simple
// commands: single and double quotes, $NAME from vars inside double
// quotes and bare words, a comment from an unquoted #.
func shellWords(t *testing.T, line string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	have := false
	expand := func(s string) string {
		return regexp.MustCompile(`\$[A-Z_]+`).ReplaceAllStringFunc(s, func(v string) string {
			val, ok := vars[v[1:]]
			if !ok {
				t.Fatalf("README command %q uses %s, which no earlier command set", line, v)
			}
			return val
		})
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '#' && !have:
			i = len(line)
		case c == ' ' || c == '\t':
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("README command %q: unclosed '", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			have = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				t.Fatalf("README command %q: unclosed \"", line)
			}
			cur.WriteString(expand(line[i+1 : i+1+j]))
			i += j + 1
			have = true
		default:
			j := i
			for j < len(line) && !strings.ContainsRune(" \t'\"", rune(line[j])) {
				j++
			}
			cur.WriteString(expand(line[i:j]))
			i = j - 1
			have = true
		}
	}
	if have {
		words = append(words, cur.String())
	}
	return words
}

// readmeMesh is what the README's commands run against: a freshly built
// agentmesh in a temporary bin/, and the mesh its up started.
type readmeMesh struct {
	t       *testing.T
	bin     string // the temporary directory holding bin/agentmesh
	natsURL string
	gateway string // host:port
	vars    map[string]string
	runID   string   // of the last run printed
	runs    []string // every run's, in order
	// dir, when set, is where the commands run instead of the
	// repository's root: a directory that looks like it (each of its
	// entries linked there, bin/ the test's), so what they write stays in
	// the test's temporary directory.
	dir string
	// env are the variables the commands' exports set, NAME=value.
	env []string
	// upLog is up's log, once up started.
	upLog *safeBuffer
	// out is what the last agentmesh follow, artifacts or send printed,
	// or the body the last curl of a conversation's history got.
	out string
}

// cwd is the directory the commands run in.
func (m *readmeMesh) cwd() string {
	if m.dir != "" {
		return m.dir
	}
	return root
}

// agentmesh runs bin/agentmesh args from the repository's root against
// the mesh and returns its stdout; it fails the test unless it exits 0.
func (m *readmeMesh) agentmesh(line string, args []string) string {
	m.t.Helper()
	stdout, stderr, err := m.try(args...)
	if err != nil {
		m.t.Fatalf("README command %q: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout, stderr)
	}
	return stdout
}

// try runs bin/agentmesh args as agentmesh does, and returns what it
// printed and how it exited.
func (m *readmeMesh) try(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(m.bin, "bin", "agentmesh"), args...)
	cmd.Dir = m.cwd()
	cmd.Env = append(append(os.Environ(), m.env...), "AGENTMESH_NATS_URL="+m.natsURL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

var (
	upNATS    = regexp.MustCompile(`msg="agentmesh up" nats=(\S+)`)
	upGateway = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
	runIDLine = regexp.MustCompile(`\[accepted run ([A-Za-z0-9_-]+)\]`)
	// resumedLine is what agentmesh send prints when it starts the run
	// that resumes a session.
	resumedLine = regexp.MustCompile(`resumed as run ([A-Za-z0-9_-]+) on its conversation`)
)

// up starts bin/agentmesh up with args, on free ports and a temporary
// data directory, and waits until it serves NATS and the gateway.
func (m *readmeMesh) up(line string, args []string) {
	m.t.Helper()
	args = append(append([]string{"up"}, args...), "--listen", "127.0.0.1:0", "--gateway", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", filepath.Join(m.bin, "data"))
	cmd := exec.Command(filepath.Join(m.bin, "bin", "agentmesh"), args...)
	cmd.Dir = m.cwd()
	cmd.Env = append(os.Environ(), m.env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("README command %q: %v", line, err)
	}
	log := &safeBuffer{}
	m.upLog = log
	// ready gets the NATS and gateway addresses once the mesh started and
	// the gateway listens (it logs after the mesh started).
	type addrs struct{ nats, gateway string }
	ready, exited := make(chan addrs, 1), make(chan struct{})
	go func() {
		defer close(exited)
		var a addrs
		started, sent := false, false
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			log.WriteString(l + "\n")
			if s := upNATS.FindStringSubmatch(l); s != nil {
				a.nats = s[1]
			}
			if s := upGateway.FindStringSubmatch(l); s != nil {
				a.gateway = s[1]
			}
			started = started || strings.Contains(l, `msg="mesh started"`)
			if started && a.nats != "" && a.gateway != "" && !sent {
				ready <- a
				sent = true
			}
		}
	}()
	m.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case a := <-ready:
		m.natsURL, m.gateway = a.nats, a.gateway
	case <-exited:
		m.t.Fatalf("README command %q: agentmesh up stopped before the mesh started; its log:\n%s", line, log.String())
	case <-time.After(60 * time.Second):
		m.t.Fatalf("README command %q: the mesh did not start, or named no NATS or gateway address, within 60s; its log:\n%s", line, log.String())
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) WriteString(x string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(x)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// command runs one line of the README.
func (m *readmeMesh) command(line string) {
	m.t.Helper()
	if name, rest, ok := strings.Cut(line, "=$("); ok && regexp.MustCompile(`^[A-Z_]+$`).MatchString(name) {
		inner, ok := strings.CutSuffix(strings.TrimSpace(strings.SplitN(rest, "#", 2)[0]), ")")
		if !ok {
			m.t.Fatalf("README command %q: want NAME=$(command)", line)
		}
		words := shellWords(m.t, inner, m.vars)
		if len(words) == 0 || words[0] != "bin/agentmesh" {
			m.t.Fatalf("README command %q: only bin/agentmesh runs inside $(...)", line)
		}
		m.vars[name] = strings.TrimSpace(m.agentmesh(line, words[1:]))
		return
	}
	words := shellWords(m.t, line, m.vars)
	for i, w := range words {
		if w == "<run_id>" {
			if m.runID == "" {
				m.t.Fatalf("README command %q names <run_id> before any run", line)
			}
			words[i] = m.runID
		}
	}
	switch {
	case len(words) == 2 && words[0] == "make" && words[1] == "build":
		m.build(line)
	case len(words) == 2 && words[0] == "export":
		name, value, ok := strings.Cut(words[1], "=")
		if !ok || !regexp.MustCompile(`^[A-Z_]+$`).MatchString(name) {
			m.t.Fatalf("README command %q: want export NAME=value", line)
		}
		m.vars[name] = value
		m.env = append(m.env, name+"="+value)
	case len(words) >= 1 && (words[0] == "git" || words[0] == "printf" || words[0] == "mkdir"):
		m.shell(line)
	case len(words) >= 2 && words[0] == "bin/agentmesh" && (words[1] == "follow" || words[1] == "artifacts"):
		m.out = m.agentmesh(line, words[1:])
	case len(words) >= 2 && words[0] == "bin/agentmesh" && words[1] == "send":
		// A send to a session that is not live starts the run that
		// resumes it: that run is the next <run_id>.
		m.out = m.agentmesh(line, words[1:])
		if s := resumedLine.FindStringSubmatch(m.out); s != nil {
			m.runID = s[1]
			m.runs = append(m.runs, m.runID)
		}
	case len(words) >= 3 && words[0] == "bin/agentmesh" && words[1] == "up" && words[len(words)-1] == "&":
		m.up(line, words[2:len(words)-1])
	case len(words) >= 2 && words[0] == "bin/agentmesh" && words[1] == "run":
		out := m.agentmesh(line, words[1:])
		m.checkRun(line, words, out)
	case len(words) >= 2 && words[0] == "bin/agentmesh" && words[1] == "status":
		out := m.agentmesh(line, words[1:])
		if !regexp.MustCompile(`(?m)^state\s+succeeded$`).MatchString(out) {
			m.t.Errorf("README command %q: the record does not say succeeded:\n%s", line, out)
		}
	case len(words) >= 1 && words[0] == "curl":
		m.curl(line, words[1:])
	default:
		m.t.Fatalf("README command %q: this test does not know how to run it; teach TestReadmeCommands", line)
	}
}

// build does what make build does for bin/agentmesh: the test builds
// the command into its own bin/.
func (m *readmeMesh) build(line string) {
	m.t.Helper()
	build := exec.Command("go", "build", "-o", filepath.Join(m.bin, "bin")+string(filepath.Separator), "./cmd/agentmesh")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		m.t.Fatalf("README command %q: go build: %v\n%s", line, err, out)
	}
}

// shell runs a line of git and printf (a user's own commands: making a
// repository, cloning it) with sh, in the commands' directory, with the
// variables earlier commands set and a git identity, as a user's git has.
func (m *readmeMesh) shell(line string) {
	m.t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = m.cwd()
	cmd.Env = append(os.Environ(), m.env...)
	for k, v := range m.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=A User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=A User", "GIT_COMMITTER_EMAIL=user@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "PWD="+m.cwd())
	if out, err := cmd.CombinedOutput(); err != nil {
		m.t.Fatalf("README command %q: %v\n%s", line, err, out)
	}
}

// checkRun checks a run's output: text ending succeeded, or NDJSON
// events of one run ending with a succeeded status.
func (m *readmeMesh) checkRun(line string, words []string, out string) {
	m.t.Helper()
	json_ := false
	for _, w := range words {
		json_ = json_ || w == "--json"
	}
	if !json_ {
		s := runIDLine.FindStringSubmatch(out)
		if s == nil || !strings.Contains(out, "[succeeded") {
			m.t.Fatalf("README command %q: no accepted run that succeeded in:\n%s", line, out)
		}
		m.runID = s[1]
		m.runs = append(m.runs, m.runID)
		return
	}
	var last struct {
		RunID  string `json:"run_id"`
		Kind   string `json:"kind"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			m.t.Fatalf("README command %q: a line that is not JSON: %q", line, l)
		}
	}
	if last.Kind != "status" || last.Status.State != "succeeded" {
		m.t.Fatalf("README command %q: the last event is not a succeeded status:\n%s", line, out)
	}
	m.runID = last.RunID
	m.runs = append(m.runs, m.runID)
}

// curl does what the README's curl does, with net/http: -s, -H and -d
// (a POST, as curl makes it), against the test's gateway for
// localhost:8080.
func (m *readmeMesh) curl(line string, args []string) {
	m.t.Helper()
	var url, body string
	header := http.Header{}
	method := http.MethodGet
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s":
		case "-H", "-d":
			if i+1 == len(args) {
				m.t.Fatalf("README command %q: %s without a value", line, a)
			}
			i++
			if a == "-H" {
				k, v, ok := strings.Cut(args[i], ":")
				if !ok {
					m.t.Fatalf("README command %q: header %q", line, args[i])
				}
				header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			} else {
				body, method = args[i], http.MethodPost
				header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
		default:
			if strings.HasPrefix(a, "-") || url != "" {
				m.t.Fatalf("README command %q: curl argument %q is not one this test knows", line, a)
			}
			url = a
		}
	}
	rest, ok := strings.CutPrefix(url, "localhost:8080")
	if !ok {
		m.t.Fatalf("README command %q: the URL %q is not on localhost:8080", line, url)
	}
	req, err := http.NewRequest(method, "http://"+m.gateway+rest, strings.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatalf("README command %q: %v", line, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(rest, "/v1/conversations/") {
		if resp.StatusCode != http.StatusOK {
			m.t.Fatalf("README command %q: %s\n%s", line, resp.Status, b)
		}
		m.out = string(b)
		return
	}
	if rest == "/v1/runs" {
		// The runs API's submission: 202 and the run's id.
		var sub struct {
			RunID string `json:"run_id"`
		}
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &sub) != nil || sub.RunID == "" {
			m.t.Fatalf("README command %q: %s\n%s", line, resp.Status, b)
		}
		m.runID = sub.RunID
		m.runs = append(m.runs, m.runID)
		return
	}
	if resp.StatusCode != http.StatusOK {
		m.t.Fatalf("README command %q: %s\n%s", line, resp.Status, b)
	}
	var completion struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Cost *string `json:"x-agentmesh-cost"`
	}
	if err := json.Unmarshal(b, &completion); err != nil {
		m.t.Fatalf("README command %q: the answer is not JSON: %v\n%s", line, err, b)
	}
	// The README says what the answer is.
	if completion.Object != "chat.completion" || len(completion.Choices) != 1 ||
		completion.Choices[0].Message.Content != "echo: hi" || completion.Cost == nil {
		m.t.Fatalf("README command %q: want a chat.completion saying \"echo: hi\" with x-agentmesh-cost, got\n%s", line, b)
	}
}

// TestReadmeCommands runs the README's first run and its gateway call, as
// a newcomer would after reading only the README: every command of the
// two blocks, in order, against a freshly built agentmesh (up on free
// ports in a temporary data directory), then opens the console with the
// key as the README says.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentmesh")
	}
	m := &readmeMesh{t: t, bin: t.TempDir(), vars: map[string]string{}}
	for _, heading := range []string{"A first run", "The gateway in three lines"} {
		for _, line := range readmeBlock(t, heading) {
			t.Logf("$ %s", line)
			m.command(line)
		}
	}
	key := m.vars["KEY"]
	if key == "" {
		t.Fatal("the README's gateway block set no KEY")
	}
	// "open http://127.0.0.1:8080/console in a browser and log in with $KEY"
	req, err := http.NewRequest(http.MethodGet, "http://"+m.gateway+"/console", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<html") {
		t.Fatalf("GET /console with the README's key: %s\n%s", resp.Status, b)
	}
	login, err := http.Get("http://" + m.gateway + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	if login.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/login: %s", login.Status)
	}
}
