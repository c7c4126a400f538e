package nlip_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleParse() {
	answer := `{"format":"text","subformat":"english","content":"I can book that flight.",
	  "submessages":[{"format":"text","subformat":"english","label":"input_required","content":"Which date do you want to fly?"},
	                 {"format":"token","subformat":"conversation","content":"conv-7f3a"}]}`
	res, failure, err := nlip.Parse([]byte(answer))
	if err != nil || failure != nil {
		panic(fmt.Sprint(failure, err))
	}
	fmt.Printf("%+v\n", res)
	for _, c := range append([]wire.Chunk{nlip.SystemChunk("travel-agent")}, nlip.Chunks(res)...) {
		fmt.Printf("%s %q stop=%q\n", c.Type, c.Content, c.Metadata.StopReason)
	}
	// Output:
	// {Content:I can book that flight. Context:conv-7f3a InputRequired:Which date do you want to fly?}
	// system "" stop=""
	// text "I can book that flight.\n\nWhich date do you want to fly?" stop=""
	// result "" stop="input_required"
}

func ExampleRequestMessage() {
	m := nlip.RequestMessage("14 March.", nlip.DefaultLanguage, "conv-7f3a")
	fmt.Printf("%s/%s %q, then %s/%s\n", m.Format, m.Subformat, m.Content, m.Submessages[0].Format, m.Submessages[0].Subformat)
	// Output:
	// text/english "14 March.", then token/conversation
}
