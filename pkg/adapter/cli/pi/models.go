package pi

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
)

// maxModels bounds the models.json the adapter reads.
const maxModels = 1 << 20

// ConfigBaseURLs is cli.Config.ConfigBaseURLs for Pi: every baseUrl
// $PI_CODING_AGENT_DIR/models.json (else $HOME/.pi/agent's) names, a
// provider's and each of its models', providers sorted by name. Pi reads
// the file as JSON with // line comments and trailing commas, and so does
// this. When the file names any, they are a sandboxed run's egress (a
// profile whose runs also use a built-in provider lists every host in
// egress:); when it names none, the built-in provider's host is (Egress).
func ConfigBaseURLs(env func(string) (string, bool)) ([]cli.BaseURL, error) {
	dir, _ := env(EnvAgentDir)
	if dir == "" {
		home, _ := env("HOME")
		if home == "" {
			return nil, nil
		}
		dir = filepath.Join(home, ".pi", "agent")
	} else if home, _ := env("HOME"); strings.HasPrefix(dir, "~/") && home != "" {
		dir = filepath.Join(home, dir[2:])
	}
	if !filepath.IsAbs(dir) {
		return nil, nil // relative to the child's cwd: not ours to guess
	}
	path := filepath.Join(dir, "models.json")
	b, err := cli.ReadConfigFile(path, maxModels)
	if err != nil || b == nil {
		return nil, err
	}
	urls, err := modelsBaseURLs(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i := range urls {
		urls[i].Source = path + ": " + urls[i].Source
	}
	return urls, nil
}

// modelsBaseURLs reads the baseUrl values of a models.json; Source is the
// key path of each.
func modelsBaseURLs(b []byte) ([]cli.BaseURL, error) {
	var doc struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			Models  []struct {
				ID      string `json:"id"`
				BaseURL string `json:"baseUrl"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(stripJSONComments(b), &doc); err != nil {
		return nil, err
	}
	var out []cli.BaseURL
	for _, name := range slices.Sorted(maps.Keys(doc.Providers)) {
		p := doc.Providers[name]
		if p.BaseURL != "" {
			out = append(out, cli.BaseURL{URL: p.BaseURL, Source: "providers." + name + ".baseUrl"})
		}
		for i, m := range p.Models {
			if m.BaseURL != "" {
				out = append(out, cli.BaseURL{URL: m.BaseURL, Source: fmt.Sprintf("providers.%s.models[%d].baseUrl", name, i)})
			}
		}
	}
	return out, nil
}

var (
	// lineComment matches a string literal (kept) or a // comment to the
	// end of its line (dropped), as Pi's stripJsonComments does.
	lineComment = regexp.MustCompile(`"(?:\\.|[^"\\])*"|//[^\n]*`)
	// trailingComma matches a string literal (kept) or a comma before a
	// closing bracket (dropped).
	trailingComma = regexp.MustCompile(`"(?:\\.|[^"\\])*"|,(\s*[}\]])`)
)

// stripJSONComments drops // line comments and trailing commas outside
// string literals.
func stripJSONComments(b []byte) []byte {
	b = lineComment.ReplaceAllFunc(b, func(m []byte) []byte {
		if m[0] == '"' {
			return m
		}
		return nil
	})
	return trailingComma.ReplaceAllFunc(b, func(m []byte) []byte {
		if m[0] == '"' {
			return m
		}
		return m[1:]
	})
}
