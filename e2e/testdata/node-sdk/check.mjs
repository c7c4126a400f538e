// check.mjs: the official Node OpenAI SDK (npm package openai) against the
// agentmesh HTTP gateway, used the ordinary way. TestNodeSDK (e2e/node_test.go)
// runs it; by hand, with the openai package installed beside this file:
//
//	AGENTMESH_TEST_GATEWAY_URL=http://127.0.0.1:8080 OPENAI_API_KEY=amk_... node check.mjs
//
// where the key is one `agentmesh keys create` printed. The plain checks
// use model "fixture", whose adapter answers "echo: <prompt>". With
// AGENTMESH_TEST_TOOLS_MODEL set to a profile of a model API (transport: remote)
// serving the recorded tool round trip (testdata/remote/openai/
// tool-roundtrip.json: a call fs_read({"path":"answer.txt"}), then, given
// its result, "answer.txt says: 42."), it also makes that round trip in
// both shapes: chat (plain and streamed) and Responses (continued by
// previous_response_id and with the history inline). It prints one JSON
// line of results and exits 0, or names the failed check on stderr and
// exits 1.
import OpenAI from "openai";
import { VERSION } from "openai/version";

const gateway = process.env.AGENTMESH_TEST_GATEWAY_URL;
if (!gateway || !process.env.OPENAI_API_KEY) {
	console.error("check.mjs: set AGENTMESH_TEST_GATEWAY_URL and OPENAI_API_KEY");
	process.exit(2);
}
const model = "fixture";
const prompt = "hi";
const want = `echo: ${prompt}`;

// The tool round trip: the question, the call the model makes, the
// result this script returns for it and the model's answer to that.
const toolsModel = process.env.AGENTMESH_TEST_TOOLS_MODEL;
const question = "What does answer.txt say?";
const wantCall = { name: "fs_read", arguments: '{"path":"answer.txt"}' };
const toolOutput = "42\n";
const answer = "answer.txt says: 42.";
const fsReadParameters = {
	type: "object",
	properties: { path: { type: "string" }, max_bytes: { type: "integer", minimum: 1 } },
	required: ["path"],
	additionalProperties: false,
};
const chatTools = [
	{
		type: "function",
		function: { name: "fs_read", description: "Read a file of the workspace", parameters: fsReadParameters },
	},
];
const responsesTools = [
	{ type: "function", name: "fs_read", description: "Read a file of the workspace", parameters: fsReadParameters, strict: false },
];

// The key comes from OPENAI_API_KEY, as the SDK reads it by default. No
// retries, so that a failure is the gateway's first answer.
const client = new OpenAI({ baseURL: `${gateway}/v1`, maxRetries: 0, timeout: 60_000 });

const results = {};
let current = "";

function fail(message) {
	throw new Error(`${current}: ${message}`);
}

function expectEqual(what, got, wanted) {
	if (got !== wanted) {
		fail(`${what} is ${JSON.stringify(got)}, want ${JSON.stringify(wanted)}`);
	}
}

async function check(name, f) {
	current = name;
	results[name] = await f();
}

// expectCall checks a tool call's name and arguments and returns it as
// the results report it.
function expectCall(what, id, name, args) {
	if (!id) {
		fail(`${what} has no id`);
	}
	expectEqual(`${what}'s name`, name, wantCall.name);
	expectEqual(`${what}'s arguments`, args, wantCall.arguments);
	return { id, name, arguments: args };
}

