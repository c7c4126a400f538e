package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines is the README's limit: a newcomer's page, the rest in docs/.
const maxReadmeLines = 220

// TestReadmeIsShort checks that README.md has at most maxReadmeLines lines.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail to a page of docs/", n, maxReadmeLines)
	}
}

// link is a Markdown link or image: its target is group 1.
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestRelativeLinksResolve checks that every relative link of README.md
// and docs/*.md names a file or directory that exists (its #fragment left
// aside).
func TestRelativeLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if _, err := os.Stat(filepath.Join(filepath.Dir(page), filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d links to %s, which does not exist", page, i+1, m[1])
				}
			}
		}
	}
}

// TestReadmeLinksEveryPage checks that README.md links to every page of
// docs/, so that none is found only by listing the directory.
func TestReadmeLinksEveryPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(target)] = true
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if name := "docs/" + filepath.Base(p); !linked[name] {
			t.Errorf("README.md does not link to %s", name)
		}
	}
}
