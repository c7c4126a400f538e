package secret_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
)

func ExampleString() {
	key := secret.New("sk-live-1234567890")
	fmt.Println(key)
	fmt.Printf("%v %+v\n", key, struct{ Key secret.String }{key})
	_, err := json.Marshal(key)
	fmt.Println(err != nil)
	// Output:
	// [REDACTED]
	// [REDACTED] {Key:[REDACTED]}
	// true
}