async function main() {
	await check("chat", async () => {
		const c = await client.chat.completions.create({
			model,
			messages: [{ role: "user", content: prompt }],
		});
		expectEqual("choices[0].message.content", c.choices[0]?.message?.content, want);
		expectEqual("choices[0].finish_reason", c.choices[0]?.finish_reason, "stop");
		if (!c.usage || typeof c.usage.total_tokens !== "number") {
			fail(`no usage: ${JSON.stringify(c.usage)}`);
		}
		return { id: c.id, text: c.choices[0].message.content, usage: c.usage };
	});

	await check("chat_stream", async () => {
		const stream = await client.chat.completions.create({
			model,
			messages: [{ role: "user", content: prompt }],
			stream: true,
			stream_options: { include_usage: true },
		});
		let text = "";
		let last;
		let chunks = 0;
		for await (const chunk of stream) {
			chunks++;
			text += chunk.choices[0]?.delta?.content ?? "";
			last = chunk;
		}
		expectEqual("the streamed text", text, want);
		if (!last?.usage || typeof last.usage.total_tokens !== "number") {
			fail(`the last chunk has no usage: ${JSON.stringify(last)}`);
		}
		return { chunks, text, usage: last.usage };
	});

	await check("responses", async () => {
		const r = await client.responses.create({ model, input: prompt });
		expectEqual("output_text", r.output_text, want);
		expectEqual("status", r.status, "completed");
		return { id: r.id, text: r.output_text, usage: r.usage };
	});

	await check("responses_stream", async () => {
		const stream = await client.responses.create({ model, input: prompt, stream: true });
		let text = "";
		let deltas = 0;
		const types = [];
		let last;
		for await (const event of stream) {
			types.push(event.type);
			if (event.type === "response.output_text.delta") {
				deltas++;
				text += event.delta;
			}
			last = event;
		}
		if (deltas === 0) {
			fail(`no response.output_text.delta event among ${types.join(" ")}`);
		}
		expectEqual("the deltas' text", text, want);
		expectEqual("the last event's type", last?.type, "response.completed");
		const usage = last.response?.usage;
		if (!usage || typeof usage.total_tokens !== "number") {
			fail(`response.completed carries no usage: ${JSON.stringify(last.response)}`);
		}
		const final = (last.response.output ?? [])
			.filter((item) => item.type === "message")
			.flatMap((item) => item.content)
			.filter((part) => part.type === "output_text")
			.map((part) => part.text)
			.join("");
		expectEqual("response.completed's output text", final, want);
		return { events: types.length, deltas, text, usage };
	});

	await check("models", async () => {
		const ids = [];
		for await (const m of client.models.list()) {
			ids.push(m.id);
		}
		if (!ids.includes(model)) {
			fail(`${JSON.stringify(ids)} does not list ${model}`);
		}
		return { ids };
	});

	if (toolsModel) {
		await toolChecks();
	}

	await check("wrong_key", async () => {
		const wrong = new OpenAI({ baseURL: `${gateway}/v1`, apiKey: "amk_not-a-key", maxRetries: 0, timeout: 60_000 });
		try {
			await wrong.chat.completions.create({ model, messages: [{ role: "user", content: prompt }] });
		} catch (err) {
			if (!(err instanceof OpenAI.AuthenticationError)) {
				fail(`the error is not an OpenAI.AuthenticationError: ${err?.constructor?.name}: ${err}`);
			}
			expectEqual("status", err.status, 401);
			return { status: err.status, code: err.code, type: err.type };
		}
		fail("a wrong key was accepted");
	});
}

