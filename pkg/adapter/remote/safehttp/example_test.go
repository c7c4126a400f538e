package safehttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/safehttp"
)

func ExampleCheckURL() {
	for _, raw := range []string{
		"https://api.openai.com/v1",
		"http://169.254.169.254/latest/meta-data/",
		"http://0x7f.1:11434/", // 127.0.0.1 in another spelling
		"file:///etc/passwd",
	} {
		_, err := safehttp.CheckURL(raw, safehttp.Policy{})
		fmt.Printf("%-42s refused=%v\n", raw, errors.Is(err, safehttp.ErrRefused))
	}
	// Output:
	// https://api.openai.com/v1                  refused=false
	// http://169.254.169.254/latest/meta-data/   refused=true
	// http://0x7f.1:11434/                       refused=true
	// file:///etc/passwd                         refused=true
}

func ExampleRefused() {
	for _, s := range []string{"93.184.216.34", "10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::7f00:1"} {
		bad, why := safehttp.Refused(netip.MustParseAddr(s), safehttp.Policy{AllowLoopback: true})
		if !bad {
			why = "allowed"
		}
		fmt.Printf("%s: %s\n", s, why)
	}
	// Output:
	// 93.184.216.34: allowed
	// 10.0.0.1: private (10.0.0.0/8)
	// ::ffff:169.254.169.254: IPv4-mapped form of 169.254.169.254: cloud metadata address
	// 64:ff9b::7f00:1: NAT64 form of 127.0.0.1: loopback (127.0.0.0/8)
}

// A profile that allows loopback (a local Ollama, the fixture server) checks
// its base URL once, then makes one client per logical request and closes
// it when the request is done.
func ExampleNewClient() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "pong")
	}))
	defer srv.Close()

	p := safehttp.Policy{AllowLoopback: true}
	if _, err := safehttp.CheckURL(srv.URL, p); err != nil {
		fmt.Println("check:", err)
		return
	}
	client := safehttp.NewClient(p, 10*time.Second)
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL + "/ping")
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))

	// Without AllowLoopback the same server is refused before any
	// connection is made.
	strict := safehttp.NewClient(safehttp.Policy{}, 10*time.Second)
	defer strict.CloseIdleConnections()
	_, err = strict.Get(srv.URL + "/ping")
	fmt.Println(errors.Is(err, safehttp.ErrRefused))
	// Output:
	// 200 pong
	// true
}