// toolChecks makes the tool round trip on toolsModel in both shapes, the
// way a Node program does: the reply's message or output items go back
// as they came, with the tool's result after them.
async function toolChecks() {
	await check("chat_tools", async () => {
		const messages = [{ role: "user", content: question }];
		const c1 = await client.chat.completions.create({ model: toolsModel, messages, tools: chatTools });
		expectEqual("choices[0].finish_reason", c1.choices[0]?.finish_reason, "tool_calls");
		const calls = c1.choices[0].message.tool_calls ?? [];
		expectEqual("the number of tool calls", calls.length, 1);
		expectEqual("tool_calls[0].type", calls[0].type, "function");
		const call = expectCall("tool_calls[0]", calls[0].id, calls[0].function.name, calls[0].function.arguments);
		messages.push(c1.choices[0].message);
		messages.push({ role: "tool", tool_call_id: call.id, content: toolOutput });
		const c2 = await client.chat.completions.create({ model: toolsModel, messages, tools: chatTools });
		expectEqual("the answer's content", c2.choices[0]?.message?.content, answer);
		expectEqual("the answer's finish_reason", c2.choices[0]?.finish_reason, "stop");
		return { call, text: c2.choices[0].message.content, usage: c2.usage };
	});

	await check("chat_tools_stream", async () => {
		// One streamed completion, accumulated: the text, the calls by
		// their index, the finish reason.
		const complete = async (messages) => {
			const stream = await client.chat.completions.create({ model: toolsModel, messages, tools: chatTools, stream: true });
			let content = "";
			let finish = null;
			const calls = [];
			for await (const chunk of stream) {
				const choice = chunk.choices[0];
				if (!choice) {
					continue;
				}
				content += choice.delta?.content ?? "";
				for (const d of choice.delta?.tool_calls ?? []) {
					const c = (calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
					if (d.id) {
						c.id = d.id;
					}
					c.function.name += d.function?.name ?? "";
					c.function.arguments += d.function?.arguments ?? "";
				}
				finish = choice.finish_reason ?? finish;
			}
			return { content, calls, finish };
		};
		const messages = [{ role: "user", content: question }];
		const first = await complete(messages);
		expectEqual("the streamed finish_reason", first.finish, "tool_calls");
		expectEqual("the number of streamed tool calls", first.calls.length, 1);
		const c = first.calls[0];
		const call = expectCall("the streamed tool call", c.id, c.function.name, c.function.arguments);
		messages.push({ role: "assistant", content: first.content || null, tool_calls: first.calls });
		messages.push({ role: "tool", tool_call_id: call.id, content: toolOutput });
		const second = await complete(messages);
		expectEqual("the streamed answer", second.content, answer);
		expectEqual("the streamed answer's finish_reason", second.finish, "stop");
		return { call, text: second.content };
	});

	// The function_call item of a reply to the question.
	const ask = async () => {
		const r = await client.responses.create({ model: toolsModel, input: question, tools: responsesTools });
		expectEqual("status", r.status, "completed");
		const items = r.output.filter((item) => item.type === "function_call");
		expectEqual("the number of function_call items", items.length, 1);
		return { r, call: expectCall("the function_call item", items[0].call_id, items[0].name, items[0].arguments) };
	};

	await check("responses_tools_previous", async () => {
		const { r, call } = await ask();
		const r2 = await client.responses.create({
			model: toolsModel,
			previous_response_id: r.id,
			input: [{ type: "function_call_output", call_id: call.id, output: toolOutput }],
			tools: responsesTools,
		});
		expectEqual("the answer's output_text", r2.output_text, answer);
		expectEqual("the answer's previous_response_id", r2.previous_response_id, r.id);
		return { call, text: r2.output_text, usage: r2.usage };
	});

	await check("responses_tools_inline", async () => {
		const { r, call } = await ask();
		const r2 = await client.responses.create({
			model: toolsModel,
			input: [
				{ role: "user", content: question },
				...r.output,
				{ type: "function_call_output", call_id: call.id, output: toolOutput },
			],
			tools: responsesTools,
		});
		expectEqual("the answer's output_text", r2.output_text, answer);
		return { call, text: r2.output_text, usage: r2.usage };
	});
}

try {
	await main();
} catch (err) {
	const detail = err instanceof OpenAI.APIError ? ` (HTTP ${err.status}: ${JSON.stringify(err.error)})` : "";
	console.error(`check.mjs: FAIL ${err.message.startsWith(current) ? "" : current + ": "}${err.message}${detail}`);
	process.exit(1);
}
console.log(JSON.stringify({ ok: true, sdk: VERSION, node: process.version, checks: results }));
